# A key for a service that runs actions and calls models.
resource "switchboard_api_key" "billing" {
  name       = "billing-service"
  scopes     = ["invoke", "llm"]
  expires_at = "2030-01-01T00:00:00Z"
}

# The secret is known to the run that created the key; hand it to the
# service through a secret store rather than an output.
output "billing_key_prefix" {
  value = switchboard_api_key.billing.prefix
}

# A key with a policy: the models and connectors it may use, its own rate
# limit and a monthly budget. All of these (and the name) change in place:
# the secret stays the same. Changing scopes or expires_at creates a new key.
resource "switchboard_api_key" "support_bot" {
  name   = "support-bot"
  scopes = ["invoke", "llm"]

  models     = ["openai/gpt-4o-mini", "anthropic/*"]
  connectors = ["zendesk", "github.list_issues"]

  rate_limit = {
    requests_per_minute = 120
    tokens_per_minute   = 50000
  }

  budget = {
    usd      = 25
    period   = "month"
    alert_at = [0.5, 0.8] # usage.budget_alert events at 50% and 80%
  }
}

# A key for one end user of an agent: every tool call and action run it
# makes uses that user's connection, whatever the Switchboard-Connection
# header says. The connection may be created later (when the user connects).
resource "switchboard_api_key" "support_user_42" {
  name             = "support agent for user 42"
  scopes           = ["invoke"]
  bound_connection = "user-42"
}
