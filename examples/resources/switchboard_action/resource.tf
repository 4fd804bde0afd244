resource "switchboard_action" "forecast" {
  connector   = switchboard_connector.weather.name
  name        = "forecast"
  description = "Daily forecast for a city."
  method      = "GET"
  path        = "/forecast.json"

  parameters = {
    q    = { type = "string", required = true, description = "City name or coordinates", in = "query" }
    days = { type = "integer", enum = [1, 3, 7], default = 3, in = "query" }
  }

  headers = {
    "Accept-Language" = "en"
  }

  # The body of a function of (data, response): return what callers get.
  transformation = <<-JS
    return data.forecast.forecastday.map(d => ({
      date: d.date,
      high: d.day.maxtemp_c,
      low:  d.day.mintemp_c,
    }));
  JS

  timeout_ms = 10000
}

# A POST with a JSON body template; "{{params.x}}" alone in a string becomes
# the typed value.
resource "switchboard_action" "create_contact" {
  connector = switchboard_connector.crm.name
  name      = "create_contact"
  method    = "POST"
  path      = "/contacts"

  parameters = {
    email = { type = "string", required = true }
    tags  = { type = "array", default = jsonencode(["lead"]) }
  }

  body = jsonencode({
    email = "{{params.email}}"
    tags  = "{{params.tags}}"
  })
}
