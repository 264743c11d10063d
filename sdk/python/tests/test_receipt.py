import os
import sys
import unittest

import _corpus
import _paths
from decisionledger.receipt import (ReceiptError, VerifierKey, ed25519_available, entry_hash, leaf_hash,
                                    parse_entry, verify_entry, verify_receipt)

EXAMPLE_VKEY = "ledger.example.com/log+cf212548+AZH4G75SSYwtzGM4N1oZem1E5CKzRLXWu82UBy0tGPhx"


def _read(*p):
    with open(os.path.join(_paths.TESTDATA, *p), "rb") as f:
        return f.read()


@unittest.skipUnless(ed25519_available() or os.environ.get("LEDGER_CI") == "1",
                     "cryptography is not importable: receipts cannot be verified (LEDGER_CI=1 fails instead)")
class ReceiptCorpus(unittest.TestCase):
    """testdata/conformance/receipt.json (docs/conformance.md section 5)."""

    def test_corpus(self):
        cases = _corpus.load("receipt")
        if cases is None:
            self.skipTest("testdata/conformance/receipt.json not there")
        failures = []
        for case in cases:
            key = VerifierKey.parse(case["verifier_key"])
            entry = _corpus.b64(case["entry_base64"])
            kw = {}
            if "checkpoint_base64" in case:
                inc = case["inclusion"]
                kw = {"checkpoint": _corpus.b64(case["checkpoint_base64"]), "index": inc["index"],
                      "tree_size": inc["tree_size"], "hashes": [_corpus.b64(h) for h in (inc["hashes_base64"] or [])]}
            try:
                verify_receipt(entry, key, **kw)
                got = {"valid": True}
            except ReceiptError as e:
                got = {"valid": False, "check": e.check}
            if got != case["expect"]:
                failures.append(f"{case['name']}: got {got}, want {case['expect']}")
        print(f"\nreceipt.json: {len(cases)} cases, {len(failures)} disagreements", file=sys.stderr)
        self.assertEqual(failures, [], "\n".join(failures))


class WorkedExamples(unittest.TestCase):
    """docs/entry.md section 4: the hashes of the documentation's entries."""

    def test_hashes(self):
        for name, eh, lh in (
            ("example.json", "sha256:29668ab5932c5148fd0e12871b5704b56d71f6abb50dc90541172d5ab44e2811",
             "dcd3f071da724c55a0990817d7977c818595b9627382b33266324348235c0278"),
            ("example-v3-policy-set.json", "sha256:a42b1ac213dc646bd3b72f1f531b984d6fe3e329c8e84f645c35aacb3a497089",
             "4e2b9d7fe01c0be2fc8c5824a7e2edfebad2b49057b829ad609b464c0bf8281c"),
            ("example-v3-decision.json", "sha256:fc6c885dca0cb30097c9e04860b703f08478a880dc806fece3762f715e471217",
             "924984f13d2cf56b83a8396a0813447f825c42c70d0c42dd1fad4e5741daffc6"),
        ):
            with self.subTest(name):
                b = _read("entry", name)
                self.assertEqual(entry_hash(b), eh)
                self.assertEqual(leaf_hash(b).hex(), lh)
                if ed25519_available():
                    verify_entry(b, VerifierKey.parse(EXAMPLE_VKEY))

    def test_refusals(self):
        b = _read("entry", "example.json")
        for bad, field in ((b.replace(b'"version":1', b'"version":9'), "version"),
                           (b.replace(b'"index":0', b'"index":0,"extra":1'), ""),
                           (b.replace(b'"decision":"needs_approval"', b'"decision":"maybe"'), "decision"),
                           (b.replace(b'"principal":"agent:accounts-7"', b'"principal":"agent\\u001b[31m"'), "principal"),
                           (b + b" ", "")):
            with self.subTest(field):
                with self.assertRaises(ReceiptError) as cm:
                    parse_entry(bad)
                self.assertEqual(cm.exception.check, "encoding")


if __name__ == "__main__":
    unittest.main()
