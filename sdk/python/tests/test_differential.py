import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import _paths
from decisionledger import Domain, DomainError, params_digest

SEED, N = 1, 10000


def _lines():
    """The differential texts of docs/conformance.md section 6: from the
    file LEDGER_DIFFERENTIAL names, else from `go run
    ./internal/conformancegen` (Go on PATH)."""
    path = os.environ.get("LEDGER_DIFFERENTIAL")
    if path:
        with open(path, "rb") as f:
            return f.read().splitlines()
    go = shutil.which("go")
    if go is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "differential.jsonl")
        subprocess.run([go, "run", "./internal/conformancegen", "-seed", str(SEED), "-n", str(N), "-o", out],
                       cwd=_paths.REPO, check=True, timeout=600)
        with open(out, "rb") as f:
            return f.read().splitlines()


class Differential(unittest.TestCase):
    def test_generated_texts(self):
        lines = _lines()
        if lines is None:
            if os.environ.get("LEDGER_CI") == "1":
                self.fail("no Go toolchain to generate the differential texts (LEDGER_CI=1)")
            self.skipTest("no Go toolchain and no LEDGER_DIFFERENTIAL file")
        failures, pointer_differs = [], 0
        for raw in lines:
            want = json.loads(raw)
            data = base64.b64decode(want["input_base64"])
            domain = Domain(allow_non_integer=want.get("allow_non_integer", False))
            try:
                c = params_digest(data, domain)
                got = {"digest": c.digest, "size": c.size}
                exp = {"digest": want.get("digest"), "size": want.get("size")}
            except DomainError as e:
                got = {"refusal": e.kind}
                exp = {"refusal": want.get("refusal")}
                if e.pointer != want.get("pointer", "") or e.key != want.get("key", False):
                    pointer_differs += 1
                    failures.append(f"line {want['index']}: pointer {e.pointer!r} key {e.key}, Go {want.get('pointer', '')!r} {want.get('key', False)}")
            if got != exp:
                failures.append(f"line {want['index']}: got {got}, Go {exp}")
        print(f"\ndifferential: {len(lines)} texts (seed {SEED}), {len(failures)} disagreements", file=sys.stderr)
        self.assertGreaterEqual(len(lines), N)
        self.assertEqual(failures, [], "\n".join(failures[:20]))


if __name__ == "__main__":
    unittest.main()
