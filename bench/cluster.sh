#!/usr/bin/env bash
# Replicas benchmark: /v1/chat and /v1/integrations/{c}/run through two
# replicas on PostgreSQL and Redis, against one bbolt node, on this machine.
#
#   bash bench/cluster.sh          # ROUNDS=3 DURATION=10s RATE=400 by default
#
# Setups, each measured with the same open-loop load (vegeta at RATE req/s,
# kept-alive connections, round robin over the setup's replicas):
#   bolt     one node, bbolt, limits in process (the default deployment)
#   pg       two replicas on PostgreSQL, limits in each replica's memory
#   redis    two replicas on PostgreSQL with limits shared in Redis
#            (redis.prefetch 1s, the default: most decisions are made from
#            what the replica took ahead, without a round trip)
#   exact    the same with redis.prefetch 0: every decision in Redis
#   direct   the mock upstream called straight (calibration: the machine)
# "shared limit added" is p50(redis) - p50(pg) for the same route in the
# same round, the median over the rounds: what moving the limiter into
# Redis costs a request (target: at most 0.15 ms); "exact - pg" is the
# cost of a round trip on every decision. Hot paths read caches,
# so PostgreSQL itself is off the request path except for the batched
# writes (usage, invocation log); "pg - bolt" shows what remains.
# Calibration: a bare Redis round trip (redis-cli --latency) measured in
# each round, since a decision made in Redis costs one round trip.
# PostgreSQL, Redis and the replicas run on loopback and stop on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-/tmp/switchboard-bench-cluster}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-400}
BASE=${BASE_PORT:-18180}
MOCK_PORT=$((BASE + 1))
PG_PORT=$((BASE + 2))
REDIS_PORT=$((BASE + 3))
KEY=sb_benchmark_key_0123456789abcdefghijklmnopqrstuvwxyz

rm -rf "$OUT"
mkdir -p "$OUT"
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$PGBIN/postgres" ] || { echo "PostgreSQL not found: apt-get install postgresql"; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server not found: apt-get install redis-server"; exit 1; }
echo "== build"
go build -o "$OUT/switchboard" .
go build -o "$OUT/mockllm" ./bench/mockllm
[ -x "$OUT/vegeta" ] || GOBIN="$OUT" go install github.com/tsenart/vegeta/v12@v12.13.0

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# PostgreSQL refuses to run as root: run it as the postgres user then.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
mkdir -p "$OUT/pg" && chmod 777 "$OUT" "$OUT/pg"
as_pg "$PGBIN/initdb" -D "$OUT/pg/data" -U switchboard --auth=trust --no-locale -E UTF8 >/dev/null
as_pg "$PGBIN/postgres" -D "$OUT/pg/data" -p "$PG_PORT" -c listen_addresses=127.0.0.1 \
  -c unix_socket_directories="$OUT/pg" -c max_connections=200 >"$OUT/pg.log" 2>&1 & pids+=($!)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$OUT" >"$OUT/redis.log" 2>&1 & pids+=($!)
"$OUT/mockllm" -addr "127.0.0.1:$MOCK_PORT" & pids+=($!)
for _ in $(seq 100); do "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" && break; sleep 0.1; done
# runuser does not pass signals on: stop the postmaster itself on exit.
pids+=("$(head -1 "$OUT/pg/data/postmaster.pid")")
for db in pg redis exact; do
  "$PGBIN/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U switchboard -d postgres -c "CREATE DATABASE bench_$db" >/dev/null
done

cat > "$OUT/config.yaml" <<YAML
limits:
  # High enough never to refuse the benchmark; the limiter still runs.
  requestsPerMinute: 1000000000
  tokensPerMinute: 1000000000000
egress:
  allow: [127.0.0.0/8]
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
MASTER=$(python3 -c 'import base64,os; print(base64.b64encode(os.urandom(32)).decode())')

# replica NAME PORT [ENV...]: start switchboard serve.
replica() {
  local name=$1 port=$2; shift 2
  env "$@" SWITCHBOARD_ADMIN_KEY=$KEY SWITCHBOARD_MASTER_KEY="$MASTER" SWITCHBOARD_DATA_DIR="$OUT/data-$name" \
    SWITCHBOARD_ADDR="127.0.0.1:$port" SWITCHBOARD_CONFIG="$OUT/config.yaml" \
    "$OUT/switchboard" serve >"$OUT/$name.log" 2>&1 & pids+=($!)
  for _ in $(seq 200); do curl -fs "http://127.0.0.1:$port/readyz" >/dev/null && return; sleep 0.1; done
  echo "replica $name did not start:"; tail -20 "$OUT/$name.log"; exit 1
}
PGURL="postgres://switchboard@127.0.0.1:$PG_PORT"
replica bolt $((BASE + 10))
replica pg1 $((BASE + 20)) SWITCHBOARD_DATABASE_URL="$PGURL/bench_pg"
replica pg2 $((BASE + 21)) SWITCHBOARD_DATABASE_URL="$PGURL/bench_pg"
replica redis1 $((BASE + 30)) SWITCHBOARD_DATABASE_URL="$PGURL/bench_redis" SWITCHBOARD_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
replica redis2 $((BASE + 31)) SWITCHBOARD_DATABASE_URL="$PGURL/bench_redis" SWITCHBOARD_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
replica exact1 $((BASE + 40)) SWITCHBOARD_DATABASE_URL="$PGURL/bench_exact" SWITCHBOARD_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/1" SWITCHBOARD_REDIS_PREFETCH=0
replica exact2 $((BASE + 41)) SWITCHBOARD_DATABASE_URL="$PGURL/bench_exact" SWITCHBOARD_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/1" SWITCHBOARD_REDIS_PREFETCH=0

# The connector the run route calls, once per store (any replica of it).
for port in $((BASE + 10)) $((BASE + 20)) $((BASE + 30)) $((BASE + 40)); do
  api() { curl -fsS -o /dev/null -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d "$2" "http://127.0.0.1:$port$1"; }
  api /v1/connectors "{\"name\":\"mock\",\"baseUrl\":\"http://127.0.0.1:$MOCK_PORT\",\"auth\":{\"type\":\"apiKey\",\"name\":\"X-API-Key\",\"in\":\"header\"}}"
  api /v1/connectors/mock/actions '{"name":"ping","method":"GET","path":"/api/ping"}'
  api /v1/connectors/mock/connections '{"name":"default","apiKey":"bench-upstream-key-0123456789"}'
done
printf '%s' '{"model":"mock/bench","messages":[{"role":"user","content":"Say hello in five words."}],"maxTokens":32}' >"$OUT/chat.json"
printf '%s' '{"action":"ping"}' >"$OUT/run.json"
printf '%s' '{"model":"bench","messages":[{"role":"user","content":"Say hello in five words."}],"max_tokens":32}' >"$OUT/direct.json"

# targets SETUP ROUTE: a vegeta targets file, round robin over the setup's replicas.
targets() {
  local ports path body
  case $1 in bolt) ports="$((BASE + 10))" ;; pg) ports="$((BASE + 20)) $((BASE + 21))" ;; redis) ports="$((BASE + 30)) $((BASE + 31))" ;; exact) ports="$((BASE + 40)) $((BASE + 41))" ;; esac
  case $2 in chat) path=/v1/chat body=$OUT/chat.json ;; run) path=/v1/integrations/mock/run body=$OUT/run.json ;; esac
  for p in $ports; do
    printf 'POST http://127.0.0.1:%s%s\nContent-Type: application/json\nAuthorization: Bearer %s\n@%s\n\n' "$p" "$path" "$KEY" "$body"
  done
}
targets_direct() {
  case $1 in
    chat) printf 'POST http://127.0.0.1:%s/v1/chat/completions\nContent-Type: application/json\n@%s\n\n' "$MOCK_PORT" "$OUT/direct.json" ;;
    run) printf 'GET http://127.0.0.1:%s/api/ping\n\n' "$MOCK_PORT" ;;
  esac
}

SETUPS="direct bolt pg redis exact"
for round in $(seq "$ROUNDS"); do
  echo "== round $round/$ROUNDS: $RATE req/s for $DURATION per setup and route"
  for route in chat run; do
    for setup in $SETUPS; do
      if [ "$setup" = direct ]; then targets_direct "$route"; else targets "$setup" "$route"; fi >"$OUT/t-$setup-$route.txt"
      "$OUT/vegeta" attack -targets="$OUT/t-$setup-$route.txt" -rate="$RATE" -duration=2s -keepalive=true >/dev/null
      "$OUT/vegeta" attack -targets="$OUT/t-$setup-$route.txt" -rate="$RATE" -duration="$DURATION" -keepalive=true \
        | "$OUT/vegeta" report -type=json >"$OUT/v-$setup-$route-$round.json"
    done
  done
  # Calibration: one bare Redis round trip (PING) on this machine, now.
  timeout "${DURATION%s}" redis-cli -p "$REDIS_PORT" --latency --raw >"$OUT/rtt-$round.txt" 2>/dev/null || true
done
python3 - "$OUT" "$ROUNDS" "$SETUPS" <<'PY'
import json, statistics, sys
out, rounds, setups = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
med = statistics.median
ms = lambda ns: ns / 1e6
v = lambda s, r, i: json.load(open(f"{out}/v-{s}-{r}-{i}.json"))
print(f"== median of {rounds} round(s)")
for route in ("chat", "run"):
    print(f"{route:6}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'success':>9}")
    for s in setups:
        vs = [v(s, route, i) for i in range(1, rounds + 1)]
        q = lambda k: med(ms(x["latencies"][k]) for x in vs)
        print(f"  {s:6}{q('50th'):9.3f}{q('90th'):9.3f}{q('99th'):9.3f}{min(x['success'] for x in vs)*100:8.2f}%")
    d = lambda a, b, k: med(ms(v(a, route, i)["latencies"][k] - v(b, route, i)["latencies"][k]) for i in range(1, rounds + 1))
    print(f"  shared limit added (redis - pg): p50 {d('redis', 'pg', '50th'):+.3f} ms, p99 {d('redis', 'pg', '99th'):+.3f} ms (target p50 <= 0.15 ms)")
    print(f"  every decision in Redis (exact - pg, redis.prefetch 0): p50 {d('exact', 'pg', '50th'):+.3f} ms, p99 {d('exact', 'pg', '99th'):+.3f} ms")
    print(f"  two replicas on PostgreSQL vs one bbolt node (pg - bolt): p50 {d('pg', 'bolt', '50th'):+.3f} ms")
    rd = [ms(v('redis', route, i)["latencies"]['50th'] - v('pg', route, i)["latencies"]['50th']) for i in range(1, rounds + 1)]
    print("  redis - pg p50 by round: " + ", ".join(f"{x:+.3f}" for x in rd))
# redis-cli --latency --raw prints "min max avg samples" (ms).
rtt = []
for i in range(1, rounds + 1):
    try:
        rtt.append(float(open(f"{out}/rtt-{i}.txt").read().split()[2]))
    except (OSError, IndexError, ValueError):
        pass
if rtt:
    print(f"calibration: one bare Redis round trip (redis-cli --latency, PING) {med(rtt):.3f} ms on average "
          f"(by round: {', '.join(f'{x:.3f}' for x in rtt)}); a decision made in Redis costs one")
PY
echo "logs in $OUT"
