#!/usr/bin/env bash
# Streaming benchmark: STREAMS (2,000) concurrent streaming chats through
# POST /openai/v1/chat/completions ("stream": true), the mock upstream
# sending CHUNKS (20) content chunks INTERVAL (50 ms) apart, the first at
# once. Targets (issue 20): at most 2 ms added to time-to-first-token at
# p99, and the server's RSS under 200 MB while the streams are open.
#
#   bash bench/stream.sh     # ROUNDS=3 STREAMS=2000 CHUNKS=20 INTERVAL=50ms RAMP=500ms
#   PROFILE=1 bash bench/stream.sh
#                            # also: the server's heap profile, goroutine dump
#                            # and memory statistics taken in round 1 when all
#                            # streams are open, $OUT/heap.pprof,
#                            # $OUT/goroutines.txt and $OUT/memstats.txt, and
#                            # its CPU profile over round 1's two waves,
#                            # $OUT/cpu.pprof
#
# One wave: bench/streamload starts STREAMS streams, their starts spread
# evenly over RAMP (shorter than a stream, so that all of them are open at
# once: the summary shows the peak it counted), and measures each one's
# time to first token (request sent to first chunk with content) and
# checks it to the end (status, CHUNKS content chunks, finish reason,
# usage chunk, [DONE]); any stream that fails a check is counted and
# makes the run say FAILED. A warm-up wave before each measured one opens
# the client connections that the measured wave reuses. During the
# measured wave it samples the serving process's VmRSS every 10 ms (the
# target is read off the samples taken while all STREAMS were open) and
# reads its VmHWM (peak RSS since start) and CPU time. The machine's load
# average before each wave is printed: other work on the machine shows
# there (these figures need the machine to itself).
# Targets, each measured in every round, in turn:
#   direct       the mock itself (calibration: the machine, the mock and
#                the load generator alone)
#   bare         a bare httputil.ReverseProxy (bench/bareproxy) in front of
#                the mock, pinned like the server (calibration: what any Go
#                proxy costs here)
#   switchboard  Switchboard, with authentication (API key), the rate
#                limiter and usage accounting on
# "added" is a target's percentile minus direct's in the same round; the
# summary takes the median over ROUNDS rounds, and the peak RSS over all.
# "against the bare proxy" reads the targets relative to the calibration:
# Switchboard's TTFT p99 minus the bare proxy's, round by round, and its
# peak RSS minus the bare proxy's.
# Layout on a 2-core machine, as bench/llm.sh: the server (and bare) run
# pinned to core 0 with GOMAXPROCS=1; the mock and the load generator
# share core 1. Everything stays on 127.0.0.1 and stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-/tmp/switchboard-bench-stream}
ROUNDS=${ROUNDS:-3}
STREAMS=${STREAMS:-2000}
CHUNKS=${CHUNKS:-20}
INTERVAL=${INTERVAL:-50ms}
RAMP=${RAMP:-500ms}
SB_PORT=${SB_PORT:-18280}
MOCK_PORT=${MOCK_PORT:-18281}
BARE_PORT=${BARE_PORT:-18282}
KEY=sb_benchmark_key_0123456789abcdefghijklmnopqrstuvwxyz
# Client connections the server must admit (maxConnections): every stream
# holds one; the margin is for the readiness checks.
MAX_CONNS=$((STREAMS + 256))

# Each stream holds a client socket in the load generator and the server
# and an upstream socket in the server and the mock.
need=$((2 * STREAMS + 1024))
soft=$(ulimit -Sn)
if [ "$soft" != unlimited ] && [ "$soft" -lt "$need" ]; then
  hard=$(ulimit -Hn)
  if [ "$hard" != unlimited ] && [ "$hard" -lt "$need" ]; then
    echo "the open-file limit is $hard (hard); $STREAMS streams need $need: raise it (ulimit -Hn, as root) or lower STREAMS"
    exit 1
  fi
  ulimit -n "$need"
fi
echo "== open-file limit $(ulimit -n); server maxConnections $MAX_CONNS"

mkdir -p "$OUT"
rm -rf "$OUT/data"
echo "== build"
PROFILE=${PROFILE:-}
PPROF_ADDR=127.0.0.1:${PPROF_PORT:-18283}
if [ -n "$PROFILE" ]; then
  go build -tags pprof -o "$OUT/switchboard" .
else
  go build -o "$OUT/switchboard" .
fi
go build -o "$OUT/mockllm" ./bench/mockllm
go build -o "$OUT/bareproxy" ./bench/bareproxy
go build -o "$OUT/streamload" ./bench/streamload

cat > "$OUT/config.yaml" <<YAML
# Every stream holds a client connection: admit all of them.
maxConnections: $MAX_CONNS
limits:
  # High enough never to refuse the benchmark; the limiter still runs.
  requestsPerMinute: 1000000000
  tokensPerMinute: 1000000000000
providers:
  - name: mock
    type: openai
    baseUrl: http://127.0.0.1:$MOCK_PORT/v1
    timeout: 60s
    models:
      - name: bench
        capabilities: [chat]
        maxTokens: 8192
        pricing: {input: 0.15, output: 0.60}
YAML

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

taskset -c 1 "$OUT/mockllm" -addr "127.0.0.1:$MOCK_PORT" -chunks "$CHUNKS" -interval "$INTERVAL" & pids+=($!)
MOCK_PID=$!
SWITCHBOARD_PPROF_ADDR=${PROFILE:+$PPROF_ADDR} SWITCHBOARD_ADMIN_KEY=$KEY SWITCHBOARD_DATA_DIR="$OUT/data" SWITCHBOARD_ADDR="127.0.0.1:$SB_PORT" \
  SWITCHBOARD_CONFIG="$OUT/config.yaml" GOMAXPROCS=1 \
  taskset -c 0 "$OUT/switchboard" serve >"$OUT/server.log" 2>&1 & pids+=($!)
SB_PID=$!
GOMAXPROCS=1 taskset -c 0 "$OUT/bareproxy" -addr "127.0.0.1:$BARE_PORT" -upstream "http://127.0.0.1:$MOCK_PORT" & pids+=($!)
BARE_PID=$!

for _ in $(seq 100); do curl -fs "http://127.0.0.1:$SB_PORT/readyz" >/dev/null && break; sleep 0.1; done
probe='{"model":"mock/bench","messages":[{"role":"user","content":"Count to twenty."}],"stream":true,"stream_options":{"include_usage":true}}'
curl -fsN -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d "$probe" \
  "http://127.0.0.1:$SB_PORT/openai/v1/chat/completions" | grep -q '^data: \[DONE\]' \
  || { echo "server did not stream; log:"; tail -20 "$OUT/server.log"; exit 1; }
echo "== server: $(grep -m1 -o 'maxConnections[=":]*[0-9]*' "$OUT/server.log" || echo 'maxConnections not logged')"

# name -> url|pid
declare -A TARGETS=(
  [direct]="http://127.0.0.1:$MOCK_PORT/v1/chat/completions|$MOCK_PID"
  [bare]="http://127.0.0.1:$BARE_PORT/v1/chat/completions|$BARE_PID"
  [switchboard]="http://127.0.0.1:$SB_PORT/openai/v1/chat/completions|$SB_PID"
)
# "direct" comes first in each round: the summary subtracts it.
NAMES="direct bare switchboard"
for round in $(seq "$ROUNDS"); do
  echo "== round $round/$ROUNDS: $STREAMS streams over $RAMP, $CHUNKS chunks $INTERVAL apart (a warm-up wave, then the measured one)"
  for name in $NAMES; do
    IFS='|' read -r url pid <<<"${TARGETS[$name]}"
    load=$(cut -d' ' -f1 /proc/loadavg)
    prof=()
    if [ -n "$PROFILE" ] && [ "$name" = switchboard ] && [ "$round" = 1 ]; then
      prof=(-pprof "http://$PPROF_ADDR" -pprof-dir "$OUT")
      curl -fs "http://$PPROF_ADDR/debug/pprof/profile?seconds=5" >"$OUT/cpu.pprof" &
    fi
    taskset -c 1 "$OUT/streamload" -url "$url" -key "$KEY" -streams "$STREAMS" -chunks "$CHUNKS" -ramp "$RAMP" \
      -pid "$pid" "${prof[@]}" >"$OUT/stream-$name-$round.json"
    python3 - "$OUT/stream-$name-$round.json" "$name" "$load" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bad = r["streams"] - r["ok"]
print(f"   {sys.argv[2]:12} ttft p50 {r['ttftMs']['p50']:8.2f} ms  p99 {r['ttftMs']['p99']:8.2f} ms  "
      f"peak open {r['peakOpen']}  rss all open {r['rssAllOpenKB']/1024:6.1f} MB, wave peak {r['rssPeakKB']/1024:6.1f} MB  "
      f"failed {bad}  (load average before: {sys.argv[3]})")
PY
  done
done
if [ -n "$PROFILE" ] && [ -s "$OUT/heap.pprof" ]; then
  echo "== with all streams open in round 1: $(head -1 "$OUT/goroutines.txt"); heap: go tool pprof -sample_index=inuse_space $OUT/switchboard $OUT/heap.pprof; cpu: go tool pprof $OUT/switchboard $OUT/cpu.pprof"
fi
python3 - "$OUT" "$ROUNDS" "$STREAMS" "$CHUNKS" "$NAMES" <<'PY'
import json, statistics, sys
out, rounds, streams, chunks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
names = sys.argv[5].split()
med = statistics.median
runs = {n: [json.load(open(f"{out}/stream-{n}-{i}.json")) for i in range(1, rounds + 1)] for n in names}
print(f"== median of {rounds} round(s): {streams} concurrent streams, {chunks} chunks each")
print("   ttft: request sent to the first chunk with content; max gap: a stream's longest")
print("   wait between two content chunks; cpu: the serving process's CPU time over the")
print("   measured wave's wall time (1.00 = its core fully used), and per stream (what a")
print("   stream costs it, whatever else runs on the machine); rss open: peak VmRSS sampled")
print("   while all streams were open; wave: peak VmRSS over the whole wave; before: at its")
print("   start; hwm: VmHWM (peak since the process started); all maxima over the rounds.")
print(f"{'':12}{'ttft p50':>9}{'p90':>9}{'p99':>9}{'max':>9}{'gap p99':>9}{'wall s':>8}{'cpu':>6}{'ms/stream':>10}{'peak open':>10}"
      f"{'rss open':>9}{'wave':>7}{'before':>7}{'hwm':>7}{'failed':>7}")
q = lambda n, k, f: med(r[k][f] for r in runs[n])
failed = 0
for n in names:
    rs = runs[n]
    bad = sum(r["streams"] - r["ok"] for r in rs)
    failed += bad
    print(f"{n:12}{q(n,'ttftMs','p50'):9.2f}{q(n,'ttftMs','p90'):9.2f}{q(n,'ttftMs','p99'):9.2f}{q(n,'ttftMs','max'):9.2f}"
          f"{q(n,'maxGapMs','p99'):9.2f}{med(r['wallMs'] for r in rs)/1000:8.2f}{med(r['cpuMs']/r['wallMs'] for r in rs):6.2f}{med(r['cpuMs']/r['streams'] for r in rs):10.3f}"
          f"{min(r['peakOpen'] for r in rs):10d}{max(r['rssAllOpenKB'] for r in rs)/1024:9.1f}{max(r['rssPeakKB'] for r in rs)/1024:7.1f}"
          f"{max(r['rssBeforeKB'] for r in rs)/1024:7.1f}{max(r['hwmKB'] for r in rs)/1024:7.1f}{bad:7d}")
for n in names[1:]:
    add = lambda f: med(runs[n][i]["ttftMs"][f] - runs["direct"][i]["ttftMs"][f] for i in range(rounds))
    per = ", ".join(f"{runs[n][i]['ttftMs']['p99'] - runs['direct'][i]['ttftMs']['p99']:.2f}" for i in range(rounds))
    who = "a bare reverse proxy" if n == "bare" else "Switchboard"
    print(f"ttft added by {who}: p50 {add('p50'):.2f} ms, p99 {add('p99'):.2f} ms (p99 by round: {per})")
sb = runs.get("switchboard")
if sb:
    p99 = med(sb[i]["ttftMs"]["p99"] - runs["direct"][i]["ttftMs"]["p99"] for i in range(rounds))
    rss = max(r["rssAllOpenKB"] for r in sb) / 1024
    print(f"targets: ttft added at p99 {p99:.2f} ms (at most 2 ms: {'met' if p99 <= 2 else 'NOT met'}); "
          f"switchboard peak RSS {rss:.1f} MB while all {streams} were open (under 200 MB: {'met' if rss < 200 else 'NOT met'}; "
          f"{max(r['rssPeakKB'] for r in sb) / 1024:.1f} MB over the whole wave)")
    if "bare" in runs:
        # Relative to the calibration: what Switchboard adds over any Go
        # proxy measured in the same rounds (the reading when the host's own
        # noise, the bare proxy's spread, is larger than the target).
        bare = runs["bare"]
        d = [sb[i]["ttftMs"]["p99"] - bare[i]["ttftMs"]["p99"] for i in range(rounds)]
        brss = max(r["rssAllOpenKB"] for r in bare) / 1024
        print(f"against the bare proxy: ttft p99 {med(d):+.2f} ms (by round: {', '.join(f'{x:+.2f}' for x in d)}; "
              f"at most +2 ms: {'met' if med(d) <= 2 else 'NOT met'}); peak RSS {rss - brss:+.1f} MB ({rss:.1f} against {brss:.1f})")
    if min(r["allOpenSamples"] for r in sb) == 0:
        print("note: in some round no RSS sample fell while all streams were open; its figure is 0")
    if min(r["peakOpen"] for r in sb) < streams:
        print(f"note: at most {min(r['peakOpen'] for r in sb)} of {streams} streams were open at once in some round (RAMP too long?)")
for n in names:
    for i, r in enumerate(runs[n], 1):
        for reason, k in sorted(r["failures"].items(), key=lambda x: -x[1]):
            print(f"FAILED {n} round {i}: {k} stream(s): {reason}")
if failed:
    print(f"FAILED: {failed} stream(s) did not complete with all {chunks} chunks; see above")
    sys.exit(1)
print(f"all {streams * rounds * len(names)} measured streams completed with {chunks} chunks, finish reason, usage and [DONE]")
PY
echo "usage accounting: $(grep -c 'usage flush failed' "$OUT/server.log" || true) failed flushes; server log in $OUT/server.log"
