# A generated signing secret, exposed once as a sensitive value.
resource "switchboard_webhook" "audit" {
  url         = "https://hooks.example.com/switchboard"
  events      = ["connector.created", "connector.updated", "connector.deleted", "api_key.created", "api_key.revoked"]
  description = "Audit trail"
}

output "audit_webhook_secret" {
  value     = switchboard_webhook.audit.secret
  sensitive = true
}

# Your own secret, write-only: never stored in the state.
variable "alerts_webhook_secret" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "switchboard_webhook" "alerts" {
  url               = "https://alerts.example.com/hooks/switchboard"
  events            = ["*", "action.failed"] # "*" excludes the high-volume action.* events unless listed
  secret_wo         = var.alerts_webhook_secret
  secret_wo_version = 1
}
