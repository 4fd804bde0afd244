# A webhook is imported by its id (wh_...); its secret stays on the server.
terraform import switchboard_webhook.audit wh_0192a1b2c3d4e5f60718293a4b5c6d7e
