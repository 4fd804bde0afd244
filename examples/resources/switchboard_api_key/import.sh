# An API key is imported by its id (key_...), not its secret; the secret
# cannot be read back, so `key` stays null after an import.
terraform import switchboard_api_key.billing key_0192a1b2c3d4e5f60718293a4b5c6d7e
