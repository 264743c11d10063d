"""Version 2 through the rest of the SDK: minimization with hiding=True,
entries whose params_digest is "v2:sha256:", and the client sending and
checking the commitment the minimization produced. The client runs
against an in-process signer standing in for ledgerd, with a test key, so
that answers can be tampered with; test_ledgerd_hiding.py runs the same
flows against a real ledgerd."""

import hashlib
import json
import os
import unittest

import _corpus
import _paths
from decisionledger.canonical import serialize
from decisionledger.client import Denied, LedgerClient, mediated
from decisionledger.declare import Declaration, DeclarationError
from decisionledger.digest import Commitment, MalformedDigestError, params_digest
from decisionledger.hiding import DisclosureError, derived_openings
from decisionledger.receipt import ReceiptError, VerifierKey, ed25519_available, parse_entry


def _read(*p):
    with open(os.path.join(_paths.TESTDATA, *p), "rb") as f:
        return f.read()


DECL = Declaration.parse(_read("declarations", "make_payment.json"))
PAYEES = {"payees": {"payee-0001"}}
PAYMENT = _read("calls", "make_payment.json")


class MinimizeHiding(unittest.TestCase):
    def test_minimize_corpus_with_hiding(self):
        # Every minimize.json case minimized with version 2: the same
        # attributes, digests and refusals; a version 2 commitment whose
        # disclosure opens it and gives back the parameters the case's
        # version 1 digest is of.
        cases = _corpus.load("minimize")
        accepted = 0
        want_accepted = sum("refusal" not in c["expect"] for c in cases)
        for case in cases:
            want = case["expect"]
            with self.subTest(case["name"]):
                raw = _corpus.b64(case["params_base64"])
                try:
                    d = Declaration.parse(json.dumps(case["declaration"]).encode())
                    r = d.minimize(raw, allowlists=case.get("allowlists"), hiding=True)
                except DeclarationError as e:
                    self.assertEqual({"code": e.code, "pointer": e.pointer},
                                     {"code": want["refusal"]["code"], "pointer": want["refusal"]["pointer"]})
                    continue
                self.assertNotIn("refusal", want)
                accepted += 1
                self.assertEqual((r.attributes, r.tiers_digest, r.definition_digest),
                                 (_corpus.b64(want["attributes_base64"]), want["tiers_digest"],
                                  want["definition_digest"]))
                self.assertTrue(r.params.hiding)
                self.assertTrue(r.params.digest.startswith("v2:sha256:"))
                r.disclosure.check(Commitment.parse(r.params.digest, r.params.size))
                v1 = params_digest(r.disclosure.params())
                self.assertEqual((v1.digest, v1.size), (want["params_digest"], want["params_size"]))
        self.assertEqual(accepted, want_accepted)
        self.assertGreater(accepted, 40)

    def test_version_1_stays_the_default(self):
        r = DECL.minimize(PAYMENT, allowlists=PAYEES)
        self.assertFalse(r.params.hiding)
        self.assertTrue(r.params.digest.startswith("sha256:"))
        self.assertIsNone(r.disclosure)
        with self.assertRaises(ValueError):
            DECL.minimize(PAYMENT, allowlists=PAYEES, openings=derived_openings(b"\x07" * 32, "k"))

    def test_openings_pass_through(self):
        first = DECL.minimize(PAYMENT, allowlists=PAYEES, hiding=True)
        retry = DECL.minimize(PAYMENT, allowlists=PAYEES, hiding=True, openings=first.disclosure)
        self.assertEqual(retry.params, first.params)
        other = DECL.minimize(PAYMENT, allowlists=PAYEES, hiding=True)
        self.assertNotEqual(other.params.digest, first.params.digest)
        src = derived_openings(b"\x07" * 32, "call-0001")
        a = DECL.minimize(PAYMENT, allowlists=PAYEES, hiding=True, openings=src)
        b = DECL.minimize(PAYMENT, allowlists=PAYEES, hiding=True, openings=src)
        self.assertEqual(a.params, b.params)
        with self.assertRaises(DisclosureError) as cm:
            DECL.minimize(PAYMENT, allowlists=PAYEES, hiding=True, openings=first.disclosure.only(["payee"]))
        self.assertEqual((cm.exception.code, cm.exception.field), ("field_not_opened", "amount_minor"))

    def test_printed_minimized_holds_no_value(self):
        r = DECL.minimize(PAYMENT, allowlists=PAYEES, hiding=True)
        s = repr(r)
        for secret in ("payee-0001", "Invoice 4711", bytes(r.disclosure.opening("memo")).hex()):
            self.assertNotIn(secret, s)
        self.assertIn("Disclosure(4 fields, 4 disclosed)", s)


class EntryDigests(unittest.TestCase):
    def setUp(self):
        self.b = _read("entry", "example-v3-decision.json")
        self.hex = json.loads(self.b)["params_digest"][7:]

    def test_params_digest_of_either_version(self):
        m = parse_entry(self.b.replace(b'"params_digest":"sha256:', b'"params_digest":"v2:sha256:'))
        self.assertEqual(m["params_digest"], "v2:sha256:" + self.hex)
        for bad in (b'"params_digest":"v3:sha256:', b'"params_digest":"V2:sha256:', b'"params_digest":"v2:'):
            with self.subTest(bad):
                with self.assertRaises(ReceiptError) as cm:
                    parse_entry(self.b.replace(b'"params_digest":"sha256:', bad))
                self.assertEqual((cm.exception.check, cm.exception.field), ("encoding", "params_digest"))

    def test_other_digests_stay_version_1(self):
        for f in (b"tiers_digest", b"definition_digest", b"policy_set", b"prev"):
            with self.subTest(f):
                with self.assertRaises(ReceiptError) as cm:
                    parse_entry(self.b.replace(b'"' + f + b'":"sha256:', b'"' + f + b'":"v2:sha256:'))
                self.assertEqual(cm.exception.field, f.decode())


class _Signer:
    """Answers the client's POSTs as ledgerd would, signing each entry
    with a test key; tamper(entry) may change an entry before it is
    signed."""

    def __init__(self, tamper=None, decision="allow"):
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        self.priv = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"py-hiding test log").digest())
        pub = self.priv.public_key().public_bytes_raw()
        name = "ledger.example.com/test"
        h = hashlib.sha256(name.encode() + b"\n" + b"\x01" + pub).digest()[:4].hex()
        import base64
        self.vkey = VerifierKey.parse(f"{name}+{h}+" + base64.b64encode(b"\x01" + pub).decode())
        self.tamper, self.decision = tamper or (lambda e: None), decision
        self.sent = []
        self.index = 0

    def sign(self, e):
        import base64
        self.index += 1
        e.update({"index": self.index, "key_id": self.vkey.key_id, "origin": self.vkey.name,
                  "prev": "sha256:" + "11" * 32, "time": "2026-12-03T09:00:00.000000Z", "mediator": "mediator-test"})
        self.tamper(e)
        e = dict(sorted(e.items()))
        msg = b"ledger/v%d/entry\n" % e["version"] + serialize(e)
        e["sig"] = base64.b64encode(self.priv.sign(msg)).decode()
        return serialize(dict(sorted(e.items())))

    def post(self, path, obj, idempotency_key):
        self.sent.append((path, obj))
        if path.startswith("/v1/decide") or path.startswith("/v1/entries"):
            decision, policies = obj.get("decision", self.decision), obj.get("policies", ["p.test"])
            e = {k: obj[k] for k in ("action", "attributes", "params_digest", "params_size", "principal",
                                     "tiers_digest")}
            e.update({"version": 3, "kind": "decision", "decision": decision, "policies": policies,
                      "policy_errors": [], "policy_set": "sha256:" + "22" * 32,
                      "definition_digest": DECL.definition_digest()})
            raw = self.sign(e)
            ans = {"index": self.index}
            if path.startswith("/v1/decide"):
                ans.update({"decision": decision, "policies": policies, "policy_errors": [],
                            "policy_set": "sha256:" + "22" * 32})
        elif path.endswith("/consume"):
            e = dict(obj, version=4, kind="consumption", approval=path.split("/")[3], request=self.index)
            raw = self.sign(e)
            ans = {"index": self.index}
        else:
            raise AssertionError("unexpected POST " + path)
        body = json.dumps(ans)[:-1].encode() + b',"entry":' + raw + b"}"
        return body, False


@unittest.skipUnless(ed25519_available() or os.environ.get("LEDGER_CI") == "1",
                     "cryptography is not importable: receipts cannot be verified (LEDGER_CI=1 fails instead)")
class ClientSendsTheCommitment(unittest.TestCase):
    def client(self, signer):
        c = LedgerClient("http://127.0.0.1:9", "token-not-used", signer.vkey)
        c._post = signer.post
        return c

    def test_decide_and_consume_version_2(self):
        s = _Signer()
        c = self.client(s)
        m = DECL.minimize(PAYMENT, allowlists=PAYEES, hiding=True)
        d = c.decide("agent:accounts-7", DECL, m)
        self.assertEqual(s.sent[0][1]["params_digest"], m.params.digest)
        self.assertEqual(s.sent[0][1]["params_size"], m.params.size)
        e = d.receipt.entry
        self.assertEqual(e["params_digest"], m.params.digest)
        m.disclosure.only(["amount_minor"]).check(Commitment.parse(e["params_digest"], e["params_size"]))
        # The mediator retries the approved call with the first call's openings.
        retry = DECL.minimize(PAYMENT, allowlists=PAYEES, hiding=True, openings=m.disclosure)
        approval = "sha256:" + "33" * 32
        r = c.consume(approval, action="make_payment", principal="agent:accounts-7",
                      params_digest=retry.params.digest, params_size=retry.params.size)
        self.assertEqual(r.entry["params_digest"], m.params.digest)
        # append sends it too, and checks its entry the same way.
        r = c.append("agent:accounts-7", "make_payment", "allow", ["p.mediator"], m)
        self.assertEqual(s.sent[-1][1]["params_digest"], m.params.digest)
        self.assertEqual(r.entry["params_digest"], m.params.digest)

    def test_version_1_still_sent_by_default(self):
        s = _Signer()
        m = DECL.minimize(PAYMENT, allowlists=PAYEES)
        d = self.client(s).decide("agent:accounts-7", DECL, m)
        self.assertEqual(d.receipt.entry["params_digest"], m.params.digest)
        self.assertTrue(m.params.digest.startswith("sha256:"))

    def test_compared_as_the_whole_text(self):
        # An entry recording the version 1 spelling of the same hex is not
        # the request sent, and the other way round.
        def to_v1(e):
            e["params_digest"] = e["params_digest"].replace("v2:", "")

        m = DECL.minimize(PAYMENT, allowlists=PAYEES, hiding=True)
        with self.assertRaises(ReceiptError) as cm:
            self.client(_Signer(to_v1)).decide("agent:accounts-7", DECL, m)
        self.assertEqual(cm.exception.check, "answer")

        def to_v2(e):
            e["params_digest"] = "v2:" + e["params_digest"]

        m1 = DECL.minimize(PAYMENT, allowlists=PAYEES)
        with self.assertRaises(ReceiptError) as cm:
            self.client(_Signer(to_v2)).decide("agent:accounts-7", DECL, m1)
        self.assertEqual(cm.exception.check, "answer")
        with self.assertRaises(ReceiptError) as cm:
            self.client(_Signer(to_v1)).consume("sha256:" + "33" * 32, action="make_payment",
                                               principal="agent:accounts-7", params_digest=m.params.digest,
                                               params_size=m.params.size)
        self.assertEqual(cm.exception.check, "answer")

    def test_consume_refuses_a_malformed_digest_before_sending(self):
        s = _Signer()
        c = self.client(s)
        for bad in ("v2:sha256:" + "A" * 64, "v3:sha256:" + "a" * 64, "sha256:" + "a" * 63):
            with self.assertRaises(MalformedDigestError):
                c.consume("sha256:" + "33" * 32, action="make_payment", principal="agent:accounts-7",
                          params_digest=bad, params_size=310)
        self.assertEqual(s.sent, [])

    def test_mediate_with_hiding(self):
        s = _Signer(decision="deny")
        med = self.client(s).mediate("agent:accounts-7", DECL, PAYMENT, allowlists=PAYEES, hiding=True)
        with self.assertRaises(Denied) as cm:
            med.__enter__()
        sent = s.sent[0][1]
        self.assertTrue(sent["params_digest"].startswith("v2:sha256:"))
        self.assertEqual((sent["params_digest"], sent["params_size"]),
                         (med.minimized.params.digest, med.minimized.params.size))
        e = cm.exception.decided.receipt.entry
        med.minimized.disclosure.check(Commitment.parse(e["params_digest"], e["params_size"]))
        self.assertNotIn("payee-0001", json.dumps(sent))

    def test_mediate_hands_over_the_disclosure_before_sending(self):
        s = _Signer(decision="deny")
        given = []

        def refuse(x):
            given.append(x)
            raise OSError("the disclosure could not be kept")

        med = self.client(s).mediate("agent:accounts-7", DECL, PAYMENT, allowlists=PAYEES, hiding=True,
                                     on_disclosure=refuse)
        with self.assertRaises(OSError):
            med.__enter__()
        self.assertEqual((len(given), s.sent), (1, []))
        self.assertIs(given[0], med.minimized.disclosure)


class DisclosureCallbackArguments(unittest.TestCase):
    def test_mediated_needs_on_disclosure_with_hiding(self):
        c = LedgerClient("http://127.0.0.1:9", "token-not-used",
                         "ledger.example.com/log+cf212548+AZH4G75SSYwtzGM4N1oZem1E5CKzRLXWu82UBy0tGPhx")
        with self.assertRaises(TypeError) as cm:
            mediated("make_payment", client=c, principal="agent:accounts-7", hiding=True)
        self.assertIn("on_disclosure", str(cm.exception))
        with self.assertRaises(ValueError):
            mediated("make_payment", client=c, principal="agent:accounts-7", on_disclosure=print)
        with self.assertRaises(ValueError):
            c.mediate("agent:accounts-7", DECL, PAYMENT, on_disclosure=print)
        mediated("make_payment", client=c, principal="agent:accounts-7", hiding=True, on_disclosure=print)


if __name__ == "__main__":
    unittest.main()
