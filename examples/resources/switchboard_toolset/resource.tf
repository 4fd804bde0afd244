# The tools a support agent gets at /mcp/support: one weather action and
# every action of the CRM connector, including actions added later.
resource "switchboard_toolset" "support" {
  name        = "support"
  description = "Tools for the support agent."
  tools = [
    "${switchboard_connector.weather.name}.${switchboard_action.forecast.name}",
    "${switchboard_connector.crm.name}.*",
  ]
}

