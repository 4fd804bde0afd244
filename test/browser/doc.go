// Package browser tests Switchboard's pages in a real browser: Debian's
// chromium, headless, driven by chromedp, against a real server
// (servertest: Echo and bbolt in t.TempDir() behind httptest) with its
// upstreams, OAuth 2.0 authorization server, application and webhook
// receiver all on loopback. An end user completes connect sessions (API
// key and OAuth 2.0) and an operator uses the console. Screenshots go to
// $SWITCHBOARD_SCREENSHOTS, else artifacts/screenshots at the repository's
// root (git-ignored; CI keeps it as an artifact).
//
// The tests need chromium, chromium-browser or google-chrome in PATH
// (.ci/run installs Debian's chromium when none is there); without one
// they fail, never skip.
package browser
