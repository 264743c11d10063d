"""The frozen list of code points whose normalization depends on the
Unicode version (docs/commitment.md section 2.4)."""

import json
import os
import unicodedata
import unittest

import _paths  # noqa: F401
from decisionledger.canonical import canonicalize_value, parse
from decisionledger.digest import params_digest
from decisionledger.errors import DomainError
from decisionledger.unicode import UNICODE_VERSION_FROZEN, has_unstable_normalization

with open(os.path.join(_paths.TESTDATA, "conformance", "unicode", "unstable.json"), encoding="utf-8") as f:
    LIST = json.load(f)
LISTED = [int(c["code_point"], 16) for c in LIST["code_points"]]


def _version(v):
    return tuple(int(x) for x in v.split("."))


class UnicodeVersionTest(unittest.TestCase):
    def test_not_newer_than_frozen(self):
        self.assertLessEqual(
            _version(unicodedata.unidata_version), _version(UNICODE_VERSION_FROZEN),
            f"unicodedata has Unicode {unicodedata.unidata_version}, newer than the {UNICODE_VERSION_FROZEN} the list "
            "of unstable normalization (docs/commitment.md section 2.4) is frozen at: extend the list first "
            "(testdata/conformance/unicode/gen.mjs), in every implementation")

    def test_not_older_than_14(self):
        self.assertGreaterEqual(_version(unicodedata.unidata_version), (14, 0, 0),
                                "the list covers what Unicode 14.0 and later assign")


class FrozenListTest(unittest.TestCase):
    def test_table_is_the_list(self):
        self.assertEqual(LIST["unicode"], "17.0")
        self.assertEqual(LIST["count"], len(LISTED))
        want = set(LISTED)
        wrong = [hex(cp) for cp in range(0x110000)
                 if not 0xD800 <= cp <= 0xDFFF and has_unstable_normalization(chr(cp)) != (cp in want)]
        self.assertEqual(wrong, [])

    def test_list_unknown_to_unicodedata(self):
        # The list is of code points this Unicode version does not assign
        # (on 14.0), or, if it does, finds not inert.
        for cp in LISTED:
            c = chr(cp)
            if unicodedata.category(c) == "Cn":
                self.assertEqual((unicodedata.combining(c), unicodedata.decomposition(c)), (0, ""), hex(cp))
            else:
                self.assertTrue(unicodedata.combining(c) or unicodedata.decomposition(c)
                                or unicodedata.normalize("NFD", c) != c, hex(cp))

    def test_refused_before_nfc(self):
        for cp in LISTED:
            c = chr(cp)
            for doc, ptr, key in (({"s": "a" + c}, "/s", False), ({"o": {c: 1}}, "/o", True),
                                  ({"l": ["e\u0301" + c]}, "/l/0", False)):
                for text in (json.dumps(doc, ensure_ascii=False), json.dumps(doc)):
                    with self.assertRaises(DomainError, msg=f"U+{cp:04X} {text}") as cm:
                        params_digest(text.encode("utf-8"))
                    self.assertEqual((cm.exception.kind, cm.exception.pointer, cm.exception.key),
                                     ("unstable_normalization", ptr, key))
                with self.assertRaises(DomainError) as cm:
                    canonicalize_value(doc)
                self.assertEqual((cm.exception.kind, cm.exception.pointer), ("unstable_normalization", ptr))
                with self.assertRaises(DomainError) as cm:
                    parse(json.dumps(doc).encode(), normalize_nfc=True)
                self.assertEqual(cm.exception.kind, "unstable_normalization")
        self.assertEqual(params_digest(b'{"s":"a\\u0898\\u1ac1"}').size, 15)


if __name__ == "__main__":
    unittest.main()
