import json
import sys
import unittest

import _corpus
from decisionledger.declare import Declaration, DeclarationError
from decisionledger.preview import PreviewInputError, render


def _report(kind, n, failures):
    print(f"\n{kind}.json: {n} cases, {len(failures)} disagreements", file=sys.stderr)


class MinimizeCorpus(unittest.TestCase):
    """testdata/conformance/minimize.json (docs/conformance.md section 3)."""

    def test_corpus(self):
        cases = _corpus.load("minimize")
        if cases is None:
            self.skipTest("testdata/conformance/minimize.json not there")
        failures = []
        for case in cases:
            want = case["expect"]
            try:
                d = Declaration.parse(json.dumps(case["declaration"]).encode())
                lists = case.get("allowlists")
                r = d.minimize(_corpus.b64(case["params_base64"]), allowlists=lists)
                got = {"params_digest": r.params.digest, "params_size": r.params.size,
                       "attributes": r.attributes, "tiers_digest": r.tiers_digest,
                       "definition_digest": r.definition_digest}
            except DeclarationError as e:
                got = {"refusal": {"code": e.code, "pointer": e.pointer}}
            if "refusal" in want:
                exp = {"refusal": {"code": want["refusal"]["code"], "pointer": want["refusal"]["pointer"]}}
            else:
                exp = dict(want)
                exp["attributes"] = _corpus.b64(exp.pop("attributes_base64"))
            if got != exp:
                failures.append(f"{case['name']}: got {got!r:.300}, want {exp!r:.300}")
        _report("minimize", len(cases), failures)
        self.assertEqual(failures, [], "\n".join(failures))


class PreviewCorpus(unittest.TestCase):
    """testdata/conformance/preview.json (docs/conformance.md section 4)."""

    def test_corpus(self):
        cases = _corpus.load("preview")
        if cases is None:
            self.skipTest("testdata/conformance/preview.json not there")
        failures = []
        for case in cases:
            want = case["expect"]
            try:
                p = render(_corpus.b64(case["document_base64"]))
                got = {"preview": p.json, "digest": p.digest, "truncated": p.truncated, "pass": p.passes,
                       "redacted": p.redacted}
            except PreviewInputError as e:
                got = {"refusal": {"code": e.code, "pointer": e.pointer, "key": e.key}}
            if "refusal" in want:
                r = want["refusal"]
                exp = {"refusal": {"code": r["code"], "pointer": r["pointer"], "key": r.get("key", False)}}
            else:
                exp = {"preview": _corpus.b64(want["preview_base64"]), "digest": want["digest"],
                       "truncated": want["truncated"], "pass": want["pass"], "redacted": want.get("redacted", got.get("redacted"))}
            if got != exp:
                failures.append(f"{case['name']}: got {got!r:.300}, want {exp!r:.300}")
        _report("preview", len(cases), failures)
        self.assertEqual(failures, [], "\n".join(failures))


if __name__ == "__main__":
    unittest.main()
