import sys
import unittest

import _corpus
from decisionledger import Domain, DomainError, params_digest


class DigestCorpus(unittest.TestCase):
    """testdata/conformance/digest.json: every case, digest, size and
    canonical bytes, or the refusal's code, pointer and key flag."""

    def test_corpus(self):
        cases = _corpus.load("digest")
        if cases is None:
            self.skipTest("testdata/conformance/digest.json not there")
        failures = []
        for case in cases:
            domain = Domain(allow_non_integer=case.get("allow_non_integer", False))
            data = _corpus.b64(case["input_base64"])
            want = case["expect"]
            try:
                c = params_digest(data, domain)
                got = {"digest": c.digest, "size": c.size, "canonical": c.canonical}
            except DomainError as e:
                got = {"refusal": {"code": e.kind, "pointer": e.pointer, "key": e.key}}
            if "refusal" in want:
                r = want["refusal"]
                exp = {"refusal": {"code": r["code"], "pointer": r["pointer"], "key": r.get("key", False)}}
            else:
                exp = {"digest": want["digest"], "size": want["size"], "canonical": _corpus.b64(want["canonical_base64"])}
            if got != exp:
                failures.append(f"{case['name']}: got {got!r:.200}, want {exp!r:.200}")
        print(f"\ndigest.json: {len(cases)} cases, {len(failures)} disagreements", file=sys.stderr)
        self.assertEqual(failures, [], "\n".join(failures))


if __name__ == "__main__":
    unittest.main()
