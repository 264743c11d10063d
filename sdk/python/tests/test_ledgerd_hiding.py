"""The hiding commitment (version 2) against a real ledgerd: the harness
of test_ledgerd.py (_ledgerd.py: the Go binary, the repository's catalog
and policies, one approver). The receipts and the entries the log serves
carry the "v2:sha256:" commitment the SDK made, the disclosure the SDK
kept opens them, and an approval opened on one is consumed only with the
same commitment, made again from the first call's disclosure. Skipped
without Go unless LEDGER_CI=1."""

import json
import os
import shutil
import tempfile
import unittest

from _ledgerd import Ledgerd, binary_or_skip
from decisionledger.client import LedgerClient, LedgerHTTPError
from decisionledger.digest import Commitment
from decisionledger.hiding import Disclosure, DisclosureError
from decisionledger.receipt import ed25519_available

PRINCIPAL = "agent:accounts-7"
PAYEES = {"payees": {"acct-100"}}


def _params(amount, payee="acct-100", memo="Invoice 2026-1142"):
    return json.dumps({"amount_minor": amount, "currency": "EUR", "payee": payee, "memo": memo}).encode()


def _commitment(entry):
    return Commitment.parse(entry["params_digest"], entry["params_size"])


@unittest.skipUnless(ed25519_available() or os.environ.get("LEDGER_CI") == "1",
                     "cryptography is not importable: receipts cannot be verified (LEDGER_CI=1 fails instead)")
class HidingAgainstLedgerd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        binary = binary_or_skip()
        cls.tmp = tempfile.mkdtemp(prefix="sdk-py-ledgerd-hiding-")
        cls.ledgerd = Ledgerd(binary, cls.tmp)
        cls.client = LedgerClient(cls.ledgerd.url, cls.ledgerd.token, cls.ledgerd.vkey)
        cls.decl = cls.client.declaration("make_payment")

    @classmethod
    def tearDownClass(cls):
        cls.ledgerd.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_the_logged_entry_opens_with_the_disclosure(self):
        m = self.decl.minimize(_params(1002, memo="hiding: opened"), allowlists=PAYEES, hiding=True)
        d = self.client.decide(PRINCIPAL, self.decl, m)
        self.assertEqual(d.decision, "allow")
        self.assertTrue(d.receipt.entry["params_digest"].startswith("v2:sha256:"))
        self.assertEqual((d.receipt.entry["params_digest"], d.receipt.entry["params_size"]),
                         (m.params.digest, m.params.size))
        # The entry as the log serves it, read strictly and verified by the SDK.
        e = self.client.entry(d.receipt.index)
        self.assertEqual((e["kind"], e["params_digest"], e["params_size"]), ("decision", m.params.digest, m.params.size))
        m.disclosure.check(_commitment(e))
        m.disclosure.only(["amount_minor"]).check(_commitment(e))
        # The file a workload keeps opens it too, after a round trip.
        path = os.path.join(self.tmp, "opened.json")
        m.disclosure.write(path)
        with open(path, "rb") as f:
            kept = Disclosure.parse(f.read())
        kept.check(_commitment(e))
        self.assertEqual(kept.params(), m.disclosure.params())
        # Another call's disclosure of the same parameters does not open it.
        other = self.decl.minimize(_params(1002, memo="hiding: opened"), allowlists=PAYEES, hiding=True)
        with self.assertRaises(DisclosureError) as cm:
            other.disclosure.check(_commitment(e))
        self.assertEqual(cm.exception.code, "commitment_mismatch")
        self.client.decision_outcome(d.receipt.index, "succeeded", "op-hiding-1")

    def test_identical_calls_commit_differently(self):
        raw = _params(1002, memo="hiding: twice")
        got = []
        for _ in range(2):
            m = self.decl.minimize(raw, allowlists=PAYEES, hiding=True)
            d = self.client.decide(PRINCIPAL, self.decl, m)
            self.assertEqual(d.decision, "allow")
            got.append((m, self.client.entry(d.receipt.index)))
        (m1, e1), (m2, e2) = got
        self.assertNotEqual(e1["params_digest"], e2["params_digest"])
        self.assertTrue(e1["params_digest"].startswith("v2:sha256:") and e2["params_digest"].startswith("v2:sha256:"))
        # The same parameters and attributes: only the commitment differs.
        self.assertEqual(m1.disclosure.params(), m2.disclosure.params())
        self.assertEqual(e1["attributes"], e2["attributes"])
        m1.disclosure.check(_commitment(e1))
        m2.disclosure.check(_commitment(e2))
        for x, e in ((m1.disclosure, e2), (m2.disclosure, e1)):
            with self.assertRaises(DisclosureError) as cm:
                x.check(_commitment(e))
            self.assertEqual(cm.exception.code, "commitment_mismatch")

    def test_an_approval_is_consumed_with_the_first_calls_commitment(self):
        raw = _params(1250000, memo="hiding: approval")
        m = self.decl.minimize(raw, allowlists=PAYEES, hiding=True)
        d = self.client.decide(PRINCIPAL, self.decl, m)
        self.assertEqual(d.decision, "needs_approval")
        opened = d.receipt.approval
        self.assertEqual((self.client.approval(opened.id).params_digest, self.client.approval(opened.id).params_size),
                         (m.params.digest, m.params.size))
        # The workload keeps the disclosure; the mediator, later, reads it back.
        path = os.path.join(self.tmp, "approval.json")
        m.disclosure.write(path)
        self.ledgerd.approve(opened.id)
        self.assertEqual(self.client.wait_approval(opened.id, timeout=60).state, "approved")
        with open(path, "rb") as f:
            first = Disclosure.parse(f.read())

        def consume(minimized):
            return self.client.consume(opened.id, action="make_payment", principal=PRINCIPAL,
                                       params_digest=minimized.params.digest, params_size=minimized.params.size)

        fresh = self.decl.minimize(raw, allowlists=PAYEES, hiding=True)
        version_1 = self.decl.minimize(raw, allowlists=PAYEES)
        for what, other in (("fresh openings", fresh), ("the version 1 digest", version_1)):
            with self.subTest(what):
                self.assertEqual(other.attributes, m.attributes)
                with self.assertRaises(LedgerHTTPError) as cm:
                    consume(other)
                self.assertEqual((cm.exception.status, cm.exception.code, cm.exception.term),
                                 (409, "approval_digest_mismatch", "params_digest"))
        self.assertEqual(self.client.approval(opened.id).state, "approved")
        again = self.decl.minimize(raw, allowlists=PAYEES, hiding=True, openings=first)
        self.assertEqual(again.params, m.params)
        c = consume(again)
        self.assertEqual((c.entry["kind"], c.entry["params_digest"]), ("consumption", m.params.digest))
        first.check(_commitment(self.client.entry(c.index)))
        self.client.outcome(opened.id, c.index, "succeeded", "op-hiding-2")
        self.assertEqual(self.client.approval(opened.id).state, "consumed")


if __name__ == "__main__":
    unittest.main()
