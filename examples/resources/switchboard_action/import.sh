# An action is imported by <connector>/<action>.
terraform import switchboard_action.forecast weather/forecast
