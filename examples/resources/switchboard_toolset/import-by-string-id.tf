import {
  to = switchboard_toolset.support
  id = "support"
}
