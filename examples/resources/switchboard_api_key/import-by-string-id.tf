import {
  to = switchboard_api_key.billing
  id = "key_0192a1b2c3d4e5f60718293a4b5c6d7e"
}
