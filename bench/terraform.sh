#!/usr/bin/env bash
# Terraform at scale: how long `terraform apply`, `terraform plan` (with
# nothing to change) and `terraform destroy` take for 200 resources:
# 20 connectors with 9 actions each (20 + 180).
#
#   bash bench/terraform.sh                 # ROUNDS=3 PARALLELISM=10 (terraform's default)
#   CONTROL_RPM=600 bash bench/terraform.sh # the control-plane limit of the server
#
# Target: each of apply, plan and destroy at most 10 s.
#
# The script builds the binary once and uses it twice: `switchboard serve`
# on a loopback port with a fresh data directory and a known admin key, and
# the provider, installed through dev_overrides in a temporary
# TF_CLI_CONFIG_FILE (no registry, no `terraform init`). The server runs
# with its default limits unless CONTROL_RPM is set, so that the figures
# include what the control-plane limit costs an operator. Each round starts
# from an empty server; the summary is the median over ROUNDS, plus the
# number of 429 answers the server logged. Everything stays on 127.0.0.1
# and stops by itself. Not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-/tmp/switchboard-bench-terraform}
ROUNDS=${ROUNDS:-3}
PARALLELISM=${PARALLELISM:-10}
SB_PORT=${SB_PORT:-18090}
CONNECTORS=${CONNECTORS:-20}
ACTIONS=${ACTIONS:-9}
TARGET=10
KEY=sb_benchmark_key_0123456789abcdefghijklmnopqrstuvwxyz
TF=${TERRAFORM:-$(command -v terraform || command -v tofu)}

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/work"
echo "== build"
go build -o "$OUT/bin/terraform-provider-switchboard" .
ln -sf terraform-provider-switchboard "$OUT/bin/switchboard"

cat > "$OUT/terraformrc" <<HCL
provider_installation {
  dev_overrides {
    "switchboard-dev/switchboard" = "$OUT/bin"
  }
  direct {}
}
HCL
export TF_CLI_CONFIG_FILE="$OUT/terraformrc"
export TF_IN_AUTOMATION=1
export SWITCHBOARD_ENDPOINT="http://127.0.0.1:$SB_PORT"
export SWITCHBOARD_API_KEY=$KEY

cat > "$OUT/work/main.tf" <<HCL
terraform {
  required_providers {
    switchboard = { source = "switchboard-dev/switchboard" }
  }
}

provider "switchboard" {}

locals {
  connectors = toset([for i in range($CONNECTORS) : format("bench%02d", i)])
  actions    = toset([for i in range($ACTIONS) : format("op%d", i)])
  pairs      = { for p in setproduct(local.connectors, local.actions) : "\${p[0]}.\${p[1]}" => { connector = p[0], action = p[1] } }
}

resource "switchboard_connector" "c" {
  for_each     = local.connectors
  name         = each.key
  display_name = "Benchmark \${each.key}"
  base_url     = "https://api.example.com/\${each.key}"
}

resource "switchboard_action" "a" {
  for_each  = local.pairs
  connector = switchboard_connector.c[each.value.connector].name
  name      = each.value.action
  method    = "GET"
  path      = "/items/{{params.id}}"
  parameters = {
    id = { type = "string", required = true, description = "item id" }
  }
}
HCL

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# start_server: a fresh server with an empty data directory.
start_server() {
  rm -rf "$OUT/data"
  env SWITCHBOARD_ADMIN_KEY=$KEY SWITCHBOARD_DATA_DIR="$OUT/data" SWITCHBOARD_ADDR="127.0.0.1:$SB_PORT" \
    ${CONTROL_RPM:+SWITCHBOARD_CONTROL_PLANE_REQUESTS_PER_MINUTE=$CONTROL_RPM} \
    "$OUT/bin/switchboard" serve >"$OUT/server.log" 2>&1 &
  SB_PID=$!
  pids+=("$SB_PID")
  for _ in $(seq 100); do curl -fs "http://127.0.0.1:$SB_PORT/readyz" >/dev/null && return; sleep 0.1; done
  echo "server did not start; log:"; tail -20 "$OUT/server.log"; exit 1
}
stop_server() { kill "$SB_PID"; wait "$SB_PID" 2>/dev/null || true; }

# timed NAME CMD...: runs CMD in the work directory, appends "NAME seconds" to times.tsv.
timed() {
  local name=$1; shift
  local start end
  start=$(date +%s.%N)
  (cd "$OUT/work" && "$@") >"$OUT/$name.log" 2>&1 || { echo "$name failed:"; tail -30 "$OUT/$name.log"; exit 1; }
  end=$(date +%s.%N)
  echo "$name $(echo "$end - $start" | bc)" | tee -a "$OUT/times.tsv"
}

count429() { grep -c '"status":429' "$OUT/server.log" || true; }

: >"$OUT/times.tsv"
: >"$OUT/throttled.tsv"
for round in $(seq "$ROUNDS"); do
  echo "== round $round/$ROUNDS: $((CONNECTORS + CONNECTORS * ACTIONS)) resources, -parallelism=$PARALLELISM"
  start_server
  rm -f "$OUT/work/terraform.tfstate" "$OUT/work/terraform.tfstate.backup"
  timed apply "$TF" apply -auto-approve -input=false -parallelism="$PARALLELISM"
  timed plan "$TF" plan -input=false -detailed-exitcode -parallelism="$PARALLELISM"
  timed destroy "$TF" destroy -auto-approve -input=false -parallelism="$PARALLELISM"
  echo "round $round 429s: $(count429)" | tee -a "$OUT/throttled.tsv"
  stop_server
done

echo
echo "== summary: median of $ROUNDS rounds, seconds (target: each at most $TARGET s)"
printf '%-8s %8s %8s\n' step seconds target
for name in apply plan destroy; do
  med=$(awk -v n="$name" '$1 == n {print $2}' "$OUT/times.tsv" | sort -n | awk '{a[NR]=$1} END{m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.1f", m}')
  verdict=$(awk -v m="$med" -v t="$TARGET" 'BEGIN{print (m <= t) ? "ok" : "MISSED"}')
  printf '%-8s %8s %8s  %s\n' "$name" "$med" "<= $TARGET" "$verdict"
done
echo "429 answers per round (apply + plan + destroy): $(awk '{print $4}' "$OUT/throttled.tsv" | paste -sd' ')"
