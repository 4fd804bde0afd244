terraform {
  required_providers {
    switchboard = {
      source = "switchboard-dev/switchboard"
    }
  }
}

# Both settings fall back to the environment: SWITCHBOARD_ENDPOINT and
# SWITCHBOARD_API_KEY. Prefer the environment (or a secret store) for the key.
provider "switchboard" {
  endpoint = "http://127.0.0.1:8080"
  api_key  = var.switchboard_api_key
}

variable "switchboard_api_key" {
  type      = string
  sensitive = true
}
