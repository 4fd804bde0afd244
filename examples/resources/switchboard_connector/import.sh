# A connector is imported by its name. Its OAuth client secret stays on the
# server; set client_secret_wo_version in the configuration to send a new one.
terraform import switchboard_connector.weather weather
