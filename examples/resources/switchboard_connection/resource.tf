variable "weather_api_key" {
  type      = string
  sensitive = true
  ephemeral = true
}

# Static credentials are write-only: Terraform sends them and keeps no copy.
resource "switchboard_connection" "weather" {
  connector              = switchboard_connector.weather.name
  name                   = "default"
  api_key_wo             = var.weather_api_key
  credentials_wo_version = 1 # bump to send a rotated key
}

# An OAuth 2.0 (authorization_code) connection starts pending; the account
# owner completes it in the browser through
# GET /v1/connectors/crm/connect?connection=acme (called from your backend).
resource "switchboard_connection" "acme" {
  connector = switchboard_connector.crm.name
  name      = "acme"
}

output "acme_status" {
  value = switchboard_connection.acme.status # pending, active or reauth_required
}
