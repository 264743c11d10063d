"""Parameter digest of testdata/commit/params-1k.json: this package's strict
reader, RFC 8785 writer and SHA-256, against the naive
json.dumps(sort_keys=True) + SHA-256 (which is not the commitment: it
accepts duplicates, NaN and lone surrogates, sorts by code point and
writes floats Python's way).

    python3 sdk/python/bench/bench_digest.py [seconds]

It also times the reference tokenizer alone (the fast path off).
"""

import hashlib
import json
import os
import sys
import timeit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))
from decisionledger import canonical, params_digest  # noqa: E402

DATA = open(os.path.join(HERE, "..", "..", "..", "testdata", "commit", "params-1k.json"), "rb").read()


def naive():
    b = json.dumps(json.loads(DATA), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(b"ledger/v1/params\n" + b).hexdigest()


def strict():
    return params_digest(DATA).digest


def reference():
    canonical._FAST = False
    try:
        return params_digest(DATA).digest
    finally:
        canonical._FAST = True


def per_call(fn, seconds):
    n, t = 1, 0.0
    while t < 0.2:
        n *= 2
        t = timeit.timeit(fn, number=n)
    reps = max(1, int(seconds / t * n))
    return min(timeit.repeat(fn, number=reps, repeat=5)) / reps


if __name__ == "__main__":
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 0.5
    print(f"input {len(DATA)} bytes, canonical {params_digest(DATA).size} bytes")
    for name, fn in (("decisionledger.params_digest", strict), ("  the reference tokenizer alone", reference),
                     ("json.dumps(sort_keys)+sha256", naive)):
        s = per_call(fn, seconds)
        print(f"{name:32s} {s * 1e6:8.1f} us/op  {len(DATA) / s / 1e6:6.1f} MB/s")
