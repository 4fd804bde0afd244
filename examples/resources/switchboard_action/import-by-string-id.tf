import {
  to = switchboard_action.forecast
  id = "weather/forecast"
}
