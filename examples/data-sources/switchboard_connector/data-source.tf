# A connector managed elsewhere.
data "switchboard_connector" "crm" {
  name = "crm"
}

output "crm_base_url" {
  value = data.switchboard_connector.crm.base_url
}
