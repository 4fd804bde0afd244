# An API that takes a key in a header.
resource "switchboard_connector" "weather" {
  name         = "weather"
  display_name = "Weather API"
  description  = "Current conditions and forecasts."
  base_url     = "https://api.weatherapi.com/v1"

  auth = {
    type = "apiKey"
    name = "key"
    in   = "query"
  }
}

# An API whose users connect their own tokens on the hosted connect page
# (POST /v1/connect-sessions), which then returns to the application.
resource "switchboard_connector" "tickets" {
  name         = "tickets"
  display_name = "Tickets"
  base_url     = "https://api.tickets.example.com/v1"

  auth = {
    type          = "bearer"
    redirect_urls = ["https://app.example.com/integrations/connected"]
  }

  connect_page = {
    logo_url  = "https://app.example.com/logos/tickets.svg"
    help_text = "Create a token under Settings > API tokens.\nRead access is enough."
    # An action of this connector without required parameters (a
    # switchboard_action named "whoami"): the page runs it with the token the
    # user entered and stores the token only when it succeeds.
    test_action = "whoami"
  }
}

# An API behind OAuth 2.0: accounts connect through the browser.
variable "crm_client_secret" {
  type      = string
  sensitive = true
  ephemeral = true # Terraform 1.10+: never stored in state or plan files
}

resource "switchboard_connector" "crm" {
  name     = "crm"
  base_url = "https://api.crm.example.com/v2"

  auth = {
    type              = "oauth2"
    grant             = "authorization_code"
    authorization_url = "https://crm.example.com/oauth/authorize"
    token_url         = "https://crm.example.com/oauth/token"
    client_id         = "switchboard"
    scopes            = ["contacts.read", "offline_access"]
    redirect_urls     = ["https://app.example.com/integrations/connected"]

    # Write-only: sent to Switchboard's vault, never kept in the state.
    # Bump the version to send a rotated secret.
    client_secret_wo         = var.crm_client_secret
    client_secret_wo_version = 1
  }
}
