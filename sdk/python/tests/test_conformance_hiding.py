"""testdata/conformance/hiding.json (docs/conformance.md section 5a): every
case, of every kind, with its exact expected result."""

import base64
import json
import sys
import time
import unittest

import _corpus
from decisionledger import canonical
from decisionledger.digest import Commitment, params_digest
from decisionledger.errors import DomainError
from decisionledger.hiding import Disclosure, DisclosureError, OpeningError, derived_openings, hide


class _CaseOpenings:
    """A commit case's fixed openings (field name -> 64 hex digits)."""

    def __init__(self, hexes):
        self.hexes = hexes

    def opening(self, field):
        return bytes.fromhex(self.hexes[field])


def _refusal(code, pointer="", key=False, field=""):
    return {"refusal": {"code": code, "pointer": pointer, "key": key, "field": field}}


def _expected(case):
    # The case's expect in full: a list or member the format lets be
    # absent (an empty list, key false, no field) written out.
    e = dict(case["expect"])
    if "refusal" in e:
        r = e["refusal"]
        return _refusal(r["code"], r["pointer"], r.get("key", False), r.get("field", ""))
    if case["kind"] == "commit":
        e.setdefault("commitments", {})
    elif case["kind"] == "disclose":
        e.setdefault("disclosed", [])
        e.setdefault("hidden", [])
    return e


def _result(case):
    kind = case["kind"]
    if kind == "commit":
        raw = _corpus.b64(case["params_base64"])
        try:
            c, x = hide(raw, _CaseOpenings(case.get("openings", {})))
        except DomainError as e:
            # The refusal version 1 gives the same input, exactly.
            try:
                params_digest(raw)
                v1 = None
            except DomainError as e1:
                v1 = (e1.kind, e1.pointer, e1.key, e1.offset, str(e1))
            if v1 != (e.kind, e.pointer, e.key, e.offset, str(e)):
                return {"differs from version 1": repr(v1)}
            return _refusal(e.kind, e.pointer, e.key)
        file = x.serialize()
        fields = json.loads(file)["fields"]
        return {"digest": c.digest, "size": c.size,
                "commitments": {name: f["commitment"] for name, f in fields.items()},
                "disclosure_base64": base64.b64encode(file).decode()}
    if kind == "derive":
        try:
            src = derived_openings(bytes.fromhex(case["secret_hex"]), case.get("call_key", ""))
        except OpeningError as e:
            return _refusal(e.code)
        return {"opening": bytes(src.opening(case["field"])).hex()}
    if kind == "disclose":
        try:
            x = Disclosure.parse(_corpus.b64(case["disclosure_base64"]))
            x.check(Commitment.parse(case["params_digest"], case["params_size"]))
        except DisclosureError as e:
            return _refusal(e.code, e.pointer, field=e.field)
        got = {"disclosed": x.disclosed(), "hidden": x.hidden()}
        p = x.params()
        if p is not None:
            got["params_base64"] = base64.b64encode(p).decode()
        return got
    return {"unknown kind": kind}


class HidingCorpus(unittest.TestCase):
    def run_corpus(self, label):
        cases = _corpus.load("hiding")
        self.assertIsNotNone(cases, "testdata/conformance/hiding.json is missing")
        failures, counts = [], {}
        start = time.perf_counter()
        for case in cases:
            counts[case["kind"]] = counts.get(case["kind"], 0) + 1
            got, want = _result(case), _expected(case)
            if got != want:
                failures.append(f"{case['name']}: got {got!r:.300}, want {want!r:.300}")
        ms = (time.perf_counter() - start) * 1000
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        print(f"\nhiding.json ({label}): {len(cases)} cases ({kinds}), {len(failures)} disagreements, {ms:.1f} ms",
              file=sys.stderr)
        self.assertEqual(failures, [], "\n".join(failures))
        self.assertEqual(set(counts), {"commit", "derive", "disclose"})
        return cases

    def test_corpus(self):
        self.run_corpus("fast path")

    def test_corpus_reference_tokenizer(self):
        saved = canonical._FAST
        canonical._FAST = False
        try:
            self.run_corpus("reference tokenizer")
        finally:
            canonical._FAST = saved

    def test_commit_cases_open(self):
        # Each commit case's disclosure file reads back byte for byte and
        # opens the case's commitment, with an opening for every field.
        for case in _corpus.load("hiding"):
            if case["kind"] != "commit" or "refusal" in case["expect"]:
                continue
            e = case["expect"]
            file = _corpus.b64(e["disclosure_base64"])
            x = Disclosure.parse(file)
            self.assertEqual(x.serialize(), file, case["name"])
            x.check(Commitment.parse(e["digest"], e["size"]))
            self.assertEqual(sorted(e.get("commitments", {})), sorted(case.get("openings", {})), case["name"])
            self.assertEqual(x.hidden(), [], case["name"])


if __name__ == "__main__":
    unittest.main()
