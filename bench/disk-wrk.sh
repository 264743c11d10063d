#!/usr/bin/env bash
# Disk per entry of a log that ledgerd itself writes, in the batch sizes a
# load of concurrent clients gives it (issue 29, item 1), rather than the
# large batches of BenchmarkOpen's store (bench/at-size.sh).
#
#   bash bench/disk-wrk.sh [seconds] [connections] [note bytes]
#
# Builds ledgerd, starts it on a fresh data directory with its default
# configuration, appends with bench/append.lua (wrk -t2) for the given
# seconds (default 20) over the given connections (default 64), with a
# note of the given length (default 120, append.lua's: entries of about 920 bytes),
# stops it with SIGTERM (Close flushes its index), and reports, from the
# store's directory:
#   * entries, frames and entries per frame, and the frame log's bytes
#     (the frames themselves, not the spare segment of zeros written
#     ahead of need), read from the frames' headers;
#   * the mean entry, from the frames' entry records;
#   * the bytes per entry of every part of the store: the frame log's
#     frames, and each other file and directory allocated.
# Needs wrk (Debian: apt-get install wrk) and python3.
set -euo pipefail
secs=${1:-20}
conns=${2:-64}
note=${3:-120}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
(cd "$here" && go build -o "$work/ledgerd" ./cmd/ledgerd)
port=$((20000 + RANDOM % 20000))
"$work/ledgerd" --data "$work/data" --listen "127.0.0.1:$port" >"$work/out" 2>&1 &
pid=$!
until grep -q '^verifier key:' "$work/out"; do
  kill -0 "$pid" 2>/dev/null || { cat "$work/out"; exit 1; }
  sleep 0.05
done
token=$(sed -n 's/^mediator "local" token[^:]*: //p' "$work/out")
LEDGERD_TOKEN=$token LEDGERD_NOTE_BYTES=$note wrk -t2 -c"$conns" -d"${secs}s" -s "$here/bench/append.lua" "http://127.0.0.1:$port" |
  grep -E 'requests in|Requests/sec'
kill -TERM "$pid"
wait "$pid" || true
pid=
store=$work/data/store
python3 - "$store" <<'PY'
import os, struct, subprocess, sys
store = sys.argv[1]
frames = entries = framebytes = entrybytes = 0
seg_dir = os.path.join(store, "frames")
for name in sorted(os.listdir(seg_dir)):
    if not name.endswith(".frames"):
        continue
    with open(os.path.join(seg_dir, name), "rb") as f:
        data = f.read()
    off = 0
    while off + 8 <= len(data):
        length, = struct.unpack_from(">I", data, off)
        if length == 0:
            break  # the zeros after the last frame
        start, n = struct.unpack_from(">QI", data, off + 8)
        # Each entry record begins with the entry's u32 length.
        rec = off + 8 + 16
        for _ in range(n):
            elen, = struct.unpack_from(">I", data, rec)
            klen, = struct.unpack_from(">H", data, rec + 40)
            entrybytes += elen
            rec += 42 + klen
        frames += 1
        entries += n
        framebytes += 8 + length
        off += 8 + length
def alloc(path):
    return int(subprocess.check_output(["du", "-s", "--block-size=1", path]).split()[0])
print(f"entries: {entries} in {frames} frames, {entries / frames:.1f} a frame; mean entry {entrybytes / entries:.0f} bytes")
print(f"frame log: {framebytes / entries:.1f} bytes per entry of frames "
      f"({(framebytes - entrybytes) / entries:.1f} beyond the entry), {alloc(seg_dir) / entries:.1f} allocated with the spare")
rest = 0
for name in sorted(os.listdir(store)):
    if name == "frames":
        continue
    a = alloc(os.path.join(store, name))
    rest += a
    print(f"  {name:<12} {a / entries:8.1f} bytes per entry")
print(f"store without the frame log's spare: {(framebytes + rest) / entries:.1f} bytes per entry")
PY
