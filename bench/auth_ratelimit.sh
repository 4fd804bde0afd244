#!/usr/bin/env bash
# Measures what caller authentication and rate limiting cost per request:
#   - the limiter alone (one credential, and 1000 credentials in parallel),
#     and a token reservation + settlement;
#   - access-token verification, cached (every use after the first) and
#     uncached (the first use: Ed25519 signature check), and token issuance;
#   - a whole request through the Echo stack (no network) with an API key or
#     an access token, limiter off and on.
# Target: a few microseconds per request for the limiter and a cached token.
# Usage: bench/auth_ratelimit.sh [extra go test flags, e.g. -count=5]
set -euo pipefail
cd "$(dirname "$0")/.."
go test ./server/ratelimit/ ./server/oauthserver/ -run '^$' -bench . -benchmem "$@"
go test ./server/ -run '^$' -bench BenchmarkAuthenticatedRequest -benchmem "$@"
