# A complete Switchboard setup: a connector to an HTTP API that takes an API
# key, two of its actions (one reshaping the response with a transformation),
# the account's credentials, a webhook for the lifecycle events, and the chat
# models the server offers. See README.md to apply it against a local server.

terraform {
  required_version = ">= 1.11" # write-only attributes
  required_providers {
    switchboard = {
      source = "switchboard-dev/switchboard"
    }
  }
}

# Configured from SWITCHBOARD_ENDPOINT and SWITCHBOARD_API_KEY.
provider "switchboard" {}

variable "weather_api_key" {
  description = "The WeatherAPI.com key; write-only, never stored in the state."
  type        = string
  sensitive   = true
  ephemeral   = true
}

variable "webhook_url" {
  description = "Where Switchboard POSTs its events."
  type        = string
  default     = "https://hooks.example.com/switchboard"
}

resource "switchboard_connector" "weather" {
  name         = "weather"
  display_name = "WeatherAPI.com"
  description  = "Current conditions and forecasts."
  base_url     = "https://api.weatherapi.com/v1"

  # Created after the webhook, so that the webhook receives this connector's
  # connector.created (and its actions' and connection's creation events):
  # without it Terraform creates both at once and the event may come first.
  depends_on = [switchboard_webhook.lifecycle]

  auth = {
    type = "apiKey"
    name = "key"
    in   = "query"
  }
}

# integrations.weather.run("current", {q: "Oslo"})
resource "switchboard_action" "current" {
  connector   = switchboard_connector.weather.name
  name        = "current"
  description = "Current conditions in a city, reduced to what the app shows."
  method      = "GET"
  path        = "/current.json"

  parameters = {
    q = { type = "string", required = true, in = "query", description = "City name, postcode or lat,lon" }
  }

  transformation = <<-JS
    return {
      city:        data.location.name,
      temperature: data.current.temp_c,
      condition:   data.current.condition.text,
    };
  JS
}

# integrations.weather.run("forecast", {q: "Oslo", days: 7})
resource "switchboard_action" "forecast" {
  connector   = switchboard_connector.weather.name
  name        = "forecast"
  description = "The daily forecast, as WeatherAPI.com returns it."
  method      = "GET"
  path        = "/forecast.json"
  timeout_ms  = 10000

  parameters = {
    q    = { type = "string", required = true, in = "query" }
    days = { type = "integer", enum = [1, 3, 7], default = 3, in = "query" }
  }
}

resource "switchboard_connection" "weather" {
  connector              = switchboard_connector.weather.name
  api_key_wo             = var.weather_api_key
  credentials_wo_version = 1 # bump after changing the key to send it
}

resource "switchboard_webhook" "lifecycle" {
  url         = var.webhook_url
  description = "Connector, action and connection lifecycle"
  events = [
    "connector.created", "connector.updated", "connector.deleted",
    "action.created", "action.updated", "action.deleted",
    "connection.created", "connection.deleted", "connection.reauth_required",
  ]
}

data "switchboard_models" "chat" {
  capability = "chat"
}

output "chat_models" {
  description = "The ids of the chat models, as requests name them."
  value       = [for m in data.switchboard_models.chat.models : m.id]
}

output "webhook_secret" {
  description = "The generated signing secret of the webhook (terraform output -raw webhook_secret)."
  value       = switchboard_webhook.lifecycle.secret
  sensitive   = true
}
