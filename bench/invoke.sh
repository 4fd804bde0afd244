#!/usr/bin/env bash
# Action invocation overhead: what POST /v1/integrations/{connector}/run
# adds to calling the same upstream directly, without and with a small
# transformation (targets: at most 150 µs and 300 µs added at the median).
#
# BenchmarkInvokeOverhead starts the real server (Echo + bbolt) and an
# httptest upstream on loopback; each iteration makes one direct call and
# one call through Switchboard (API key auth, rate limiter, param checks,
# request building, credential injection, egress guard, invocation log,
# metrics, and the sandboxed script for "transform"), both over kept-alive
# connections, and reports the medians and p99s of both and added-p50-µs.
# The sandbox alone (hand-over to a warm worker process and back) is
# BenchmarkSandboxRun.
#
# Usage: bench/invoke.sh [extra go test flags, e.g. -count=5]
set -euo pipefail
cd "$(dirname "$0")/.."
go test ./server/ -run '^$' -bench BenchmarkInvokeOverhead -benchtime 5000x "$@"
go test ./server/transform/ -run '^$' -bench BenchmarkSandboxRun -benchtime 5000x "$@"
