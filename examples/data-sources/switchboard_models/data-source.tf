# Every chat model the server offers.
data "switchboard_models" "chat" {
  capability = "chat"
}

output "chat_models" {
  value = [for m in data.switchboard_models.chat.models : m.id]
}

# The embedding models of one provider.
data "switchboard_models" "openai_embeddings" {
  provider_name = "openai"
  capability    = "embeddings"
}
