# A service that gets short-lived access tokens (client-credentials grant)
# instead of holding an API key, limited to the local models and a weekly
# budget.
resource "switchboard_oauth_client" "reporting" {
  name   = "reporting-job"
  scopes = ["llm"]

  models = ["local/*"]
  budget = {
    usd    = 10
    period = "week"
  }
}

# The secret is known to the run that created the client; hand it to the
# service through a secret store rather than an output.
output "reporting_client_id" {
  value = switchboard_oauth_client.reporting.client_id
}
