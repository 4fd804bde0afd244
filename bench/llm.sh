#!/usr/bin/env bash
# LLM gateway benchmark: the latency Switchboard adds to a chat call and its
# maximum throughput on one core, for /v1/chat ("native"),
# /openai/v1/chat/completions ("openai"), /openai/v1/responses
# ("responses") and /anthropic/v1/messages ("messages", authenticated
# with x-api-key as Anthropic's SDK does), all over the same
# OpenAI-compatible mock model, with authentication (API key), the rate
# limiter and usage accounting on. "budget" is /v1/chat again with an API
# key that has a spend budget (large enough never to refuse), so that one
# run shows the cost of budget enforcement side by side with "native" (the
# summary ends with the difference; the target is within 3%). The summary
# also gives responses' and messages' throughput relative to openai's
# (issue 20's target: within 10%, per core), round by round and their
# median.
#
#   bash bench/llm.sh            # ROUNDS=3 DURATION=10s RATE=2000 CONNS=64 by default
#   ROWS=openai,responses bash bench/llm.sh
#                                # only these rows (and direct, which every
#                                # run measures); the default is all of
#                                # cross,bare,native,budget,openai,responses,messages
#   PROFILE=1 bash bench/llm.sh  # also: CPU profile of the server during
#                                # each of its rows' throughput runs in round 1,
#                                # $OUT/cpu-<row>.pprof (cpu-native.pprof, ...)
#
# Before measuring, each selected Switchboard row is called once and its
# answer checked (status and shape); a route that is missing stops the run
# with its status, so that a row is never measured on errors.
#
# Layout on a 2-core machine: the server runs pinned to core 0 with
# GOMAXPROCS=1; the mock upstream (bench/mockllm) and the load generators
# share core 1. Max throughput: wrk, closed loop, CONNS connections.
# Added latency: vegeta at a fixed RATE (open loop), through Switchboard
# and straight to the mock; "added" is the difference of the percentiles.
# The machine is shared and its speed drifts: each of ROUNDS rounds
# measures every target in turn, and the summary takes the median over the
# rounds (for "added", of each round's difference).
# Calibration: "bare" is a bare httputil.ReverseProxy (bench/bareproxy) run
# the same way, pinned to the same core, so that the machine's own speed
# (and whatever else runs on it) can be read off: compare against it.
# "cross" (latency only) is a second mock pinned to the server's core and
# called directly: no proxy code at all, only the trip to core 0 and back.
# Its tail is the machine's own for anything that runs on that core (on a
# virtual machine whose idle vCPU halts, waking it is the hypervisor's
# business, and a proxied request wakes core 0 twice). Its mock does not
# share a core with the load generator, so its p50 is below direct's.
# Everything stays on 127.0.0.1 and stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-/tmp/switchboard-bench}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-2000}
CONNS=${CONNS:-64}
SB_PORT=${SB_PORT:-18080}
MOCK_PORT=${MOCK_PORT:-18081}
BARE_PORT=${BARE_PORT:-18082}
CROSS_PORT=${CROSS_PORT:-18084}
KEY=sb_benchmark_key_0123456789abcdefghijklmnopqrstuvwxyz
export SB_KEY=$KEY
ALL_ROWS="cross bare native budget openai responses messages"
ROWS=${ROWS:-${ALL_ROWS// /,}}

# The rows to measure, in ALL_ROWS' order, direct first (the summary
# subtracts it from the others).
SELECTED="direct"
for r in ${ROWS//,/ }; do
  case " $ALL_ROWS direct " in
    *" $r "*) ;;
    *) echo "ROWS: unknown row $r; the rows are: direct $ALL_ROWS"; exit 1 ;;
  esac
done
for r in $ALL_ROWS; do
  case ",$ROWS," in *",$r,"*) SELECTED="$SELECTED $r" ;; esac
done
# selected NAME: whether row NAME is measured.
selected() { case " $SELECTED " in *" $1 "*) return 0 ;; esac; return 1; }

mkdir -p "$OUT"
rm -rf "$OUT/data"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
echo "== build"
PROFILE=${PROFILE:-}
PPROF_ADDR=127.0.0.1:${PPROF_PORT:-18083}
if [ -n "$PROFILE" ]; then
  go build -tags pprof -o "$OUT/switchboard" .
else
  go build -o "$OUT/switchboard" .
fi
go build -o "$OUT/mockllm" ./bench/mockllm
go build -o "$OUT/bareproxy" ./bench/bareproxy
[ -x "$OUT/vegeta" ] || GOBIN="$OUT" go install github.com/tsenart/vegeta/v12@v12.13.0

cat > "$OUT/config.yaml" <<YAML
limits:
  # High enough never to refuse the benchmark; the limiter still runs.
  requestsPerMinute: 1000000000
  tokensPerMinute: 1000000000000
providers:
  - name: mock
    type: openai
    baseUrl: http://127.0.0.1:$MOCK_PORT/v1
    timeout: 10s
    models:
      - name: bench
        capabilities: [chat]
        maxTokens: 8192
        pricing: {input: 0.15, output: 0.60}
YAML
BODY='{"model":"mock/bench","messages":[{"role":"user","content":"Say hello in five words."}],"maxTokens":32}'
OBODY='{"model":"mock/bench","messages":[{"role":"user","content":"Say hello in five words."}],"max_tokens":32}'
RBODY='{"model":"mock/bench","input":"Say hello in five words."}'
ABODY='{"model":"mock/bench","max_tokens":16,"messages":[{"role":"user","content":"Say hello in five words."}]}'
printf '%s' "$BODY" > "$OUT/native.json"
printf '%s' "$OBODY" > "$OUT/openai.json"
printf '%s' "$RBODY" > "$OUT/responses.json"
printf '%s' "$ABODY" > "$OUT/messages.json"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

taskset -c 1 "$OUT/mockllm" -addr "127.0.0.1:$MOCK_PORT" & pids+=($!)
MOCK_PID=$!
SWITCHBOARD_PPROF_ADDR=${PROFILE:+$PPROF_ADDR} SWITCHBOARD_ADMIN_KEY=$KEY SWITCHBOARD_DATA_DIR="$OUT/data" SWITCHBOARD_ADDR="127.0.0.1:$SB_PORT" \
  SWITCHBOARD_CONFIG="$OUT/config.yaml" GOMAXPROCS=1 \
  taskset -c 0 "$OUT/switchboard" serve >"$OUT/server.log" 2>&1 & pids+=($!)
SB_PID=$!
GOMAXPROCS=1 taskset -c 0 "$OUT/bareproxy" -addr "127.0.0.1:$BARE_PORT" -upstream "http://127.0.0.1:$MOCK_PORT" & pids+=($!)
BARE_PID=$!
GOMAXPROCS=1 taskset -c 0 "$OUT/mockllm" -addr "127.0.0.1:$CROSS_PORT" & pids+=($!)
CROSS_PID=$!

# steal: ticks the hypervisor took from core 0 and core 1 ("steal" in
# /proc/stat), to show how much of a run the host took away.
steal() { awk '/^cpu0 /{a=$9} /^cpu1 /{b=$9} END{print a" "b}' /proc/stat; }
# cpu_ticks PID: user+system CPU time of a process, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TCK=$(getconf CLK_TCK)
# pid_of NAME: the process that serves target NAME.
pid_of() { case $1 in direct) echo "$MOCK_PID" ;; cross) echo "$CROSS_PID" ;; bare) echo "$BARE_PID" ;; *) echo "$SB_PID" ;; esac; }
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$SB_PORT/readyz" >/dev/null && break; sleep 0.1; done
curl -fs -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d "$BODY" "http://127.0.0.1:$SB_PORT/v1/chat" >/dev/null \
  || { echo "server did not answer; log:"; tail -20 "$OUT/server.log"; exit 1; }
# A key with a spend budget for the "budget" target: $1e9 a month, so that
# every call is admitted, reserved and settled but none is refused.
BUDGET_KEY=$KEY
if selected budget; then
  BUDGET_KEY=$(curl -fs -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
    -d '{"name":"bench-budget","scopes":["llm"],"budget":{"usd":1000000000,"period":"month","alertAt":[0.5]}}' \
    "http://127.0.0.1:$SB_PORT/v1/api-keys" | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
fi

# AUTH selects the credential's header: "bearer" (Authorization: Bearer)
# or "x-api-key" (with anthropic-version, as Anthropic's SDK sends them).
cat > "$OUT/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
if os.getenv("AUTH") == "x-api-key" then
  wrk.headers["x-api-key"] = os.getenv("SB_KEY")
  wrk.headers["anthropic-version"] = "2023-06-01"
else
  wrk.headers["Authorization"] = "Bearer " .. os.getenv("SB_KEY")
end
local f = io.open(os.getenv("BODY_FILE"), "r")
wrk.body = f:read("*a")
f:close()
LUA

# name -> url|body|key|auth
declare -A URLS=(
  [direct]="http://127.0.0.1:$MOCK_PORT/v1/chat/completions|$OUT/openai.json|$KEY|bearer"
  [cross]="http://127.0.0.1:$CROSS_PORT/v1/chat/completions|$OUT/openai.json|$KEY|bearer"
  [bare]="http://127.0.0.1:$BARE_PORT/v1/chat/completions|$OUT/openai.json|$KEY|bearer"
  [native]="http://127.0.0.1:$SB_PORT/v1/chat|$OUT/native.json|$KEY|bearer"
  [budget]="http://127.0.0.1:$SB_PORT/v1/chat|$OUT/native.json|$BUDGET_KEY|bearer"
  [openai]="http://127.0.0.1:$SB_PORT/openai/v1/chat/completions|$OUT/openai.json|$KEY|bearer"
  [responses]="http://127.0.0.1:$SB_PORT/openai/v1/responses|$OUT/responses.json|$KEY|bearer"
  [messages]="http://127.0.0.1:$SB_PORT/anthropic/v1/messages|$OUT/messages.json|$KEY|x-api-key"
)
# auth_headers AUTH KEY: the request headers that carry KEY, one a line.
auth_headers() {
  if [ "$1" = x-api-key ]; then printf 'x-api-key: %s\nanthropic-version: 2023-06-01\n' "$2"
  else printf 'Authorization: Bearer %s\n' "$2"; fi
}
# What a row's answer must hold (a JSON fragment), so that a row is not
# measured on an answer of the wrong shape.
declare -A SHAPES=(
  [native]='"message"' [budget]='"message"' [openai]='"object":"chat.completion"'
  [responses]='"object":"response"' [messages]='"type":"message"'
)
for name in $SELECTED; do
  [ -n "${SHAPES[$name]:-}" ] || continue
  IFS='|' read -r url body key auth <<<"${URLS[$name]}"
  hdrs=()
  while IFS= read -r h; do hdrs+=(-H "$h"); done < <(auth_headers "$auth" "$key")
  code=$(curl -s -o "$OUT/probe-$name.json" -w '%{http_code}' "${hdrs[@]}" -H 'Content-Type: application/json' \
    --data-binary "@$body" "$url" || true)
  if [ "$code" != 200 ] || ! tr -d ' \n' <"$OUT/probe-$name.json" | grep -qF "${SHAPES[$name]}"; then
    echo "row $name: POST ${url#http://127.0.0.1:"$SB_PORT"} answered $code, not 200 with ${SHAPES[$name]}:"
    head -c 500 "$OUT/probe-$name.json"; echo
    echo "(leave it out with ROWS, e.g. ROWS=$(echo "$SELECTED" | tr ' ' '\n' | grep -vx "direct\|$name" | paste -sd,))"
    exit 1
  fi
done

# One round measures every target once, in turn, so that a slow spell of
# the machine touches all of them; the summary is the median over ROUNDS.
# "direct" comes first: the summary subtracts it from the others. "cross"
# is measured for latency only.
THROUGHPUT_TARGETS=$(echo "$SELECTED" | tr ' ' '\n' | grep -vx cross | paste -sd' ')
LATENCY_TARGETS=$SELECTED
: >"$OUT/throughput.tsv"
: >"$OUT/latency-runs.tsv"
for round in $(seq "$ROUNDS"); do
  echo "== round $round/$ROUNDS: max throughput (wrk -t1 -c$CONNS -d$DURATION), then latency at $RATE req/s (vegeta, $DURATION)"
  for name in $THROUGHPUT_TARGETS; do
    IFS='|' read -r url body key auth <<<"${URLS[$name]}"
    pid=$(pid_of "$name")
    # warm up connections and caches
    AUTH=$auth SB_KEY=$key BODY_FILE=$body taskset -c 1 wrk -t1 -c"$CONNS" -d2s -s "$OUT/post.lua" "$url" >/dev/null
    prof=
    if [ -n "$PROFILE" ] && [ "$name" != direct ] && [ "$name" != bare ] && [ "$round" = 1 ]; then
      # The profile covers the middle of the run.
      (sleep 1; curl -fs "http://$PPROF_ADDR/debug/pprof/profile?seconds=$(( ${DURATION%s} > 4 ? ${DURATION%s} - 3 : 1 ))" >"$OUT/cpu-$name.pprof") &
      prof=$!
    fi
    t0=$(cpu_ticks "$pid")
    AUTH=$auth SB_KEY=$key BODY_FILE=$body taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" -s "$OUT/post.lua" --latency "$url" >"$OUT/wrk-$name.txt"
    t1=$(cpu_ticks "$pid")
    [ -n "$prof" ] && wait "$prof"
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$(awk '/Requests\/sec/ {print $2}' "$OUT/wrk-$name.txt")" \
      "$(awk '/requests in/ {print $1}' "$OUT/wrk-$name.txt")" "$((t1 - t0))" \
      "$(awk '/Non-2xx/ {print $NF}' "$OUT/wrk-$name.txt" | grep . || echo 0)" >>"$OUT/throughput.tsv"
  done
  for name in $LATENCY_TARGETS; do
    IFS='|' read -r url body key auth <<<"${URLS[$name]}"
    { printf 'POST %s\nContent-Type: application/json\n' "$url"; auth_headers "$auth" "$key"; printf '@%s\n' "$body"; } >"$OUT/target-$name.txt"
    taskset -c 1 "$OUT/vegeta" attack -targets="$OUT/target-$name.txt" -rate="$RATE" -duration=3s -keepalive=true >/dev/null
    pid=$(pid_of "$name")
    s0=$(steal); t0=$(cpu_ticks "$pid")
    taskset -c 1 "$OUT/vegeta" attack -targets="$OUT/target-$name.txt" -rate="$RATE" -duration="$DURATION" -keepalive=true \
      | "$OUT/vegeta" report -type=json >"$OUT/vegeta-$name-$round.json"
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$round" "$s0" "$(steal)" "$(( $(cpu_ticks "$pid") - t0 ))" >>"$OUT/latency-runs.tsv"
  done
done
[ -n "$PROFILE" ] && echo "profiles of round 1: go tool pprof $OUT/switchboard $OUT/cpu-<row>.pprof ($(cd "$OUT" && ls cpu-*.pprof 2>/dev/null | paste -sd' '))"
python3 - "$OUT" "$ROUNDS" "$TCK" "$RATE" "$THROUGHPUT_TARGETS" "$LATENCY_TARGETS" <<'PY'
import json, statistics, sys
out, rounds, tck, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
names, lnames = sys.argv[5].split(), sys.argv[6].split()
med = statistics.median
print(f"== median of {rounds} round(s)")
print("   cpu/req: CPU time the serving process spent per request (user+sys);")
print("   per core: requests per CPU-second of that process, i.e. what one fully")
print("   used core sustains; it does not depend on what else runs on the machine.")
rows = [l.split("\t") for l in open(f"{out}/throughput.tsv").read().splitlines()]
for n in names:
    rs = [r for r in rows if r[0] == n]
    rps = med(float(r[1]) for r in rs)
    cpu = med(int(r[3]) / tck / int(r[2]) for r in rs)  # seconds per request
    bad = sum(int(r[4]) for r in rs)
    print(f"{n:10}{rps:9.0f} req/s   cpu/req {cpu*1e6:6.1f} us   per core {1/cpu:7.0f} req/s   non-2xx {bad}")
ms = lambda ns: ns / 1e6
lat = {n: [json.load(open(f"{out}/vegeta-{n}-{i}.json")) for i in range(1, rounds + 1)] for n in lnames}
print(f"{'':10}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'success':>9}")
for n in lnames:
    vs = lat[n]
    q = lambda k: med(ms(v["latencies"][k]) for v in vs)
    print(f"{n:10}{q('50th'):9.3f}{q('90th'):9.3f}{q('99th'):9.3f}{min(v['success'] for v in vs)*100:8.2f}%")
for n in lnames[1:]:
    # "added" per round against that round's direct run, then the median
    add = lambda k: med(ms(lat[n][i]["latencies"][k] - lat["direct"][i]["latencies"][k]) for i in range(rounds))
    who = {"cross": "the trip to core 0 alone (mock there, no proxy)", "bare": "a bare reverse proxy"}.get(n, f"Switchboard ({n})")
    per = ", ".join(f"{ms(lat[n][i]['latencies']['99th'] - lat['direct'][i]['latencies']['99th']):.3f}" for i in range(rounds))
    print(f"added by {who}: p50 {add('50th'):.3f} ms, p99 {add('99th'):.3f} ms (p99 by round: {per})")
st, busy = {}, {}
for l in open(f"{out}/latency-runs.tsv").read().splitlines():
    n, r, a, b, c = l.split("\t")
    (a0, a1), (b0, b1) = map(int, a.split()), map(int, b.split())
    st[(n, int(r))] = ((b0 - a0) * 1000 // tck, (b1 - a1) * 1000 // tck)
    busy[(n, int(r))] = int(c) / tck / lat[n][int(r) - 1]["requests"]
# At a fixed rate the core idles between requests, and each one starts with
# cold caches: it costs several times its cpu/req at full load.
print(f"cpu/req during the latency runs (at {rate} req/s), median:", ", ".join(
    f"{n} {med(busy[(n, i)] for i in range(1, rounds + 1)) * 1e6:.0f} us" for n in lnames))
if "budget" in names and "native" in names:
    # Budget enforcement: the same /v1/chat with and without a budget.
    nat = [r for r in rows if r[0] == "native"]
    bud = [r for r in rows if r[0] == "budget"]
    rps_n, rps_b = med(float(r[1]) for r in nat), med(float(r[1]) for r in bud)
    cpu_n = med(int(r[3]) / tck / int(r[2]) for r in nat)
    cpu_b = med(int(r[3]) / tck / int(r[2]) for r in bud)
    p = lambda n, k: med(ms(v["latencies"][k]) for v in lat[n])
    print(f"budget vs native (/v1/chat with and without a spend budget): throughput {100*(rps_b/rps_n-1):+.1f}%, "
          f"cpu/req {100*(cpu_b/cpu_n-1):+.1f}%, p50 {100*(p('budget','50th')/p('native','50th')-1):+.1f}%, "
          f"p99 {100*(p('budget','99th')/p('native','99th')-1):+.1f}%")
if "openai" in names:
    # Issue 20: each new wire format within 10% of /openai/v1/chat/completions.
    # Compared round by round (each row is measured right after openai, so
    # that both see the same spell of the machine), then the median: the
    # host's speed drifts by more than 10% between rounds.
    orows = [r for r in rows if r[0] == "openai"]
    cpu = lambda r: int(r[3]) / tck / int(r[2])
    for n, route in (("responses", "/openai/v1/responses"), ("messages", "/anthropic/v1/messages")):
        if n not in names:
            continue
        rs = [r for r in rows if r[0] == n]
        thr = [100 * (float(b[1]) / float(a[1]) - 1) for a, b in zip(orows, rs)]
        pc = [100 * (cpu(a) / cpu(b) - 1) for a, b in zip(orows, rs)]
        per = med(pc)
        print(f"{n} ({route}) vs openai (/openai/v1/chat/completions), median of the rounds: throughput {med(thr):+.1f}%, "
              f"per core {per:+.1f}% (by round: {', '.join(f'{x:+.1f}' for x in pc)}) "
              f"(target: within 10%: {'met' if per >= -10 else 'NOT met'})")
print("host steal during the latency runs, ms (core 0 / core 1), by round:")
for n in lnames:
    print(f"  {n:10}" + "  ".join(f"{st[(n, i)][0]}/{st[(n, i)][1]}" for i in range(1, rounds + 1)))
PY
echo "usage accounting: $(grep -c 'usage flush failed' "$OUT/server.log" || true) failed flushes; server log in $OUT/server.log"
