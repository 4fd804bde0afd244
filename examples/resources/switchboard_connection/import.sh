# A connection is imported by <connector>/<name>; its credentials stay on
# the server.
terraform import switchboard_connection.weather weather/default
