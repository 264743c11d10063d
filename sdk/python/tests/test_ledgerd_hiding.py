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
import threading
import time
import unittest

from _ledgerd import Ledgerd, binary_or_skip
from decisionledger.canonical import canonicalize_value
from decisionledger.client import Denied, LedgerClient, LedgerHTTPError, mediated
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
        self.assertEqual((e["kind"], e["params_digest"], e["params_size"]),
                         ("decision", m.params.digest, m.params.size))
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

    def _entries_with(self, digest):
        # Every entry the log holds whose params_digest is digest, read
        # one index at a time until the log has no more.
        found, i = [], 0
        while True:
            try:
                e = self.client.entry(i)
            except LedgerHTTPError as err:
                self.assertEqual(err.status, 404)
                return found
            if e.get("params_digest") == digest:
                found.append(e)
            i += 1

    def test_mediated_decorator_hands_over_each_disclosure(self):
        kept, calls = [], []

        @mediated("make_payment", client=self.client, principal=PRINCIPAL, allowlists=PAYEES, hiding=True,
                  on_disclosure=kept.append, approval_timeout=60)
        def make_payment(amount_minor, currency, payee, memo=""):
            calls.append(amount_minor)
            return "paid"

        self.assertEqual(make_payment(1500, "EUR", "acct-100", memo="decorated, hidden"), "paid")
        self.assertEqual(len(kept), 1)
        self.assertEqual(kept[0].params(), canonicalize_value(
            {"amount_minor": 1500, "currency": "EUR", "memo": "decorated, hidden", "payee": "acct-100"}))
        [e] = self._entries_with(kept[0].commitment.digest)
        self.assertTrue(e["params_digest"].startswith("v2:sha256:"))
        self.assertEqual(e["kind"], "decision")
        kept[0].check(_commitment(e))

        # A denied call's disclosure was handed over before the decision.
        with self.assertRaises(Denied) as cm:
            make_payment(1500, "EUR", "acct-999", memo="decorated, denied")
        self.assertEqual(len(kept), 2)
        kept[1].check(_commitment(cm.exception.decided.receipt.entry))

        # Through an approval: the consumption carries the request's commitment.
        approver = threading.Thread(target=self._approve_when_kept, args=(kept, 3))
        approver.start()
        try:
            self.assertEqual(make_payment(1250000, "EUR", "acct-100", memo="decorated, approved"), "paid")
        finally:
            approver.join(timeout=60)
        self.assertEqual(len(kept), 3)
        entries = self._entries_with(kept[2].commitment.digest)
        self.assertEqual([e["kind"] for e in entries], ["decision", "consumption"])
        for e in entries:
            kept[2].check(_commitment(e))
        self.assertEqual(calls, [1500, 1250000])

    def test_mediated_decorator_records_nothing_when_the_disclosure_is_not_kept(self):
        given, calls = [], []

        def full_disk(x):
            given.append(x)
            raise OSError("no space left on the disclosure volume")

        @mediated("make_payment", client=self.client, principal=PRINCIPAL, allowlists=PAYEES, hiding=True,
                  on_disclosure=full_disk)
        def make_payment(amount_minor, currency, payee, memo=""):
            calls.append(amount_minor)

        with self.assertRaises(OSError):
            make_payment(1500, "EUR", "acct-100", memo="decorated, not kept")
        self.assertEqual((len(given), calls), (1, []))
        self.assertEqual(self._entries_with(given[0].commitment.digest), [])

    def _approve_when_kept(self, kept, n):
        # Once the decorator has handed over its n-th disclosure, find the
        # pending approval on that commitment on the approver's page and
        # approve it.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if len(kept) >= n:
                digest = kept[n - 1].commitment.digest
                for approval_id in self.ledgerd.pending():
                    if self.client.approval(approval_id).params_digest == digest:
                        self.ledgerd.approve(approval_id)
                        return
            time.sleep(0.2)


if __name__ == "__main__":
    unittest.main()
