data "switchboard_model" "mini" {
  id = "openai/gpt-4o-mini"
}

output "mini_price_per_million_input_tokens" {
  value = data.switchboard_model.mini.pricing == null ? null : data.switchboard_model.mini.pricing.input
}
