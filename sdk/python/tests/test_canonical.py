import json
import os
import struct
import random
import unittest

import _paths  # noqa: F401
from decisionledger import canonical
from decisionledger.canonical import Domain, canonicalize, canonicalize_value, number_to_json, parse
from decisionledger.digest import params_digest, params_digest_value, parse_digest, MalformedDigestError
from decisionledger.errors import DomainError

RFC8785 = os.path.join(_paths.TESTDATA, "rfc8785")


def _read(*parts):
    with open(os.path.join(*parts), "rb") as f:
        return f.read()


def _lenient(v):
    # The RFC's reference vectors fall partly outside the strict domain:
    # hold the writer to them on values read by Python's json module.
    if isinstance(v, dict):
        return canonical._sorted_dict({k: _lenient(x) for k, x in v.items()})
    if isinstance(v, list):
        return [_lenient(x) for x in v]
    if isinstance(v, float) and v == int(v) and abs(v) < 2**53:
        return int(v)
    return v


class RFC8785Vectors(unittest.TestCase):
    def test_writer_matches_every_vector(self):
        names = sorted(os.listdir(os.path.join(RFC8785, "input")))
        self.assertEqual(len(names), 6)
        for name in names:
            with self.subTest(name):
                got = canonical.serialize(_lenient(json.loads(_read(RFC8785, "input", name))))
                self.assertEqual(got, _read(RFC8785, "output", name))

    def test_strict_domain_on_the_vectors(self):
        # docs/commitment.md section 5.
        for name in ("arrays.json", "french.json", "structures.json"):
            with self.subTest(name):
                self.assertEqual(canonicalize(_read(RFC8785, "input", name)), _read(RFC8785, "output", name))
        for name, domain, kind in (
            ("unicode.json", Domain(), "not_nfc"),
            ("weird.json", Domain(), "not_nfc"),
            ("values.json", Domain(), "non_integer"),
            ("values.json", Domain(allow_non_integer=True), "inexact_number"),
        ):
            with self.subTest(name, kind=kind):
                with self.assertRaises(DomainError) as cm:
                    canonicalize(_read(RFC8785, "input", name), domain)
                self.assertEqual(cm.exception.kind, kind)


class NumberToJSON(unittest.TestCase):
    # Expected strings are ECMAScript's String(x), checked with node.
    CASES = [
        (0.0, "0"), (-0.0, "0"), (1.0, "1"), (-1.5, "-1.5"), (0.1 + 0.2, "0.30000000000000004"),
        (1e21, "1e+21"), (1e20, "100000000000000000000"), (123456789012345680000.0, "123456789012345680000"),
        (1e-6, "0.000001"), (1e-7, "1e-7"), (1.5e-7, "1.5e-7"), (123e-20, "1.23e-18"),
        (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e+308"),
        (333333333.33333329, "333333333.3333333"), (1e30, "1e+30"), (4.5, "4.5"), (2e-3, "0.002"),
        (1e-27, "1e-27"), (9007199254740992.0, "9007199254740992"), (295147905179352830000.0, "295147905179352830000"),
        (0.000001234, "0.000001234"), (1.234e-7, "1.234e-7"), (1e16, "10000000000000000"), (2**-1074 * 3, "1.5e-323"),
    ]

    def test_table(self):
        for f, want in self.CASES:
            with self.subTest(repr(f)):
                self.assertEqual(number_to_json(f), want)

    def test_round_trip_random_doubles(self):
        rnd = random.Random(8785)
        for _ in range(20000):
            f = struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0]
            if f != f or f in (float("inf"), float("-inf")):
                continue
            s = number_to_json(f)
            self.assertEqual(float(s), f if f != 0 else 0.0, s)

    def test_non_finite_refused(self):
        for f in (float("nan"), float("inf"), float("-inf")):
            with self.assertRaises(ValueError):
                number_to_json(f)


class Strict(unittest.TestCase):
    def refused(self, data, kind, ptr, domain=Domain(), key=False):
        with self.assertRaises(DomainError) as cm:
            params_digest(data, domain)
        self.assertEqual((cm.exception.kind, cm.exception.pointer, cm.exception.key), (kind, ptr, key), data)
        return cm.exception

    def test_worked_example(self):
        c = params_digest(_read(_paths.TESTDATA, "commit", "example-payment.json"))
        self.assertEqual(c.digest, "sha256:e19d67a48f4991a8c6d703eadcc9b39f8cc56e0e1fb9bbdd667daf2ad2f2d0a8")
        self.assertEqual(c.size, 146)

    def test_refusals_never_carry_values(self):
        e = self.refused(b'{"secret-name":{"x":"top secret\xff"}}', "invalid_utf8", "/secret-name/x")
        self.assertNotIn("top secret", str(e))

    def test_duplicates_and_order(self):
        self.refused(b'{"b":1,"a":2,"b":3,"a":4}', "duplicate_key", "/a")
        self.refused(b'{"a":{"x":1,"x":2},"b":tru}', "duplicate_key", "/a/x")
        self.refused(b'{"a":1,"a":2,"b":tru}', "syntax", "/b")
        self.refused(b'{"\\u00e9":1,"\xc3\xa9":2}', "duplicate_key", "/\u00e9")

    def test_surrogates(self):
        self.assertEqual(parse(b'"\\ud83d\\ude02"'), "\U0001F602")
        self.refused(b'{"a":"\\ud83d"}', "lone_surrogate", "/a")
        self.refused(b'{"a":"\\ude02\\ud83d"}', "lone_surrogate", "/a")
        self.refused(b'{"a":"\\ud83d\\u0041"}', "lone_surrogate", "/a")
        self.refused(b'{"a":"\\ud83d\\u00"}', "syntax", "/a")

    def test_python_values(self):
        self.assertEqual(canonicalize_value({"b": [1, 2.0, True, None], "a": "x"}), b'{"a":"x","b":[1,2,true,null]}')
        self.assertEqual(params_digest_value({"a": 1, "b": 2}).digest, params_digest(b'{"b":2,"a":1}').digest)
        for v, kind, ptr in (
            ({"a": 2**53}, "integer_range", "/a"),
            ({"a": 0.5}, "non_integer", "/a"),
            ({"a": float("nan")}, "non_finite", "/a"),
            ({"a": [b"x"]}, "unsupported_type", "/a/0"),
            ({"a": "e\u0301"}, "not_nfc", "/a"),
            ({"a": "\ud800"}, "lone_surrogate", "/a"),
            ([1], "not_object", ""),
        ):
            with self.subTest(kind):
                with self.assertRaises(DomainError) as cm:
                    params_digest_value(v)
                self.assertEqual((cm.exception.kind, cm.exception.pointer), (kind, ptr))
        self.assertEqual(canonicalize_value({"a": 0.25}, Domain(allow_non_integer=True)), b'{"a":0.25}')

    def test_parse_digest(self):
        d = "sha256:" + "ab" * 32
        self.assertEqual(parse_digest(d), bytes([0xAB]) * 32)
        for bad in ("sha256:" + "AB" * 32, "SHA256:" + "ab" * 32, d + " ", d[:-1], "sha512:" + "ab" * 32):
            with self.assertRaises(MalformedDigestError):
                parse_digest(bad)

    def test_nfc_normalization_on_purpose(self):
        self.assertEqual(parse(b'{"s":"e\\u0301"}', normalize_nfc=True), {"s": "\u00e9"})
        with self.assertRaises(DomainError) as cm:
            parse(b'{"e\\u0301":1,"\\u00e9":2}', normalize_nfc=True)
        self.assertEqual(cm.exception.kind, "duplicate_key")


def _go_unquote(s):
    """Bytes of a Go-quoted string literal (the corpus's "q" lines)."""
    assert s[0] == '"' and s[-1] == '"', s
    s = s[1:-1]
    out = bytearray()
    i = 0
    simple = {"n": 10, "t": 9, "r": 13, "\\": 92, '"': 34, "'": 39, "a": 7, "b": 8, "f": 12, "v": 11}
    while i < len(s):
        c = s[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        e = s[i + 1]
        if e in simple:
            out.append(simple[e])
            i += 2
        elif e == "x":
            out.append(int(s[i + 2:i + 4], 16))
            i += 4
        elif e == "u":
            out += chr(int(s[i + 2:i + 6], 16)).encode("utf-8")
            i += 6
        elif e == "U":
            out += chr(int(s[i + 2:i + 10], 16)).encode("utf-8")
            i += 10
        elif e in "01234567":
            out.append(int(s[i + 1:i + 4], 8))
            i += 4
        else:
            raise ValueError("bad Go escape " + e)
    return bytes(out)


class EquivalenceCorpus(unittest.TestCase):
    """testdata/commit/equivalence.txt, the Go suite's corpus (its header
    explains the format)."""

    def test_corpus(self):
        text = _read(_paths.TESTDATA, "commit", "equivalence.txt").decode("utf-8")
        rows, row = [], []
        for line in text.split("\n"):
            if line.startswith("#"):
                continue
            if line == "":
                if row:
                    rows.append(row)
                row = []
                continue
            row.append(line)
        if row:
            rows.append(row)
        counts = {"same": 0, "differ": 0, "refuse": 0}
        for row in rows:
            header, inputs = row[0], [(_go_unquote(x[2:]) if x.startswith("q ") else x.encode("utf-8")) for x in row[1:]]
            words = header.split(" ")
            verb, name = words[0], words[1]
            with self.subTest(name):
                rest = words[2:]
                if verb == "refuse":
                    kind, rest = rest[0], rest[1:]
                    ptr_lit = rest[0]
                    # Pointers are Go-quoted and may hold spaces; take the literal.
                    j = 1
                    while not (ptr_lit.endswith('"') and len(ptr_lit) >= 2):
                        ptr_lit += " " + rest[j]
                        j += 1
                    ptr, rest = _go_unquote(ptr_lit).decode("utf-8"), rest[j:]
                    key = "key" in rest
                    domain = self._domain(rest)
                    self.assertEqual(len(inputs), 1)
                    with self.assertRaises(DomainError) as cm:
                        params_digest(inputs[0], domain)
                    self.assertEqual((cm.exception.kind, cm.exception.pointer, cm.exception.key), (kind, ptr, key))
                else:
                    domain = self._domain(rest)
                    digests = [params_digest(x, domain).digest for x in inputs]
                    if verb == "same":
                        self.assertEqual(len(set(digests)), 1, digests)
                        for w in rest:
                            if w.startswith("sha256:"):
                                self.assertEqual(digests[0], w)
                    else:
                        self.assertEqual(len(digests), 2)
                        self.assertNotEqual(digests[0], digests[1])
                counts[verb] += 1
        self.assertGreater(sum(counts.values()), 80)
        print(f"\nequivalence.txt: {counts}")

    @staticmethod
    def _domain(opts):
        kw = {}
        for o in opts:
            if o == "allow_non_integer":
                kw["allow_non_integer"] = True
            elif o.startswith("max_depth="):
                kw["max_depth"] = int(o.split("=")[1])
            elif o.startswith("max_bytes="):
                kw["max_bytes"] = int(o.split("=")[1])
        return Domain(**kw)


if __name__ == "__main__":
    unittest.main()
