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
