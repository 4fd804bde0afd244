import {
  to = switchboard_connector.weather
  id = "weather"
}
