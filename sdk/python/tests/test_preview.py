import unittest

import _paths  # noqa: F401
from decisionledger.preview import render


class GoRegexpFolding(unittest.TestCase):
    """Cases where Go's RE2 and Python's re read the same pattern
    differently; the expected previews are what approval/preview.Render
    gives (checked with a Go driver, 2026-12-02)."""

    def test_case_folded_classes_take_long_s(self):
        # Under (?i), RE2's [A-Za-z] also holds U+017F (it folds to s):
        # the Bearer token runs on through "Baſic".
        p = render('{"h":"Bearer abcdefghijklmnop1234Baſic x"}'.encode())
        self.assertEqual(p.json.decode(), '{"h":"Bearer [REDACTED] x"}')
        self.assertEqual(p.redacted, 1)

    def test_case_folded_literal_takes_long_s(self):
        # "basic" under (?i) matches "baſic"; the hint needs an ASCII
        # "basic" somewhere in the string.
        p = render('{"h":"x baſic dXNlcjpwYXNz basic"}'.encode())
        self.assertEqual(p.json.decode(), '{"h":"x baſic [REDACTED] basic"}')

    def test_basic_credential_with_long_s_is_not_base64(self):
        # The class lets U+017F in; Go's base64 decoder then refuses the
        # credential, so nothing is redacted (and nothing raises).
        p = render('{"h":"Basic dXNlcjpwYXNzſ x"}'.encode())
        self.assertEqual(p.json.decode(), '{"h":"Basic dXNlcjpwYXNzſ x"}')
        self.assertEqual(p.redacted, 0)

    def test_names_fold_with_simple_case_mapping(self):
        # unicode.ToLower maps U+0130 to "i": "prİvatekey" folds to a
        # sensitive name.
        p = render('{"prİvatekey":"v","i":"İ"}'.encode())
        self.assertEqual(p.json.decode(), '{"i":"İ","prİvatekey":"[REDACTED]"}')
        self.assertEqual(p.digest, "sha256:85e92e0593b0b901d0981cd219a35a65173db6402499fdc692646d06d318301a")

    def test_documentation_example(self):
        p = render(b'{"to": "alice@example.com", "amount_minor": 1250, "password": "hunter2"}')
        self.assertEqual(p.digest, "sha256:b72aba324b0bdf5c752fa3dd5edf0a729ecef2cc48413ee47bd3f61e13c28a81")


if __name__ == "__main__":
    unittest.main()
