#!/usr/bin/env bash
# What a large log costs ledgerd: serve a cached store of N entries with
# the shipped binary, and measure its open, its reads at random indices,
# its disk and its memory under append load (issue 29, "flat with size").
#
#   bash bench/at-size.sh N [seconds]
#
# The store of N entries is BenchmarkOpen's (ledger/open_bench_test.go),
# built once under $LEDGER_BENCH_DIR (default $TMPDIR/ledger-bench-open)
# and kept for the next run: ten million entries take several minutes to
# build. LEDGER_BENCH_NO_APPROVALS=1 builds and serves one of decisions
# alone (store-N-plain), without the approval lifecycles whose state stays
# in memory. The script then
#   1. runs BenchmarkOpen on it (badger.Open + ledger.Open, warm; cold too
#      with LEDGER_BENCH_COLD=1, which needs root);
#   2. reports its disk use per entry (allocated blocks, by directory);
#   3. copies it (appends change it) and starts ledgerd on the copy with
#      the store's key, timing the start until /readyz answers;
#   4. reports the entries' mean size (from eight entry bundles spread
#      over the log), and reads GET /v1/entries/{i} and
#      GET /v1/inclusion?index=i at random indices with wrk (1 thread, 1
#      connection, --latency: p50, p90, p99);
#   5. appends with bench/append.lua (2 threads, 64 connections) for the
#      given seconds (default 30) and reports ledgerd's peak RSS (VmHWM),
#      with no memory setting of its own beyond ledgerd's defaults.
# Needs wrk (Debian: apt-get install wrk) and about twice the store's disk.
set -euo pipefail
n=${1:?usage: at-size.sh ENTRIES [seconds]}
secs=${2:-30}
here=$(cd "$(dirname "$0")/.." && pwd)
root=${LEDGER_BENCH_DIR:-${TMPDIR:-/tmp}/ledger-bench-open}
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
(cd "$here" && go test -c -o "$work/ledger.test" ./ledger/ && go build -o "$work/ledgerd" ./cmd/ledgerd)

echo "== open (BenchmarkOpen, 5 opens; builds the store if it is not cached)"
(cd "$here/ledger" && LEDGER_BENCH_DIR=$root LEDGER_BENCH_OPEN_SIZES=$n \
  "$work/ledger.test" -test.run '^$' -test.bench "^BenchmarkOpen/entries=$n\$" -test.benchtime 5x -test.v) |
  grep -E 'built|first open|Benchmark'
store=$root/store-$n
[ "${LEDGER_BENCH_NO_APPROVALS:-}" = 1 ] && store=$store-plain

echo "== disk"
alloc=$(du -s --block-size=1 "$store" | cut -f1)
frames=$(du -s --block-size=1 "$store/frames" | cut -f1)
awk -v a="$alloc" -v f="$frames" -v n="$n" 'BEGIN {
  printf "store: %.0f bytes allocated, %.1f per entry (frame log %.1f, the rest %.1f)\n", a, a / n, f / n, (a - f) / n }'
for d in "$store"/*/; do printf '  %-10s %s\n' "$(basename "$d")" "$(du -sh "$d" | cut -f1)"; done

echo "== ledgerd on a copy of the store"
cp -a "$store" "$work/store"
rm -f "$work/store/complete"
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
port=$((20000 + RANDOM % 20000))
mkdir -m 700 "$work/data"
cat >"$work/data/ledgerd.json" <<EOF
{"key_file": "$root/key", "store_dir": "$work/store", "listen": "127.0.0.1:$port",
 "mediators": [{"name": "local", "token_sha256": "$(printf %s "$token" | sha256sum | cut -d' ' -f1)"}]}
EOF
t0=$(date +%s.%N)
"$work/ledgerd" serve --data "$work/data" >"$work/out" 2>&1 &
pid=$!
until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; do
  kill -0 "$pid" 2>/dev/null || { cat "$work/out"; exit 1; }
  sleep 0.01
done
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "ledgerd ready after %.3f s (process start to /readyz)\n", b - a }'
echo "ledgerd RSS when ready: $(awk '/^VmRSS/ {print $2/1024 " MiB"}' /proc/$pid/status)"

# The C2SP tlog-tiles path of index N: groups of three digits, all but the
# last prefixed with x (1234067 is x001/x234/067).
tilepath() {
  local n=$1 p
  p=$(printf %03d $((n % 1000)))
  n=$((n / 1000))
  while [ "$n" -gt 0 ]; do p=$(printf x%03d $((n % 1000)))/$p; n=$((n / 1000)); done
  echo "$p"
}
bytes=0
for k in 1 2 3 4 5 6 7 8; do
  c=$(curl -sf "http://127.0.0.1:$port/tile/entries/$(tilepath $(( (n / 256 - 1) * k / 8 )))" | wc -c)
  bytes=$((bytes + c - 256 * 2)) # less each entry's 2-byte length
done
echo "mean entry: $((bytes / 2048)) bytes (8 bundles of 256)"

for path in entries inclusion; do
  cat >"$work/$path.lua" <<EOF
math.randomseed(os.time())
request = function()
  local i = math.random(0, $n - 1)
  if "$path" == "entries" then return wrk.format("GET", "/v1/entries/" .. i) end
  return wrk.format("GET", "/v1/inclusion?index=" .. i)
end
response = function(status, headers, body)
  if status ~= 200 then io.stderr:write("status " .. status .. ": " .. body .. "\n") end
end
EOF
  echo "== GET /v1/$path at random indices"
  wrk -t1 -c1 -d10s --latency -s "$work/$path.lua" "http://127.0.0.1:$port" |
    grep -E 'Requests/sec|^ +(50|90|99)%'
done

echo "== appends for ${secs} s, 64 connections"
LEDGERD_TOKEN=$token wrk -t2 -c64 -d"${secs}s" -s "$here/bench/append.lua" "http://127.0.0.1:$port" |
  grep -E 'requests in|Requests/sec'
echo "ledgerd peak RSS: $(awk '/^VmHWM/ {print $2/1024 " MiB"}' /proc/$pid/status)" \
  "(now: anonymous $(awk '/^RssAnon/ {print $2/1024 " MiB"}' /proc/$pid/status)," \
  "file $(awk '/^RssFile/ {print $2/1024 " MiB"}' /proc/$pid/status))"
