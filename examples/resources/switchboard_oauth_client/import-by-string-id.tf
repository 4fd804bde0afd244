import {
  to = switchboard_oauth_client.reporting
  id = "oc_0192a1b2c3d4e5f60718293a4b5c6d7e"
}
