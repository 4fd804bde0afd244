# This month's spend of one key, per model.
data "switchboard_usage" "support_bot" {
  key      = switchboard_api_key.support_bot.id
  from     = formatdate("YYYY-MM-01'T'00:00:00Z", plantimestamp())
  group_by = ["model"]
}

output "support_bot_spend_usd" {
  value = data.switchboard_usage.support_bot.total.cost_usd
}

# A warning in every plan once a key has spent most of its budget.
check "support_bot_budget" {
  assert {
    condition     = data.switchboard_usage.support_bot.total.cost_usd < 0.9 * switchboard_api_key.support_bot.budget.usd
    error_message = "support-bot has spent 90% of its monthly budget."
  }
}

# Requests and tokens per day over everything the server recorded.
data "switchboard_usage" "daily" {
  group_by = ["day"]
}
