"""The hiding commitment (version 2) beyond the corpus: unlinkability, every
subset of make_payment's fields, refusals naming the field, a disclosure
as an opening source, derived openings, the file's strict reader, and
redaction of every printed form."""

import hashlib
import io
import itertools
import logging
import os
import random
import stat
import tempfile
import unittest

import _corpus
import _paths
from decisionledger import canonical
from decisionledger.canonical import Domain, canonicalize
from decisionledger.digest import Commitment, MalformedDigestError, params_digest
from decisionledger.errors import DomainError
from decisionledger.hiding import Disclosure, DisclosureError, OpeningError, derived_openings, hkdf_sha256, hide

with open(os.path.join(_paths.TESTDATA, "calls", "make_payment.json"), "rb") as _f:
    PAYMENT = _f.read()
SECRETS = ("payee-0001", "payee-0002", "Invoice 4711", "42000")


class Fixed:
    def __init__(self, openings):
        self.openings = openings

    def opening(self, name):
        return self.openings[name]


def _edit(file: bytes, old: str, new: str) -> bytes:
    out = file.replace(old.encode(), new.encode(), 1)
    assert out != file, f"the edit {old!r} changes nothing"
    return out


def _commitments(x):
    import json
    return {n: f["commitment"] for n, f in json.loads(x.serialize())["fields"].items()}


class Hide(unittest.TestCase):
    def test_every_subset_opens(self):
        c, x = hide(PAYMENT)
        self.assertTrue(c.hiding)
        self.assertEqual(c.version, 2)
        self.assertRegex(c.digest, r"\Av2:sha256:[0-9a-f]{64}\Z")
        # The size is what the digest covers: four names and four 32-byte commitments.
        self.assertEqual(c.size, len('"amount_minor""currency""memo""payee"') + 4 * 32)
        self.assertEqual(c.size, len(c.canonical))
        self.assertEqual(x.params(), canonicalize(PAYMENT))
        names = x.fields()
        self.assertEqual(names, ["amount_minor", "currency", "memo", "payee"])
        n = 0
        for k in range(len(names) + 1):
            for subset in itertools.combinations(names, k):
                y = x.only(subset)
                y.check(c)
                self.assertEqual(y.disclosed(), list(subset))
                self.assertEqual(y.hidden(), [f for f in names if f not in subset])
                self.assertEqual(y.params() is not None, k == len(names))
                for f in names:
                    self.assertEqual(y.value(f), x.value(f) if f in subset else None)
                # Through the file and back, byte for byte.
                file = y.serialize()
                z = Disclosure.parse(file)
                z.check(c)
                z.check(Commitment.parse(c.digest, c.size))
                self.assertEqual(z.serialize(), file)
                self.assertEqual(z.disclosed(), list(subset))
                n += 1
        self.assertEqual(n, 16)

    def test_unlinkable(self):
        c1, x1 = hide(PAYMENT)
        c2, x2 = hide(PAYMENT)
        self.assertNotEqual(c1.digest, c2.digest)
        a, b = _commitments(x1), _commitments(x2)
        self.assertEqual(sorted(a), sorted(b))
        shared = set(a.values()) & set(b.values())
        self.assertEqual(shared, set(), "two calls with identical parameters share a field commitment")
        self.assertEqual(c1.size, c2.size, "the size depends only on the names")
        self.assertNotEqual(bytes(x1.opening("payee")), bytes(x2.opening("payee")))

    def test_field_commitment_by_hand(self):
        o = bytes(range(32))
        c, x = hide(b'{"b":[1,"x"],"a":null}', Fixed({"a": o, "b": o}))

        def field(rest):
            return hashlib.sha256(b"ledger/v2/field\n" + o + rest).digest()

        ca, cb = field(b'"a"null'), field(b'"b"[1,"x"]')
        m = b'"a"' + ca + b'"b"' + cb
        self.assertEqual(c.digest, "v2:sha256:" + hashlib.sha256(b"ledger/v2/params\n" + m).hexdigest())
        self.assertEqual(c.size, len(m))
        self.assertEqual(_commitments(x), {"a": ca.hex(), "b": cb.hex()})

    def test_refuses_as_version_1(self):
        # Every refusal of the digest corpus, and a few more, exactly as
        # params_digest gives it (kind, pointer, key flag, offset, message).
        inputs = [(b"[]", False), (b'{"a":1,"a":2}', False), (b'{"a":1e400}', False), (b'{"a":"e\\u0301"}', False),
                  (b'{"a":"\xff"}', False), (b'{"a":9007199254740992}', False), (b'{"a":1.5}', False), (b"{", False),
                  (b"  7", False)]
        inputs += [(_corpus.b64(c["input_base64"]), c.get("allow_non_integer", False))
                   for c in _corpus.load("digest") if "refusal" in c["expect"]]
        for data, allow in inputs:
            d = Domain(allow_non_integer=allow)
            with self.assertRaises(DomainError) as v1:
                params_digest(data, d)
            with self.assertRaises(DomainError) as v2:
                hide(data, domain=d)
            e1, e2 = v1.exception, v2.exception
            self.assertEqual((e1.kind, e1.pointer, e1.key, e1.offset, str(e1)),
                             (e2.kind, e2.pointer, e2.key, e2.offset, str(e2)), data[:80])

    def test_empty(self):
        c, x = hide(b"{}")
        self.assertEqual(c.size, 0)  # nothing covered
        self.assertEqual(x.params(), b"{}")
        x.check(c)

    def test_allow_non_integer(self):
        d = Domain(allow_non_integer=True)
        c, x = hide(b'{"r":2.50e-1}', domain=d)
        self.assertEqual(x.value("r"), b"0.25")
        with self.assertRaises(DisclosureError) as cm:
            Disclosure.parse(x.serialize())
        self.assertEqual((cm.exception.code, cm.exception.pointer), ("malformed", "/fields/r/value"))
        Disclosure.parse(x.serialize(), d).check(c)


class Refusals(unittest.TestCase):
    """A changed value or opening, a pair taken from another call and a
    replaced commitment are refused, naming the field where one is at
    fault, and no message holds a value or an opening."""

    def setUp(self):
        self.c, self.x = hide(PAYMENT)
        _, self.other = hide(PAYMENT)
        self.file = self.x.serialize()
        self.payee_opening = bytes(self.x.opening("payee")).hex()
        self.other_opening = bytes(self.other.opening("payee")).hex()

    def verdict(self, file, c=None):
        try:
            Disclosure.parse(file).check(c or self.c)
        except DisclosureError as e:
            for s in SECRETS + (self.payee_opening, self.other_opening):
                self.assertNotIn(s, str(e))
                self.assertNotIn(s, repr(e))
            return e.code, e.field
        return "ok", ""

    def test_refusals(self):
        oc = _commitments(self.other)["payee"]
        pc = _commitments(self.x)["payee"]
        flipped = ("1" if self.payee_opening[0] == "0" else "0") + self.payee_opening[1:]
        moved = _edit(self.file, pc, oc)
        moved = _edit(moved, self.payee_opening, self.other_opening)
        # The payee's commitment and opening from another call, the file's
        # own digest made to match, as a forger would.
        import json
        doc = json.loads(moved)
        m = b"".join(f'"{n}"'.encode() + bytes.fromhex(doc["fields"][n]["commitment"]) for n in sorted(doc["fields"]))
        forged = _edit(moved, self.c.digest,
                       "v2:sha256:" + hashlib.sha256(b"ledger/v2/params\n" + m).hexdigest())
        for name, file, c, want in (
            ("changed value", _edit(self.file, '"value":"payee-0001"', '"value":"payee-0002"'), None,
             ("field_mismatch", "payee")),
            ("changed opening", _edit(self.file, self.payee_opening, flipped), None, ("field_mismatch", "payee")),
            ("opening of another call", _edit(self.file, self.payee_opening, self.other_opening), None,
             ("field_mismatch", "payee")),
            ("changed amount", _edit(self.file, '"value":42000', '"value":42001'), None,
             ("field_mismatch", "amount_minor")),
            ("field of another call", forged, None, ("commitment_mismatch", "")),
            ("another entry", self.other.serialize(), None, ("commitment_mismatch", "")),
            ("version 1 entry", self.file, Commitment.parse("sha256:" + self.c.digest[10:], self.c.size),
             ("not_hiding", "")),
            ("another size", self.file, Commitment.parse(self.c.digest, self.c.size + 1), ("commitment_mismatch", "")),
            ("the same", self.file, None, ("ok", "")),
        ):
            with self.subTest(name):
                self.assertEqual(self.verdict(file, c), want)

    def test_a_hidden_field_needs_no_opening(self):
        y = self.x.only(["currency"])
        file = y.serialize()
        self.assertNotIn(b"payee-0001", file)
        self.assertNotIn(self.payee_opening.encode(), file)
        self.assertEqual(self.verdict(file), ("ok", ""))

    def test_only_refuses_a_field_not_disclosed(self):
        y = self.x.only(["currency"])
        for names in (["payee"], ["nope"]):
            with self.assertRaises(DisclosureError) as cm:
                y.only(names)
            self.assertEqual((cm.exception.code, cm.exception.field), ("field_not_opened", names[0]))
        with self.assertRaises(TypeError):
            self.x.only("payee")


class AsOpeningSource(unittest.TestCase):
    def test_retry_commits_identically_iff_equal(self):
        c, x = hide(PAYMENT)
        again, _ = hide(b'{"currency":"EUR","memo":"Invoice 4711","amount_minor":42000,"payee":"payee-0001"}', x)
        self.assertEqual(again, c)
        again, _ = hide(b'{"currency":"EUR","memo":"Invoice 4711","amount_minor":4.2e4,"payee":"payee-0001"}', x)
        self.assertEqual(again.digest, c.digest, "the same value spelled otherwise")
        self.assertTrue(again.matches(c.digest, c.size))
        changed, _ = hide(PAYMENT.replace(b"42000", b"42001"), x)
        self.assertNotEqual(changed.digest, c.digest)
        fewer, _ = hide(b'{"currency":"EUR","memo":"Invoice 4711","amount_minor":42000}', x)
        self.assertNotEqual(fewer.digest, c.digest)
        with self.assertRaises(DisclosureError) as cm:
            hide(b'{"payee":"payee-0001","extra":1}', x)
        self.assertEqual((cm.exception.code, cm.exception.field), ("field_not_opened", "extra"))
        # A partial disclosure opens only what it discloses.
        with self.assertRaises(DisclosureError) as cm:
            hide(PAYMENT, x.only(["payee"]))
        self.assertEqual((cm.exception.code, cm.exception.field), ("field_not_opened", "amount_minor"))

    def test_source_giving_no_opening(self):
        for bad in (b"short", "0" * 64, 7, None):
            with self.assertRaises(TypeError):
                hide(b'{"a":1}', Fixed({"a": bad}))


class Derived(unittest.TestCase):
    def test_rfc5869_sha256_vectors(self):
        # RFC 5869 appendix A, test cases 1 to 3.
        self.assertEqual(hkdf_sha256(b"\x0b" * 22, bytes(range(13)), bytes(range(0xF0, 0xFA)), 42).hex(),
                         "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
        self.assertEqual(hkdf_sha256(bytes(range(0x50)), bytes(range(0x60, 0xB0)), bytes(range(0xB0, 0x100)), 82).hex(),
                         "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c"
                         "59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71"
                         "cc30c58179ec3e87c14c01d5c1f3434f1d87")
        self.assertEqual(hkdf_sha256(b"\x0b" * 22, b"", b"", 42).hex(),
                         "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")

    def test_against_cryptography(self):
        try:
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF
        except ImportError:
            self.skipTest("cryptography is not importable")
        rnd = random.Random(5869)
        for _ in range(200):
            ikm, salt, info = (rnd.randbytes(rnd.randrange(0, 100)) for _ in range(3))
            n = rnd.randrange(1, 200)
            self.assertEqual(hkdf_sha256(ikm, salt, info, n), HKDF(hashes.SHA256(), n, salt, info).derive(ikm))

    def test_a_function_of_secret_key_and_field(self):
        secret = b"\x07" * 32
        a, b = derived_openings(secret, "call-1"), derived_openings(bytearray(secret), "call-1")
        ca, _ = hide(PAYMENT, a)
        cb, _ = hide(PAYMENT, b)
        self.assertEqual(ca, cb)
        for src in (derived_openings(secret, "call-2"), derived_openings(b"\x08" * 32, "call-1"),
                    derived_openings(secret + b"\x00", "call-1")):
            self.assertNotEqual(hide(PAYMENT, src)[0].digest, ca.digest)
        self.assertNotEqual(a.opening("payee"), a.opening("memo"))
        self.assertEqual(a.opening("payee"), b.opening("payee"))
        # The info is JCS(call_key) || JCS(name), written out.
        want = hkdf_sha256(secret, b"ledger/v2/opening\n", b'"call-1""payee"', 32)
        self.assertEqual(bytes(a.opening("payee")), want)

    def test_refusals(self):
        with self.assertRaises(OpeningError) as cm:
            derived_openings(b"\x07" * 31, "k")
        self.assertEqual(cm.exception.code, "short_secret")
        with self.assertRaises(OpeningError) as cm:
            derived_openings(b"\x07" * 31, "")
        self.assertEqual(cm.exception.code, "short_secret", "the secret is judged first, as in Go")
        with self.assertRaises(OpeningError) as cm:
            derived_openings(b"\x07" * 32, "")
        self.assertEqual(cm.exception.code, "empty_call_key")
        with self.assertRaises(DomainError) as cm:
            derived_openings(b"\x07" * 32, "e\u0301")
        self.assertEqual(cm.exception.kind, "not_nfc")
        with self.assertRaises(DomainError) as cm:
            derived_openings(b"\x07" * 32, "k").opening("\ud800")
        self.assertEqual((cm.exception.kind, cm.exception.key), ("lone_surrogate", True))
        with self.assertRaises(TypeError):
            derived_openings("0" * 64, "k")


class ParseFile(unittest.TestCase):
    """The file's strict reader: each malformed form refused with the
    pointer of its fault."""

    def setUp(self):
        self.c, self.x = hide(b'{"a":1,"b/~":"two"}', Fixed({"a": b"\xab" * 32, "b/~": b"\x02" * 32}))
        self.file = self.x.serialize().decode()

    def test_canonical_form_by_hand(self):
        ca = hashlib.sha256(b'ledger/v2/field\n' + b"\xab" * 32 + b'"a"1').hexdigest()
        cb = hashlib.sha256(b'ledger/v2/field\n' + b"\x02" * 32 + b'"b/~""two"').hexdigest()
        self.assertEqual(self.file,
                         '{"disclosure":2,"fields":{"a":{"commitment":"%s","opening":"%s","value":1},'
                         '"b/~":{"commitment":"%s","opening":"%s","value":"two"}},'
                         '"params_digest":"%s","params_size":%d}' % (ca, "ab" * 32, cb, "02" * 32, self.c.digest,
                                                                     self.c.size))

    def test_refusals(self):
        good = self.file
        oa = "ab" * 32
        for name, old, new, ptr in (
            ("unknown member", '{"disclosure":2', '{"disclosure":2,"x":1', ""),
            ("missing member", ',"params_size":%d' % self.c.size, "", ""),
            ("format 1", '"disclosure":2', '"disclosure":1', "/disclosure"),
            ("format as a string", '"disclosure":2', '"disclosure":"2"', "/disclosure"),
            ("format true", '"disclosure":2', '"disclosure":true', "/disclosure"),
            ("fields not an object", '"fields":{', '"fields":[{', "/fields"),
            ("digest not a string", '"params_digest":"%s"' % self.c.digest, '"params_digest":7', "/params_digest"),
            ("size not an integer", '"params_size":', '"params_size":"', "/params_size"),
            ("a field not an object", '"a":{"commitment"', '"a":[],"x":{"commitment"', "/fields/a"),
            ("unknown field member", '"value":1}', '"value":1,"salt":"x"}', "/fields/a"),
            ("no commitment", '"a":{"commitment":', '"a":{"c":', "/fields/a"),
            ("upper-case commitment", '"a":{"commitment":"', '"a":{"commitment":"A', "/fields/a/commitment"),
            ("short commitment", '"a":{"commitment":"', '"a":{"commitment":"0', "/fields/a/commitment"),
            ("opening without value", ',"value":1', "", "/fields/a"),
            ("value without opening", '"opening":"%s",' % oa, "", "/fields/a"),
            ("upper-case opening", '"opening":"%s"' % oa, '"opening":"%s"' % oa.upper(), "/fields/a/opening"),
            ("short opening", '"opening":"%s"' % oa, '"opening":"%s"' % oa[2:], "/fields/a/opening"),
            ("escaped name pointer", '"opening":"%s"' % ("02" * 32), '"opening":"x"', "/fields/b~1~0/opening"),
            ("version 1 digest", '"v2:sha256:', '"sha256:', "/params_digest"),
            ("upper-case digest", '"v2:sha256:', '"V2:sha256:', "/params_digest"),
            ("size off by one", '"params_size":%d' % self.c.size, '"params_size":%d' % (self.c.size + 1),
             "/params_digest"),
            ("duplicate member", '"disclosure":2', '"disclosure":2,"disclosure":2', "/disclosure"),
            ("value outside the domain", '"value":1', '"value":1.5', "/fields/a/value"),
            ("not nfc", '"value":"two"', '"value":"e\\u0301"', "/fields/b~1~0/value"),
            ("not an object", '{"disclosure"', '[{"disclosure"', ""),
        ):
            with self.subTest(name):
                bad = good.replace(old, new, 1)
                if name == "not an object":
                    bad += "]"
                self.assertNotEqual(bad, good)
                with self.assertRaises(DisclosureError) as cm:
                    Disclosure.parse(bad.encode())
                self.assertEqual((cm.exception.code, cm.exception.pointer), ("malformed", ptr), str(cm.exception))

    def test_accepted_forms(self):
        # Any spacing and order; integers spelled otherwise, as Go reads them.
        spaced = self.file.replace(',"', ' ,\n\t"').replace('{"disclosure":2', '{"disclosure": 2.0')
        spaced = spaced.replace('"params_size":%d' % self.c.size, '"params_size":%de0' % self.c.size)
        y = Disclosure.parse(spaced.encode())
        self.assertEqual(y.serialize().decode(), self.file)
        y = Disclosure.parse(self.file.replace('"value":1}', '"value":1.0e0}').encode())
        self.assertEqual(y.serialize().decode(), self.file)

    def test_limits_follow_the_domain(self):
        deep = b'{"a":' + b"[" * 63 + b"]" * 63 + b"}"  # depth 64, the default limit
        c, x = hide(deep)
        Disclosure.parse(x.serialize()).check(c)
        with self.assertRaises(DisclosureError) as cm:
            Disclosure.parse(x.serialize(), Domain(max_depth=63))
        self.assertEqual(cm.exception.cause.kind, "too_deep")
        big = b'{"a":"' + b"x" * 1000 + b'"}'
        c, x = hide(big, domain=Domain(max_bytes=1100))
        Disclosure.parse(x.serialize(), Domain(max_bytes=1)).check(c)  # 4 x 1 + 65536 bytes
        with self.assertRaises(DisclosureError) as cm:
            Disclosure.parse(b" " * (4 * 1024 + 65537), Domain(max_bytes=1024))
        self.assertEqual((cm.exception.code, cm.exception.pointer, cm.exception.cause.kind),
                         ("malformed", "", "too_large"))

    def test_mutations_refused_or_round_trip(self):
        # Seeded byte mutations of real files: a DisclosureError, or a
        # disclosure whose canonical file reads back to itself.
        _, x = hide(PAYMENT)
        files = [x.serialize(), x.only(["memo"]).serialize(), self.file.encode()]
        rnd = random.Random(72)
        alphabet = b'{}[]":,0123456789abcdefv \\u'
        for path_fast in (True, False):
            saved = canonical._FAST
            canonical._FAST = path_fast
            try:
                for _ in range(1500):
                    b = bytearray(rnd.choice(files))
                    for _ in range(rnd.randrange(1, 4)):
                        i = rnd.randrange(len(b))
                        op = rnd.randrange(3)
                        if op == 0:
                            b[i] = rnd.choice(alphabet)
                        elif op == 1:
                            del b[i]
                        else:
                            b.insert(i, rnd.choice(alphabet))
                    try:
                        y = Disclosure.parse(bytes(b))
                    except DisclosureError:
                        continue
                    out = y.serialize()
                    self.assertEqual(Disclosure.parse(out).serialize(), out)
            finally:
                canonical._FAST = saved


class Commitments(unittest.TestCase):
    def test_parse_both_versions(self):
        v1 = Commitment.parse("sha256:" + "a" * 64, 13)
        v2 = Commitment.parse("v2:sha256:" + "a" * 64, 13)
        self.assertEqual((v1.hiding, v1.version, v2.hiding, v2.version), (False, 1, True, 2))
        self.assertFalse(v1.matches(v2.digest, 13), "version 1 and 2 digests of the same hex differ")
        self.assertTrue(v2.matches("v2:sha256:" + "a" * 64, 13))
        self.assertFalse(v2.matches(v2.digest, 14))
        for bad in ("v2:sha256:" + "A" * 64, "v3:sha256:" + "a" * 64, "v2:" + "a" * 64, "v2:sha256:" + "a" * 63,
                    " sha256:" + "a" * 64, "v2:v2:sha256:" + "a" * 64, 7):
            with self.assertRaises(MalformedDigestError):
                Commitment.parse(bad, 13)
        for size in (-1, True, 1.0, "13"):
            with self.assertRaises(MalformedDigestError):
                Commitment.parse(v2.digest, size)


class Redacted(unittest.TestCase):
    """Openings and values stay out of every printed and logged form."""

    def test_printed_forms(self):
        _, x = hide(PAYMENT)
        o = x.opening("memo")
        opening_hex = bytes(o).hex()
        src = derived_openings(b"\x07" * 32, "call-0001")
        stream = io.StringIO()
        log = logging.getLogger("decisionledger.test.redaction")
        handler = logging.StreamHandler(stream)
        log.addHandler(handler)
        log.propagate = False
        try:
            log.warning("disclosure %s %r opening %s %r source %r", x, x, o, o, src)
        finally:
            log.removeHandler(handler)
        forms = [str(x), repr(x), f"{x}", f"{x!r}", str(o), repr(o), f"{o}", repr(src), str(src), stream.getvalue(),
                 repr(x.only(["memo"])), repr([x, o])]
        for s in forms:
            for secret in SECRETS + (opening_hex, "07" * 32, repr(b"\x07" * 32)):
                self.assertNotIn(secret, s)
        self.assertEqual(repr(x), "Disclosure(4 fields, 4 disclosed)")
        self.assertEqual(repr(o), "Opening(redacted)")
        self.assertFalse(hasattr(x, "__dict__"))
        with self.assertRaises(TypeError):
            Disclosure()


class WriteFile(unittest.TestCase):
    def test_mode_0600_and_never_replaced(self):
        _, x = hide(PAYMENT)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "op-17.json")
            x.write(path)
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
            with open(path, "rb") as f:
                self.assertEqual(f.read(), x.serialize())
            with self.assertRaises(FileExistsError):
                x.only([]).write(path)
            with open(path, "rb") as f:
                self.assertEqual(f.read(), x.serialize())
            os.remove(path)  # erasure


if __name__ == "__main__":
    unittest.main()
