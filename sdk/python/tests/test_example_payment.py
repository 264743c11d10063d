"""examples/payment.py run as a user runs it (a child process, the package
on PYTHONPATH) against a real ledgerd with the repository's catalog and
policies; the test gives the verdict as the approver would, through the
approver page's JSON API. Skipped without Go unless LEDGER_CI=1."""

import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

import _paths
from _ledgerd import Ledgerd, binary_or_skip
from decisionledger.client import LedgerClient
from decisionledger.receipt import ed25519_available

EXAMPLE = os.path.join(_paths.SDK, "examples", "payment.py")
DIGEST, OP = r"(sha256:[0-9a-f]{64})", r"(op-[0-9a-f]{16})"
# The lines a person follows, in order; the groups are checked against the ledger.
LINES = [
    r"ledger:   decided needs_approval by \[payments\.approval-above-threshold\] \(entry (\d+)\)",
    r"ledger:   approval " + DIGEST + r" pending until (\d{4}-\d\d-\d\dT\S+)",
    r"approver: (http://\S+)/approvals/" + DIGEST,
    r"mediator: waiting up to 300 s for a verdict",
    r"ledger:   approved by alice \(entry (\d+)\)",
    r"ledger:   consumed approval " + DIGEST + r" \(entry (\d+)\)",
    r"payment:  paid 12500\.00 EUR to acct-100 \(" + OP + r"\)",
    r"ledger:   outcome succeeded, operation " + OP + r" \(entry (\d+)\)",
    r"ledger:   decided allow by \[payments\.allow-known-payee\] \(entry (\d+)\)",
    r"payment:  paid 42\.00 EUR to acct-100 \(" + OP + r"\)",
    r"ledger:   outcome succeeded, operation " + OP + r" \(entry (\d+)\)",
]


@unittest.skipUnless(ed25519_available() or os.environ.get("LEDGER_CI") == "1",
                     "cryptography is not importable: receipts cannot be verified (LEDGER_CI=1 fails instead)")
class PaymentExample(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        binary = binary_or_skip()
        cls.tmp = tempfile.mkdtemp(prefix="sdk-py-example-")
        cls.ledgerd = Ledgerd(binary, cls.tmp)
        cls.token_file = os.path.join(cls.tmp, "token")
        with open(cls.token_file, "w") as f:
            f.write(cls.ledgerd.token + "\n")
        cls.client = LedgerClient(cls.ledgerd.url, cls.ledgerd.token, cls.ledgerd.vkey)

    @classmethod
    def tearDownClass(cls):
        cls.ledgerd.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_example(self, verdict=None, token_file=None, env=None):
        """Run the example; with verdict, give it on the approver's page
        once the example prints the page. Returns (rc, stdout lines, stderr)."""
        # As a user's shell has it: no PYTHONUNBUFFERED, so the example
        # must flush its lines itself for the approver to see the page.
        e = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_") and k != "PYTHONUNBUFFERED"}
        e.update(PYTHONPATH=os.path.join(_paths.SDK, "src"), LEDGER_URL=self.ledgerd.url,
                 LEDGER_TOKEN_FILE=token_file or self.token_file, LEDGER_VERIFIER_KEY=self.ledgerd.vkey)
        e.update(env or {})
        proc = subprocess.Popen([sys.executable, EXAMPLE], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=e, cwd=self.tmp)
        lines, err = queue.Queue(), []
        outs = threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout] + [lines.put(None)], daemon=True)
        errs = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
        outs.start()
        errs.start()
        out = []
        try:
            while (line := lines.get(timeout=120)) is not None:
                out.append(line.rstrip("\n"))
                m = re.fullmatch(r"approver: \S+/approvals/(sha256:[0-9a-f]{64})", out[-1])
                if m and verdict:
                    self.ledgerd.approve(m.group(1), verdict)
            rc = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            outs.join(timeout=30)
            errs.join(timeout=30)
            proc.stdout.close()
            proc.stderr.close()
        return rc, out, "".join(err)

    def test_walkthrough(self):
        rc, out, err = self.run_example("approve")
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(len(out), len(LINES), out)
        g = []
        for pattern, line in zip(LINES, out):
            m = re.fullmatch(pattern, line)
            self.assertIsNotNone(m, f"{line!r} is not {pattern!r}")
            g.append(m.groups())
        (decided,), (approval, _), (base, page), _, (verdict,), (consumed_id, consumed), (op,), \
            (op_out, outcome), (allowed,), (op2,), (op2_out, outcome2) = g
        self.assertEqual((base, page, consumed_id), (self.ledgerd.url, approval, approval))
        self.assertEqual((op_out, op2_out), (op, op2))
        self.assertNotEqual(op, op2)

        # The ledger holds what was printed (each entry verified with the key).
        e = self.client.entry(int(decided))
        self.assertEqual((e["kind"], e["decision"], e["action"], e["principal"], e["policies"]),
                         ("decision", "needs_approval", "make_payment", "agent:accounts-7",
                          ["payments.approval-above-threshold"]))
        self.assertEqual(e["attributes"]["amount_minor"], 1250000)
        e = self.client.entry(int(verdict))
        self.assertEqual((e["kind"], e["approval"], e["verdict"], e["approver"], e["request"]),
                         ("approval", approval, "approve", "alice", int(decided)))
        e = self.client.entry(int(consumed))
        self.assertEqual((e["kind"], e["approval"], e["action"]), ("consumption", approval, "make_payment"))
        e = self.client.entry(int(outcome))
        self.assertEqual((e["kind"], e["approval"], e["consumption"], e["result"], e["operation_id"]),
                         ("outcome", approval, int(consumed), "succeeded", op))
        self.assertEqual(self.client.approval(approval).state, "consumed")
        e = self.client.entry(int(allowed))
        self.assertEqual((e["kind"], e["decision"], e["policies"], e["attributes"]["amount_minor"]),
                         ("decision", "allow", ["payments.allow-known-payee"], 4200))
        e = self.client.entry(int(outcome2))
        self.assertEqual((e["kind"], e["decision"], e["result"], e["operation_id"]),
                         ("outcome", int(allowed), "succeeded", op2))
        indexes = [int(x) for x in (decided, verdict, consumed, outcome, allowed, outcome2)]
        self.assertEqual(indexes, sorted(set(indexes)))

    def test_a_denied_approval_exits_1_without_paying(self):
        rc, out, err = self.run_example("deny")
        self.assertEqual(rc, 1)
        self.assertRegex(out[-1], r"^mediator: waiting")
        self.assertFalse([line for line in out if line.startswith("payment:")], out)
        self.assertEqual(err, "payment: the approval is denied: not paying\n")

    def test_a_refused_token_exits_1(self):
        bad = os.path.join(self.tmp, "bad-token")
        with open(bad, "w") as f:
            f.write("0" * 64)
        rc, out, err = self.run_example(token_file=bad)
        self.assertEqual((rc, out), (1, []))
        self.assertRegex(err, r"^payment: ledgerd: 401 unauthenticated: ")
        self.assertNotIn("0" * 64, err)

    def test_without_a_token_file_it_says_so(self):
        rc, out, err = self.run_example(env={"LEDGER_TOKEN_FILE": ""})
        self.assertEqual((rc, out), (2, []))
        self.assertEqual(err, "payment: LEDGER_TOKEN_FILE and LEDGER_VERIFIER_KEY must be set\n")


if __name__ == "__main__":
    unittest.main()
