"""The client against a real ledgerd: the Go binary, built by the test
(or taken from LEDGER_LEDGERD), serving on 127.0.0.1 with the repository's
catalog (testdata/declarations), policies (testdata/policies) and one
approver. Skipped without Go unless LEDGER_CI=1."""

import http.client
import http.server
import json
import os
import re
import shutil
import tempfile
import threading
import time
import unittest
import urllib.parse

import _paths
from _ledgerd import Ledgerd, binary_or_skip
from decisionledger.client import (ApprovalNotGranted, Denied, LedgerClient, LedgerConnectionError, LedgerHTTPError,
                                   mediated)
from decisionledger.errors import DomainError
from decisionledger.declare import Declaration
from decisionledger.preview import render
from decisionledger.receipt import ReceiptError, ed25519_available

PRINCIPAL = "agent:accounts-7"
PAYEES = {"payees": {"acct-100"}}


class TamperingProxy:
    """Forwards to ledgerd on loopback and lets a test change answers."""

    def __init__(self, target, tamper):
        target = urllib.parse.urlparse(target)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_any(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
                hdrs = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, body=body or None, headers=hdrs)
                resp = conn.getresponse()
                data = tamper(self.path, resp.read())
                conn.close()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("content-length", "connection", "transfer-encoding", "date", "server"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_any

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _params(amount, payee="acct-100", memo="Invoice 2026-1142"):
    return json.dumps({"amount_minor": amount, "currency": "EUR", "payee": payee, "memo": memo}).encode()


@unittest.skipUnless(ed25519_available() or os.environ.get("LEDGER_CI") == "1",
                     "cryptography is not importable: receipts cannot be verified (LEDGER_CI=1 fails instead)")
class AgainstLedgerd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        binary = binary_or_skip()
        cls.tmp = tempfile.mkdtemp(prefix="sdk-py-ledgerd-")
        cls.ledgerd = Ledgerd(binary, cls.tmp)
        cls.client = LedgerClient(cls.ledgerd.url, cls.ledgerd.token, cls.ledgerd.vkey)
        cls.decl = cls.client.declaration("make_payment")

    @classmethod
    def tearDownClass(cls):
        cls.ledgerd.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_declaration_fetched_is_the_repositorys(self):
        with open(os.path.join(_paths.TESTDATA, "declarations", "make_payment.json"), "rb") as f:
            local = Declaration.parse(f.read())
        self.assertEqual(self.decl.definition_digest(), local.definition_digest())
        self.assertEqual(self.decl.tiers_digest(), local.tiers_digest())

    def test_allow_then_outcome(self):
        m = self.decl.minimize(_params(1002), allowlists=PAYEES)
        d = self.client.decide(PRINCIPAL, self.decl, m, wait_checkpoint=True)
        self.assertEqual(d.decision, "allow")
        self.assertEqual(d.policies, ["payments.allow-known-payee"])
        self.assertIsNotNone(d.receipt.checkpoint)
        self.assertEqual(d.receipt.entry["params_digest"], m.params.digest)
        self.assertEqual(d.receipt.entry["definition_digest"], self.decl.definition_digest())
        r = self.client.decision_outcome(d.receipt.index, "succeeded", "op-1")
        self.assertEqual((r.entry["kind"], r.entry["decision"]), ("outcome", d.receipt.index))
        with self.assertRaises(LedgerHTTPError) as cm:
            self.client.decision_outcome(d.receipt.index, "failed")
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "outcome_final"))

    def test_approval_lifecycle(self):
        raw = _params(1250000)
        m = self.decl.minimize(raw, allowlists=PAYEES)
        doc = {"amount_minor": 1250000, "payee": "acct-100", "password": "hunter2"}
        d = self.client.decide(PRINCIPAL, self.decl, m, preview=doc)
        self.assertEqual(d.decision, "needs_approval")
        opened = d.receipt.approval
        self.assertEqual(opened.id, d.receipt.entry_hash)
        self.assertEqual(opened.preview_digest, render(json.dumps(doc).encode()).digest)
        self.assertEqual(self.client.approval(opened.id).state, "pending")
        with self.assertRaises(LedgerHTTPError) as cm:
            self.client.consume(opened.id, action="make_payment", principal=PRINCIPAL,
                                params_digest=m.params.digest, params_size=m.params.size)
        self.assertEqual(cm.exception.code, "approval_pending")
        page = self.ledgerd.approve(opened.id)
        self.assertEqual(page["preview_digest"], opened.preview_digest)
        st = self.client.wait_approval(opened.id, timeout=60)
        self.assertEqual(st.state, "approved")
        self.assertEqual(st.verdict_entry["verdict"], "approve")
        with self.assertRaises(LedgerHTTPError) as cm:
            self.client.consume(opened.id, action="make_payment", principal=PRINCIPAL,
                                params_digest=m.params.digest, params_size=m.params.size + 1)
        self.assertEqual((cm.exception.code, cm.exception.term), ("approval_digest_mismatch", "params_size"))
        c = self.client.consume(opened.id, action="make_payment", principal=PRINCIPAL,
                                params_digest=m.params.digest, params_size=m.params.size)
        o = self.client.outcome(opened.id, c.index, "succeeded", "op-4711")
        self.assertEqual((o.entry["consumption"], o.entry["result"]), (c.index, "succeeded"))
        self.assertEqual(self.client.approval(opened.id).state, "consumed")

    def test_refusals_are_typed(self):
        m = self.decl.minimize(_params(1002), allowlists=PAYEES)
        with self.assertRaises(LedgerHTTPError) as cm:
            self.client.decide(PRINCIPAL, "no_such_action", m)
        self.assertEqual((cm.exception.status, cm.exception.code), (422, "unknown_action"))
        bad = LedgerClient(self.ledgerd.url, "0" * 64, self.ledgerd.vkey)
        with self.assertRaises(LedgerHTTPError) as cm:
            bad.decide(PRINCIPAL, self.decl, m)
        self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthenticated"))
        self.assertNotIn(self.ledgerd.token, repr(self.client))

    def test_tampered_receipts_are_refused(self):
        def flip_sig(path, body):
            if not path.startswith("/v1/decide"):
                return body
            i = body.index(b'"sig":"') + len(b'"sig":"')
            c = b"B" if body[i:i + 1] == b"A" else b"A"
            return body[:i] + c + body[i + 1:]

        def change_attributes(path, body):
            if not path.startswith("/v1/decide"):
                return body
            return body.replace(b'"amount_minor":1002', b'"amount_minor":1003')

        def other_index(path, body):
            if not path.startswith("/v1/decide"):
                return body
            return re.sub(rb'^(\{.*?)"index":(\d+),', lambda m: m.group(1) + b'"index":' + str(int(m.group(2)) + 1).encode() + b",", body, count=1)

        for tamper, check in ((flip_sig, "signature"), (change_attributes, "signature"), (other_index, "index")):
            with self.subTest(tamper.__name__):
                proxy = TamperingProxy(self.ledgerd.url, tamper)
                try:
                    c = LedgerClient(proxy.url, self.ledgerd.token, self.ledgerd.vkey)
                    m = self.decl.minimize(_params(1002, memo=tamper.__name__), allowlists=PAYEES)
                    with self.assertRaises(ReceiptError) as cm:
                        c.decide(PRINCIPAL, self.decl, m)
                    self.assertEqual(cm.exception.check, check)
                finally:
                    proxy.close()

    def test_a_malformed_listing_is_refused(self):
        def number_digest(path, body):
            if path != "/v1/actions":
                return body
            return body.replace(b'"definition_digest":"', b'"definition_digest":7,"was":"', 1)

        proxy = TamperingProxy(self.ledgerd.url, number_digest)
        try:
            c = LedgerClient(proxy.url, self.ledgerd.token, self.ledgerd.vkey)
            with self.assertRaises(ReceiptError) as cm:
                c.declaration("make_payment")
            self.assertEqual(cm.exception.check, "answer")
            self.assertIn("/actions/0", str(cm.exception))
        finally:
            proxy.close()

    def test_a_key_not_trusted_refuses_every_receipt(self):
        other = "ledger.example.com/log+cf212548+AZH4G75SSYwtzGM4N1oZem1E5CKzRLXWu82UBy0tGPhx"
        c = LedgerClient(self.ledgerd.url, self.ledgerd.token, other)
        m = self.decl.minimize(_params(1002, memo="untrusted"), allowlists=PAYEES)
        with self.assertRaises(ReceiptError) as cm:
            c.decide(PRINCIPAL, self.decl, m)
        self.assertEqual(cm.exception.check, "key")

    def test_mediated_decorator(self):
        calls = []

        @mediated("make_payment", client=self.client, principal=PRINCIPAL, allowlists=PAYEES)
        def make_payment(amount_minor, currency, payee, memo=""):
            calls.append(amount_minor)
            return "paid"

        self.assertEqual(make_payment(1500, "EUR", "acct-100", memo="decorated"), "paid")
        with self.assertRaises(Denied):
            make_payment(1500, "EUR", "acct-999")
        with self.assertRaises(ApprovalNotGranted):
            make_payment(500000, "EUR", "acct-100")
        self.assertEqual(calls, [1500])
        with self.assertRaises(DomainError) as cm:
            make_payment(15.5, "EUR", "acct-100")
        self.assertEqual((cm.exception.kind, cm.exception.pointer), ("non_integer", "/amount_minor"))
        self.assertEqual(calls, [1500])

    def test_mediate_context_manager_through_an_approval(self):
        raw = _params(2500000, memo="context manager")
        with self.assertRaises(RuntimeError):
            with self.client.mediate(PRINCIPAL, self.decl, _params(1003, memo="fails"), allowlists=PAYEES) as call:
                raise RuntimeError("the act failed")
        self.assertEqual(call.outcome.entry["result"], "failed")
        approver = threading.Thread(target=self._approve_when_open, args=(raw,))
        approver.start()
        try:
            with self.client.mediate(PRINCIPAL, self.decl, raw, allowlists=PAYEES, approval_timeout=60) as call:
                call.operation_id = "op-cm"
                self.assertEqual(call.decided.decision, "needs_approval")
                self.assertIsNotNone(call.consumption)
        finally:
            approver.join(timeout=60)
        self.assertEqual((call.outcome.entry["kind"], call.outcome.entry["result"], call.outcome.entry["operation_id"]),
                         ("outcome", "succeeded", "op-cm"))
        self.assertEqual(self.client.approval(call.decided.receipt.approval.id).state, "consumed")

    def _approve_when_open(self, raw):
        # Find the approval the mediation opens (the pending one for these
        # parameters) on the approver's page, then approve it.
        digest = self.decl.minimize(raw, allowlists=PAYEES).params.digest
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for approval_id in self.ledgerd.pending():
                if self.client.approval(approval_id).params_digest == digest:
                    self.ledgerd.approve(approval_id)
                    return
            time.sleep(0.2)

    def test_unreachable_ledger_is_a_typed_error(self):
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        c = LedgerClient(f"http://127.0.0.1:{port}", "t", self.ledgerd.vkey, retry_for=0.2)
        m = self.decl.minimize(_params(1002), allowlists=PAYEES)
        with self.assertRaises(LedgerConnectionError):
            c.decide(PRINCIPAL, self.decl, m)


if __name__ == "__main__":
    unittest.main()
