# An OAuth client is imported by its client_id (oc_...); the secret cannot
# be read back, so `client_secret` stays null after an import.
terraform import switchboard_oauth_client.reporting oc_0192a1b2c3d4e5f60718293a4b5c6d7e
