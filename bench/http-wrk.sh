#!/usr/bin/env bash
# Load ledgerd over loopback HTTP with wrk (a separate process), then
# export everything appended and verify it offline.
#
#   bash bench/http-wrk.sh [seconds] [connections]
#
# Needs wrk (Debian: apt-get install wrk). Builds ledgerd and ledger-verify,
# starts ledgerd on a fresh data directory under $TMPDIR with its default
# configuration (and its default memory limit, unless GOMEMLIMIT is set in
# the environment), runs `wrk -t2 -c<connections> -d<seconds>s --latency`
# with bench/append.lua, and prints wrk's report, ledgerd's peak RSS (and
# its resident anonymous and file pages after the run) and CPU time per
# request, and the verification of the export.
set -euo pipefail
secs=${1:-20}
conns=${2:-64}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
(cd "$here" && go build -o "$work/ledgerd" ./cmd/ledgerd && go build -o "$work/ledger-verify" ./cmd/ledger-verify)
port=$((20000 + RANDOM % 20000))
"$work/ledgerd" --data "$work/data" --listen "127.0.0.1:$port" >"$work/out" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q '^verifier key:' "$work/out" && break; sleep 0.1; done
token=$(sed -n 's/^mediator "local" token[^:]*: //p' "$work/out")
vkey=$(sed -n 's/^verifier key: //p' "$work/out")
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; } # utime + stime, in clock ticks
cpu0=$(cpu)
LEDGERD_TOKEN=$token wrk -t2 -c"$conns" -d"${secs}s" --latency -s "$here/bench/append.lua" "http://127.0.0.1:$port" | tee "$work/wrk"
cpu1=$(cpu)
echo "ledgerd peak RSS: $(awk '/^VmHWM/ {print $2/1024 " MiB"}' /proc/$pid/status)" \
  "(after the run: anonymous $(awk '/^RssAnon/ {print $2/1024 " MiB"}' /proc/$pid/status)," \
  "file $(awk '/^RssFile/ {print $2/1024 " MiB"}' /proc/$pid/status))"
# CPU time per request is steadier than throughput on a shared machine.
awk -v d=$((cpu1 - cpu0)) -v hz="$(getconf CLK_TCK)" '/^ *[0-9]+ requests in/ {printf "ledgerd CPU per request: %.1f µs\n", d / hz / $1 * 1e6}' "$work/wrk"
size=$(curl -s "http://127.0.0.1:$port/v1/checkpoint" | sed -n 2p)
# Wait for a checkpoint that covers everything (the interval is 1 s).
sleep 1.5
size=$(curl -s "http://127.0.0.1:$port/v1/checkpoint" | sed -n 2p)
curl -s -o "$work/export" "http://127.0.0.1:$port/v1/export?start=0&end=$size"
"$work/ledger-verify" export --key "$vkey" "$work/export"
