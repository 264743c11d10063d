#!/usr/bin/env bash
# Measure how a flood of silent connections delays a well-behaved client:
# bench/flood (a separate process) opens connections that send nothing at
# <rate> a second from 127.0.0.1 while a client polls GET /v1/checkpoint,
# each request on a new connection, and prints the client's latency
# percentiles.
#
#   bash bench/flood.sh [rate] [seconds] [client source] [max_connections] [flood options...]
#
# Defaults: 900 connections/s for 20 s (after 3 s of warm-up), the client
# from 127.0.0.2 (another source; 127.0.0.1 puts it behind the same
# address as the flood), max_connections 768 (the default for a
# descriptor limit of 1024). Further arguments go to bench/flood (such as
# -keepalive, -flood-sources 50, -flood-from 127.0.1.1). ledgerd runs on a
# fresh data directory with its default configuration otherwise; its
# connection metrics are printed at the end. LEDGERD=path runs that
# ledgerd binary instead of building this tree's (to compare with an
# older one: git archive REV | tar -x -C DIR, then go build in DIR).
set -euo pipefail
rate=${1:-900}
secs=${2:-20}
client=${3:-127.0.0.2}
maxconns=${4:-768}
shift $(($# < 4 ? $# : 4))
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"' EXIT
if [ -n "${LEDGERD:-}" ]; then cp "$LEDGERD" "$work/ledgerd"; else (cd "$here" && go build -o "$work/ledgerd" ./cmd/ledgerd); fi
(cd "$here" && go build -o "$work/flood" ./bench/flood)
port=$((20000 + RANDOM % 20000))
"$work/ledgerd" init --name ledger.example.com/bench --data "$work/data" --listen "127.0.0.1:$port" >"$work/init" 2>&1
python3 - "$work/data/ledgerd.json" "$maxconns" <<'PY'
import json, sys
path, maxconns = sys.argv[1], int(sys.argv[2])
c = json.load(open(path))
c["max_connections"] = maxconns
json.dump(c, open(path, "w"), indent=2)
PY
"$work/ledgerd" --data "$work/data" >"$work/out" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
"$work/flood" -addr "127.0.0.1:$port" -rate "$rate" -duration "${secs}s" -client-from "$client" "$@"
curl -s "http://127.0.0.1:$port/metrics" | grep '^ledgerd_connections_'
