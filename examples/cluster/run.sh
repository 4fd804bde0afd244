#!/usr/bin/env bash
# Starts a Switchboard cluster on loopback to try docs/deploy.md: one
# PostgreSQL, one Redis and three `switchboard serve` replicas sharing a
# master key and an admin key. Prints the replicas' URLs and stops
# everything on Ctrl-C. Nothing is kept: the data lives in a temporary
# directory, removed at the end (KEEP=1 keeps it).
#
#   bash examples/cluster/run.sh
#
# Needs PostgreSQL's server binaries (Debian: apt-get install postgresql;
# found in /usr/lib/postgresql/*/bin, or set PG_BIN), redis-server and
# curl. Builds switchboard from this checkout unless SWITCHBOARD names a
# binary. Ports: PG_PORT (55432), REDIS_PORT (56379), replicas from
# BASE_PORT (18081, 18082, 18083). Run as root, PostgreSQL runs as the
# user postgres (or nobody): it refuses to run as root.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PG_PORT=${PG_PORT:-55432}
REDIS_PORT=${REDIS_PORT:-56379}
BASE_PORT=${BASE_PORT:-18081}
REPLICAS=3

WORK=$(mktemp -d "${TMPDIR:-/tmp}/switchboard-cluster.XXXXXX")
chmod 755 "$WORK"
PIDS=()

stop() {
	trap - EXIT INT TERM
	echo
	echo "stopping..."
	# Replicas first (they drain their requests and release their leases),
	# then Redis and PostgreSQL.
	# SIGINT is PostgreSQL's fast shutdown (PIDS[0]); the others stop on SIGTERM.
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		kill "-$([[ $i == 0 ]] && echo INT || echo TERM)" "${PIDS[i]}" 2>/dev/null || true
		wait "${PIDS[i]}" 2>/dev/null || true
	done
	if [[ ${KEEP:-} == 1 ]]; then
		echo "kept $WORK"
	else
		rm -rf "$WORK"
	fi
}
trap stop EXIT
trap 'exit 130' INT TERM

need() { command -v "$1" >/dev/null || { echo "run.sh: $1 not found: $2" >&2; exit 1; }; }

# --- PostgreSQL -------------------------------------------------------------
if [[ -z ${PG_BIN:-} ]]; then
	PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
	[[ -n $PG_BIN ]] || PG_BIN=$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")
fi
[[ -x $PG_BIN/initdb && -x $PG_BIN/postgres ]] || {
	echo "run.sh: PostgreSQL's initdb and postgres not found (apt-get install postgresql, or set PG_BIN)" >&2
	exit 1
}
need redis-server "apt-get install redis-server"
need curl "apt-get install curl"

# AS_PG runs a command as the user PostgreSQL runs as: this user, or under
# root the user postgres (else nobody). setpriv execs the command, so $! is
# the server's own pid.
AS_PG=()
if [[ $(id -u) == 0 ]]; then
	PG_USER=postgres
	id -u "$PG_USER" >/dev/null 2>&1 || PG_USER=nobody
	AS_PG=(setpriv --reuid="$PG_USER" --regid="$(id -g "$PG_USER")" --init-groups --)
fi
mkdir -p "$WORK/pg"
[[ -z ${PG_USER:-} ]] || chown "$PG_USER" "$WORK/pg"

echo "starting PostgreSQL ($PG_BIN) on 127.0.0.1:$PG_PORT"
"${AS_PG[@]}" "$PG_BIN/initdb" -D "$WORK/pg/data" -U switchboard --auth=trust --encoding=UTF8 --no-locale >"$WORK/pg-initdb.log" 2>&1 ||
	{ cat "$WORK/pg-initdb.log" >&2; exit 1; }
"${AS_PG[@]}" "$PG_BIN/postgres" -D "$WORK/pg/data" -p "$PG_PORT" -c listen_addresses=127.0.0.1 \
	-c unix_socket_directories="$WORK/pg" -c max_connections=200 >"$WORK/postgres.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do
	"$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" && break
	sleep 0.1
done
"$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" || { cat "$WORK/postgres.log" >&2; exit 1; }
"$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U switchboard switchboard

# --- Redis ------------------------------------------------------------------
echo "starting Redis on 127.0.0.1:$REDIS_PORT"
mkdir -p "$WORK/redis"
redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$WORK/redis" --save "" --appendonly no \
	--maxmemory 256mb --maxmemory-policy noeviction >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do
	(exec 3<>"/dev/tcp/127.0.0.1/$REDIS_PORT") 2>/dev/null && break
	sleep 0.1
done

# --- Switchboard ------------------------------------------------------------
SWITCHBOARD=${SWITCHBOARD:-}
if [[ -z $SWITCHBOARD ]]; then
	echo "building switchboard"
	(cd "$ROOT" && go build -o "$WORK/switchboard" .)
	SWITCHBOARD=$WORK/switchboard
fi

# What every replica shares: the database, Redis, the master key (secrets
# sealed by one replica are opened by the others) and the admin key.
export SWITCHBOARD_DATABASE_URL="postgres://switchboard@127.0.0.1:$PG_PORT/switchboard?sslmode=disable"
export SWITCHBOARD_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
SWITCHBOARD_MASTER_KEY=$(head -c 32 /dev/urandom | base64)
SWITCHBOARD_ADMIN_KEY=sb_$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
export SWITCHBOARD_MASTER_KEY SWITCHBOARD_ADMIN_KEY
# A load balancer's URL in production (OAuth callbacks); here the first replica.
export SWITCHBOARD_PUBLIC_URL="http://127.0.0.1:$BASE_PORT"

# Migrations also run at start, under a lock; running them first is what a
# deploy pipeline does.
"$SWITCHBOARD" migrate >"$WORK/migrate.log" 2>&1 || { cat "$WORK/migrate.log" >&2; exit 1; }

URLS=()
for i in $(seq "$REPLICAS"); do
	port=$((BASE_PORT + i - 1))
	URLS+=("http://127.0.0.1:$port")
	# Each replica has its own data dir; with the database in PostgreSQL it
	# holds nothing but what a replica keeps for itself.
	SWITCHBOARD_ADDR=127.0.0.1:$port SWITCHBOARD_DATA_DIR=$WORK/replica$i \
		"$SWITCHBOARD" serve >"$WORK/replica$i.log" 2>&1 &
	PIDS+=($!)
done
for i in $(seq "$REPLICAS"); do
	url=${URLS[i - 1]}
	for _ in $(seq 300); do
		curl -fsS -o /dev/null "$url/readyz" 2>/dev/null && break
		kill -0 "${PIDS[i + 1]}" 2>/dev/null || { echo "replica $i exited:" >&2; tail -n 20 "$WORK/replica$i.log" >&2; exit 1; }
		sleep 0.1
	done
	curl -fsS -o /dev/null "$url/readyz" || { echo "replica $i is not ready:" >&2; tail -n 20 "$WORK/replica$i.log" >&2; exit 1; }
done

cat <<EOF

Switchboard cluster is up (data in $WORK).

  replicas    ${URLS[*]}
  PostgreSQL  postgres://switchboard@127.0.0.1:$PG_PORT/switchboard
  Redis       redis://127.0.0.1:$REDIS_PORT/0
  admin key   $SWITCHBOARD_ADMIN_KEY
  logs        $WORK/replica{1..$REPLICAS}.log, postgres.log, redis.log

Create a key through one replica and use it through another:

  curl -s -H "Authorization: Bearer $SWITCHBOARD_ADMIN_KEY" -H 'Content-Type: application/json' \\
    -d '{"name":"demo","scopes":["llm"]}' ${URLS[0]}/v1/api-keys
  curl -s -H "Authorization: Bearer <its key>" ${URLS[1]}/v1/models

Ctrl-C stops everything.
EOF
wait "${PIDS[@]}"
