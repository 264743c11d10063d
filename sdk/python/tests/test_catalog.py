"""DeclarationSource: declarations fetched from a real ledgerd's catalog,
cached by definition digest, and dropped when ledgerd refuses them as
stale (after a restart with a changed catalog). Skipped without Go unless
LEDGER_CI=1."""

import json
import os
import shutil
import tempfile
import unittest

import _paths
from _ledgerd import Ledgerd, binary_or_skip
from decisionledger.catalog import DeclarationSource, StaleDeclarationError
from decisionledger.client import LedgerClient, LedgerHTTPError, mediated
from decisionledger.declare import Declaration
from decisionledger.receipt import ed25519_available

PRINCIPAL = "agent:accounts-7"
PAYEES = {"payees": {"acct-100"}}
DECLARATIONS = os.path.join(_paths.TESTDATA, "declarations")
LIST, FILE = ("GET", "/v1/actions"), ("GET", "/v1/actions/make_payment")


def _params(amount, memo="Invoice 2026-1142"):
    return json.dumps({"amount_minor": amount, "currency": "EUR", "payee": "acct-100", "memo": memo}).encode()


def _read(dir, action):
    with open(os.path.join(dir, action + ".json"), "rb") as f:
        return Declaration.parse(f.read())


class CountingClient(LedgerClient):
    """A client that records the requests it sends, (method, path)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.requests = []

    def _request(self, method, path, *args, **kwargs):
        self.requests.append((method, path))
        return super()._request(method, path, *args, **kwargs)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class StaleCodes(unittest.TestCase):
    def test_only_the_catalogs_refusals_are_stale(self):
        src = DeclarationSource(None)
        m = _read(DECLARATIONS, "make_payment").minimize(_params(1002), allowlists=PAYEES)
        for status, code in ((422, "tiers_mismatch"), (422, "attributes_not_declared"), (422, "unknown_action")):
            e = src.stale("make_payment", m, LedgerHTTPError(status, code, "refused"))
            self.assertIsInstance(e, StaleDeclarationError)
            self.assertEqual((e.status, e.code, e.action, e.tiers_digest, e.definition_digest),
                             (status, code, "make_payment", m.tiers_digest, m.definition_digest))
        for status, code in ((401, "unauthenticated"), (400, "invalid_request"), (409, "tiers_mismatch")):
            self.assertIsNone(src.stale("make_payment", m, LedgerHTTPError(status, code, "refused")))

    def test_refresh_is_a_number_of_seconds(self):
        self.assertEqual(DeclarationSource(None).refresh, 60.0)
        for bad in (-1, float("nan")):
            with self.assertRaises(ValueError):
                DeclarationSource(None, refresh=bad)


@unittest.skipUnless(ed25519_available() or os.environ.get("LEDGER_CI") == "1",
                     "cryptography is not importable: receipts cannot be verified (LEDGER_CI=1 fails instead)")
class SourceAgainstLedgerd(unittest.TestCase):
    """One ledgerd whose catalog is a copy of testdata/declarations; the
    test that changes it restarts ledgerd, so each test has its own."""

    def setUp(self):
        binary = binary_or_skip()
        self.tmp = tempfile.mkdtemp(prefix="sdk-py-catalog-")
        self.catalog = os.path.join(self.tmp, "catalog")
        shutil.copytree(DECLARATIONS, self.catalog)
        self.ledgerd = Ledgerd(binary, self.tmp, catalog=self.catalog)
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.addCleanup(self.ledgerd.stop)
        self.client = CountingClient(self.ledgerd.url, self.ledgerd.token, self.ledgerd.vkey)

    def test_cached_by_digest_listing_reread_every_refresh_seconds(self):
        clock = Clock()
        src = DeclarationSource(self.client, clock=clock)
        d = src.get("make_payment")
        self.assertEqual(self.client.requests, [LIST, FILE])
        self.assertEqual(d.definition_digest(), _read(DECLARATIONS, "make_payment").definition_digest())
        self.assertEqual(src.cached, {"make_payment": d.definition_digest()})
        self.client.requests.clear()
        clock.now = 59.5
        self.assertIs(src.get("make_payment"), d)
        self.assertEqual(self.client.requests, [])
        clock.now = 60.0
        self.assertIs(src.get("make_payment"), d)
        self.assertEqual(self.client.requests, [LIST])
        # Another action under a listing read earlier: read again with the file.
        self.client.requests.clear()
        clock.now = 70.0
        src.get("send_email")
        self.assertEqual(self.client.requests, [LIST, ("GET", "/v1/actions/send_email")])

    def test_refusals_of_declarations_not_the_ledgers(self):
        src = DeclarationSource(self.client)
        src.get("make_payment")
        with open(os.path.join(DECLARATIONS, "make_payment.json")) as f:
            doc = json.load(f)
        doc["action"] = "make_refund"
        other = Declaration.parse(json.dumps(doc).encode())
        m = other.minimize(_params(1002), allowlists=PAYEES)
        with self.assertRaises(StaleDeclarationError) as cm:
            src.decide(PRINCIPAL, other, m)
        self.assertEqual((cm.exception.status, cm.exception.code, cm.exception.action, cm.exception.tiers_digest),
                         (422, "unknown_action", "make_refund", m.tiers_digest))
        # The currency made payload: the attributes lack a declared one.
        doc["action"] = "make_payment"
        doc["fields"]["currency"]["tier"] = "payload"
        changed = Declaration.parse(json.dumps(doc).encode())
        m = changed.minimize(_params(1002), allowlists=PAYEES)
        with self.assertRaises(StaleDeclarationError) as cm:
            src.append(PRINCIPAL, "make_payment", "allow", ["example.allow"], m)
        self.assertEqual((cm.exception.code, cm.exception.action, cm.exception.definition_digest),
                         ("attributes_not_declared", "make_payment", changed.definition_digest()))
        self.assertEqual(src.cached, {})

    def test_stale_after_a_restart_refused_then_fetched_anew(self):
        src = DeclarationSource(self.client, clock=Clock())  # the listing never ages: only a refusal re-reads it
        calls = []

        @mediated("make_payment", client=self.client, principal=PRINCIPAL, declaration=src, allowlists=PAYEES)
        def make_payment(amount_minor, currency, payee, memo=""):
            calls.append(amount_minor)
            return "paid"

        self.assertEqual(make_payment(1500, "EUR", "acct-100"), "paid")
        old, old_email = src.get("make_payment"), src.get("send_email")

        # A new optional payload field changes the applied-tiers digest,
        # not the attributes. The catalog is read at start: restart.
        for action in ("make_payment", "send_email"):
            path = os.path.join(self.catalog, action + ".json")
            with open(path) as f:
                doc = json.load(f)
            doc["fields"]["reference"] = {"type": "string", "tier": "payload", "optional": True}
            with open(path, "w") as f:
                json.dump(doc, f, indent=2)
        new, new_email = _read(self.catalog, "make_payment"), _read(self.catalog, "send_email")
        self.assertNotEqual(new.tiers_digest(), old.tiers_digest())
        self.ledgerd.restart()

        self.client.requests.clear()
        with self.assertRaises(StaleDeclarationError) as cm:
            make_payment(1600, "EUR", "acct-100", memo="stale")
        e = cm.exception
        self.assertIsInstance(e, LedgerHTTPError)
        self.assertEqual((e.status, e.code, e.action, e.tiers_digest, e.definition_digest),
                         (422, "tiers_mismatch", "make_payment", old.tiers_digest(), old.definition_digest()))
        self.assertIn(old.tiers_digest(), str(e))
        self.assertEqual(self.client.requests, [("POST", "/v1/decide")])  # the cached one, sent once, no retry
        self.assertEqual(calls, [1500])
        self.assertNotIn("make_payment", src.cached)

        # The listing is read again after a refusal: send_email's old
        # declaration is not reused, though no refusal named it.
        self.client.requests.clear()
        self.assertEqual(src.get("send_email").definition_digest(), new_email.definition_digest())
        self.assertNotEqual(new_email.definition_digest(), old_email.definition_digest())
        self.assertEqual(self.client.requests, [LIST, ("GET", "/v1/actions/send_email")])

        # The next call fetches the new declaration, digests recomputed.
        self.client.requests.clear()
        with self.client.mediate(PRINCIPAL, src, _params(1700), action="make_payment", allowlists=PAYEES) as call:
            pass
        self.assertEqual(self.client.requests[:2], [LIST, FILE])
        self.assertEqual((call.declaration.tiers_digest(), call.declaration.definition_digest()),
                         (new.tiers_digest(), new.definition_digest()))
        entry = call.decided.receipt.entry
        self.assertEqual((call.decided.decision, entry["tiers_digest"], entry["definition_digest"]),
                         ("allow", new.tiers_digest(), new.definition_digest()))
        self.assertEqual(call.outcome.entry["result"], "succeeded")


if __name__ == "__main__":
    unittest.main()
