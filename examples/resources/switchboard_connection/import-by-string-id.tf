import {
  to = switchboard_connection.weather
  id = "weather/default"
}
