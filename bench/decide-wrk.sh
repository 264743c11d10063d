#!/usr/bin/env bash
# Compare decide-and-append (POST /v1/decide: the ledger evaluates the
# reference Cedar policies, then appends) with plain appends of the same
# calls (POST /v1/entries with the mediator's decision), in one run on one
# ledgerd, alternating, over loopback HTTP with wrk.
#
#   bash bench/decide-wrk.sh [seconds per run] [pairs] [connections]
#
# Needs wrk (Debian: apt-get install wrk). ledgerd runs on a fresh data
# directory with the reference declarations (testdata/declarations) as its
# catalog and the reference policies (testdata/policies) as its policy set,
# and its default memory limit unless GOMEMLIMIT is set. Each run prints
# requests/s and ledgerd's CPU per request; the last lines give the
# medians and the ratio decide/append.
# Everything appended is exported and verified, and the ledger's decisions
# replayed, at the end.
set -euo pipefail
secs=${1:-10}
pairs=${2:-3}
conns=${3:-64}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"' EXIT
(cd "$here" && go build -o "$work/ledgerd" ./cmd/ledgerd && go build -o "$work/ledger-verify" ./cmd/ledger-verify)
port=$((20000 + RANDOM % 20000))
"$work/ledgerd" init --name ledger.example.com/bench --data "$work/data" --listen "127.0.0.1:$port" >"$work/init" 2>&1
token=$(sed -n 's/^mediator "local" token[^:]*: //p' "$work/init")
python3 - "$work/data/ledgerd.json" "$here" <<'PY'
import json, sys
path, here = sys.argv[1], sys.argv[2]
c = json.load(open(path))
c["catalog_dir"] = here + "/testdata/declarations"
c["policy_dir"] = here + "/testdata/policies"
for m in c["mediators"]:
    m["rate_per_second"], m["burst"] = 0, 0
json.dump(c, open(path, "w"), indent=2)
PY
"$work/ledgerd" --data "$work/data" >"$work/out" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; } # utime + stime, in clock ticks
hz=$(getconf CLK_TCK)
run() { # path → "requests/s cpu-µs-per-request"
  local c0 c1
  c0=$(cpu)
  LEDGERD_TOKEN=$token LEDGERD_PATH=$1 wrk -t2 -c"$conns" -d"${secs}s" -s "$here/bench/declared.lua" "http://127.0.0.1:$port" >"$work/wrk" 2>"$work/wrk.err"
  c1=$(cpu)
  if [ -s "$work/wrk.err" ]; then echo "refused requests:" >&2; head -3 "$work/wrk.err" >&2; exit 1; fi
  awk -v d=$((c1 - c0)) -v hz="$hz" '/^ *[0-9]+ requests in/ {n = $1} /^Requests\/sec/ {r = $2} END {printf "%.0f %.1f\n", r, d / hz / n * 1e6}' "$work/wrk"
}
: >"$work/append" ; : >"$work/decide"
for i in $(seq "$pairs"); do
  a=$(run /v1/entries); echo "append  $a" | tee -a "$work/append"
  d=$(run /v1/decide);  echo "decide  $d" | tee -a "$work/decide"
done
median() { sort -n -k"$2" "$1" | awk -v k="$2" '{v[NR] = $k} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
ma=$(median "$work/append" 2); md=$(median "$work/decide" 2)
echo "median appends/s: $ma ($(median "$work/append" 3) µs CPU each); decide-and-append/s: $md ($(median "$work/decide" 3) µs CPU each)"
awk -v a="$ma" -v d="$md" 'BEGIN {printf "decide / append throughput: %.1f%%\n", 100 * d / a}'
echo "ledgerd peak RSS: $(grep VmHWM /proc/$pid/status | awk '{print $2/1024 " MiB"}')"
sleep 1.5 # a checkpoint covering everything (the interval is 1 s)
size=$(curl -s "http://127.0.0.1:$port/v1/checkpoint" | sed -n 2p)
curl -s -o "$work/export" "http://127.0.0.1:$port/v1/export?start=0&end=$size"
vkey=$(sed -n 's/^verifier key: //p' "$work/init")
"$work/ledger-verify" decisions --key "$vkey" "$work/export" | tail -n 3
