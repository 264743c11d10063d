import json
import os
import unittest

import _paths
from decisionledger.declare import Declaration, DeclarationError, tiers_digest

DECLS = os.path.join(_paths.TESTDATA, "declarations")


def _corpus_file(name):
    with open(os.path.join(DECLS, name), "rb") as f:
        return f.read().decode("utf-8")


PAYEES = {"payees": {"DE89370400440532013000"}}
VENDORS = {"vendors": {"DE89370400440532013000"}}

# commit/declare's TestProjectionVectors, literal for literal: one field
# "f" per case; "refused: X" wants a refusal at /f whose problem holds X.
PROJECTION_VECTORS = [
    ('domain lower-cased', '{"type":"string","tier":"derived","projections":["recipient_domain"]}', '"Bob.Smith@Mail.Example.ORG"', None, '{"f":{"recipient_domain":"mail.example.org"}}'),
    ("local part is anything without '@'", '{"type":"string","tier":"derived","projections":["recipient_domain"]}', '"a b+c@example.com"', None, '{"f":{"recipient_domain":"example.com"}}'),
    ('A-label kept as written', '{"type":"string","tier":"derived","projections":["recipient_domain"]}', '"bob@xn--bcher-kva.example"', None, '{"f":{"recipient_domain":"xn--bcher-kva.example"}}'),
    ('U-label refused, not mapped', '{"type":"string","tier":"derived","projections":["recipient_domain"]}', '"bob@bücher.example"', None, 'refused: not ASCII letters'),
    ('Kelvin sign is not NFC', '{"type":"string","tier":"derived","projections":["recipient_domain"]}', '"bob@\\u212Aexample.com"', None, 'refused: not_nfc'),
    ('dotted-quad passes as labels', '{"type":"string","tier":"derived","projections":["recipient_domain"]}', '"bob@192.0.2.1"', None, '{"f":{"recipient_domain":"192.0.2.1"}}'),
    ('address literal', '{"type":"string","tier":"derived","projections":["recipient_domain"]}', '"bob@[192.0.2.1]"', None, 'refused: not ASCII letters'),
    ("no '@'", '{"type":"string","tier":"derived","projections":["recipient_domain"]}', '"bob.example.com"', None, 'refused: not an email address'),
    ('empty local part', '{"type":"string","tier":"derived","projections":["recipient_domain"]}', '"@example.com"', None, 'refused: not an email address'),
    ("quoted '@' in the local part", '{"type":"string","tier":"derived","projections":["recipient_domain"]}', '"\\"a@b\\"@example.com"', None, 'refused: not an email address'),
    ('trailing dot', '{"type":"string","tier":"derived","projections":["recipient_domain"]}', '"bob@example.com."', None, 'refused: not ASCII letters'),
    ('one label', '{"type":"string","tier":"derived","projections":["recipient_domain"]}', '"bob@localhost"', None, 'refused: not ASCII letters'),
    ('underscore', '{"type":"string","tier":"derived","projections":["recipient_domain"]}', '"bob@mail_1.example.com"', None, 'refused: not ASCII letters'),
    ('everything but the host dropped', '{"type":"string","tier":"derived","projections":["endpoint_host"]}', '"HTTPS://user:pw@API.Example.COM:8443/v1/x?q=1#f"', None, '{"f":{"endpoint_host":"api.example.com"}}'),
    ('empty port', '{"type":"string","tier":"derived","projections":["endpoint_host"]}', '"https://api.example.com:/x"', None, '{"f":{"endpoint_host":"api.example.com"}}'),
    ('IPv4 literal passes as labels', '{"type":"string","tier":"derived","projections":["endpoint_host"]}', '"https://192.0.2.1/x"', None, '{"f":{"endpoint_host":"192.0.2.1"}}'),
    ('IPv6 literal', '{"type":"string","tier":"derived","projections":["endpoint_host"]}', '"https://[2001:db8::1]:8443/x"', None, 'refused: not a DNS name'),
    ('IDN host', '{"type":"string","tier":"derived","projections":["endpoint_host"]}', '"https://bücher.example/"', None, 'refused: not a DNS name'),
    ('trailing dot', '{"type":"string","tier":"derived","projections":["endpoint_host"]}', '"https://api.example.com./x"', None, 'refused: not a DNS name'),
    ('scheme-relative', '{"type":"string","tier":"derived","projections":["endpoint_host"]}', '"//api.example.com/x"', None, 'refused: not an absolute http or https URL'),
    ('opaque', '{"type":"string","tier":"derived","projections":["endpoint_host"]}', '"http:api.example.com"', None, 'refused: not an absolute http or https URL'),
    ('another scheme', '{"type":"string","tier":"derived","projections":["endpoint_host"]}', '"ftp://files.example.com/x"', None, 'refused: not an absolute http or https URL'),
    ('bad port', '{"type":"string","tier":"derived","projections":["endpoint_host"]}', '"https://api.example.com:https/x"', None, 'refused: not an absolute http or https URL'),
    ('empty path is not /', '{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/","/v1/invoices/{id}"]}', '"https://api.example.com"', None, '{"f":{"route_shape":"unmatched"}}'),
    ('root', '{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/","/v1/invoices/{id}"]}', '"https://api.example.com/?q=1"', None, '{"f":{"route_shape":"/"}}'),
    ('encoded slash is one segment', '{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/","/v1/invoices/{id}"]}', '"https://api.example.com/v1/invoices/a%2Fb"', None, '{"f":{"route_shape":"/v1/invoices/{id}"}}'),
    ('dot segments are not resolved', '{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/","/v1/invoices/{id}"]}', '"https://api.example.com/v1/invoices/.."', None, '{"f":{"route_shape":"/v1/invoices/{id}"}}'),
    ('trailing slash', '{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/","/v1/invoices/{id}"]}', '"https://api.example.com/v1/invoices/7/"', None, '{"f":{"route_shape":"unmatched"}}'),
    ('literals are case-sensitive', '{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/","/v1/invoices/{id}"]}', '"https://api.example.com/V1/invoices/7"', None, '{"f":{"route_shape":"unmatched"}}'),
    ('the host is not checked', '{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/","/v1/invoices/{id}"]}', '"https://[2001:db8::1]/v1/invoices/7"', None, '{"f":{"route_shape":"/v1/invoices/{id}"}}'),
    ('bad escape', '{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/","/v1/invoices/{id}"]}', '"https://api.example.com/v1/invoices/%zz"', None, 'refused: not an absolute http or https URL'),
    ('bad escape in the fragment', '{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/","/v1/invoices/{id}"]}', '"https://api.example.com/v1/invoices/7#%zz"', None, 'refused: not an absolute http or https URL'),
    ('the query is not checked', '{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/","/v1/invoices/{id}"]}', '"https://api.example.com/v1/invoices/7?q=%zz"', None, '{"f":{"route_shape":"/v1/invoices/{id}"}}'),
    ('a space in the path', '{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/","/v1/invoices/{id}"]}', '"https://api.example.com/v1/invoices/a b"', None, '{"f":{"route_shape":"/v1/invoices/{id}"}}'),
    ('first match wins', '{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/v1/{kind}/7","/v1/invoices/{id}"]}', '"https://api.example.com/v1/invoices/7"', None, '{"f":{"route_shape":"/v1/{kind}/7"}}'),
    ('a non-ASCII literal never matches', '{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/café"]}', '"https://api.example.com/café"', None, '{"f":{"route_shape":"unmatched"}}'),
    ('relative path', '{"type":"string","tier":"derived","projections":["resource_dir"]}', '"records/2026/x.json"', None, '{"f":{"resource_dir":"/records/2026"}}'),
    ('no directory', '{"type":"string","tier":"derived","projections":["resource_dir"]}', '"x.json"', None, '{"f":{"resource_dir":"/"}}'),
    ('kept verbatim', '{"type":"string","tier":"derived","projections":["resource_dir"]}', '"/Records 2026/é/%2e%2e/x"', None, '{"f":{"resource_dir":"/Records 2026/é/%2e%2e"}}'),
    ('root alone', '{"type":"string","tier":"derived","projections":["resource_dir"]}', '"/"', None, 'refused: empty or dot segment'),
    ('trailing slash', '{"type":"string","tier":"derived","projections":["resource_dir"]}', '"/records/2026/"', None, 'refused: empty or dot segment'),
    ('dot segment', '{"type":"string","tier":"derived","projections":["resource_dir"]}', '"/records/../x"', None, 'refused: empty or dot segment'),
    ('backslash', '{"type":"string","tier":"derived","projections":["resource_dir"]}', '"C:\\\\records\\\\x"', None, 'refused: not a slash-separated path'),
    ('listed', '{"type":"string","tier":"derived","projections":["payee_known"],"allowlist":"payees","optional":true}', '"DE89370400440532013000"', PAYEES, '{"f":{"payee_known":true}}'),
    ('compared byte for byte', '{"type":"string","tier":"derived","projections":["payee_known"],"allowlist":"payees","optional":true}', '"de89370400440532013000"', PAYEES, '{"f":{"payee_known":false}}'),
    ('no list', '{"type":"string","tier":"derived","projections":["payee_known"],"allowlist":"payees","optional":true}', '"DE89370400440532013000"', None, '{"f":{"payee_known":false}}'),
    ('another list', '{"type":"string","tier":"derived","projections":["payee_known"],"allowlist":"payees","optional":true}', '"DE89370400440532013000"', VENDORS, '{"f":{"payee_known":false}}'),
    ('not a string', '{"type":"string","tier":"derived","projections":["payee_known"],"allowlist":"payees","optional":true}', '42', PAYEES, 'refused: not a string'),
    ('UTF-8 bytes of the decoded string', '{"type":"string","tier":"derived","projections":["byte_size"],"optional":true}', '"\\u00e9t\\u00e9"', None, '{"f":{"byte_size":5}}'),
    ('empty string', '{"type":"string","tier":"derived","projections":["byte_size"],"optional":true}', '""', None, '{"f":{"byte_size":0}}'),
    ('empty list', '{"type":"string_list","tier":"derived","projections":["count"],"optional":true}', '[]', None, '{"f":{"count":0}}'),
    ('absent optional field', '{"type":"string","tier":"derived","projections":["payee_known"],"allowlist":"payees","optional":true}', '', PAYEES, '{}'),
    ('null is not absent', '{"type":"string","tier":"derived","projections":["byte_size"],"optional":true}', 'null', None, 'refused: not a string'),
    ('null list', '{"type":"string_list","tier":"derived","projections":["count"],"optional":true}', 'null', None, 'refused: not a string_list'),
    ('integer with a fraction', '{"type":"integer","tier":"policy"}', '1.0', None, 'refused: without fraction or exponent'),
    ('integer with an exponent', '{"type":"integer","tier":"policy"}', '1e3', None, 'refused: without fraction or exponent'),
    ('minus zero', '{"type":"integer","tier":"policy"}', '-0', None, '{"f":0}'),
    ('beyond 2^53-1', '{"type":"integer","tier":"policy"}', '9007199254740992', None, 'refused: integer_range'),
]

HTTP_REQUEST = _corpus_file("http_request.json")

# commit/declare's TestDefinitionDigestVectors (docs/declarations.md §4).
DEFINITION_VECTORS = [
    ("absent optional members",
     '{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"policy"}}}',
     '{"action":"a","declaration":1,"description":"","fields":{"x":{"allowlist":"","description":"","optional":false,"projections":[],"routes":[],"tier":"policy","type":"string"}}}',
     "sha256:4bc0a9249a1f5ccebfb08ae4064fa50e4cdc2ee665966ed3fe68e8bef526d067"),
    ("optional members null",
     '{"declaration":1,"action":"a","description":null,"fields":{"x":{"type":"string","tier":"policy","projections":null,"optional":null,"routes":null,"allowlist":null,"description":null}}}',
     '{"action":"a","declaration":1,"description":"","fields":{"x":{"allowlist":"","description":"","optional":false,"projections":[],"routes":[],"tier":"policy","type":"string"}}}',
     "sha256:4bc0a9249a1f5ccebfb08ae4064fa50e4cdc2ee665966ed3fe68e8bef526d067"),
    ("corpus http_request", HTTP_REQUEST,
     '{"action":"http_request","declaration":1,"description":"An agent calls an HTTP API.","fields":{"body":{"allowlist":"","description":"","optional":true,"projections":["byte_size"],"routes":[],"tier":"derived","type":"string"},"method":{"allowlist":"","description":"","optional":false,"projections":[],"routes":[],"tier":"policy","type":"string"},"url":{"allowlist":"","description":"The request URL; the mediator sees the host and the matched route.","optional":false,"projections":["endpoint_host","route_shape"],"routes":["/v1/invoices","/v1/invoices/{id}","/v1/customers/{id}/orders"],"tier":"derived","type":"string"}}}',
     "sha256:f547c157d3687e3d3ed6e53d70715bf1db6168ee050c0dbbf4a12f3707cfb2b7"),
    ("routes in another order: another definition",
     HTTP_REQUEST.replace('["/v1/invoices", "/v1/invoices/{id}", "/v1/customers/{id}/orders"]', '["/v1/customers/{id}/orders", "/v1/invoices/{id}", "/v1/invoices"]', 1),
     None, "sha256:5273b7a9747c833582e756a0250851126e15b47faaa6847f34d4a6ba5f129ba0"),
    ("corpus make_payment", _corpus_file("make_payment.json"), None,
     "sha256:abeb9e18b9fcb2a17ae3c6444b6c2a52f647b36764cd51bd43f9f8ca78c24d37"),
    ("a tool's unreviewed draft",
     '{"declaration":1,"action":"fs.edit_file","reviewed":false,"tool":{"server":"fs","name":"edit_file","definition_digest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},"fields":{"path":{"type":"string","tier":"payload"},"edits":{"type":"json","tier":"payload"},"dryRun":{"type":"boolean","tier":"payload","optional":true}}}',
     '{"action":"fs.edit_file","declaration":1,"description":"","fields":{"dryRun":{"allowlist":"","description":"","optional":true,"projections":[],"routes":[],"tier":"payload","type":"boolean"},"edits":{"allowlist":"","description":"","optional":false,"projections":[],"routes":[],"tier":"payload","type":"json"},"path":{"allowlist":"","description":"","optional":false,"projections":[],"routes":[],"tier":"payload","type":"string"}},"reviewed":false,"tool":{"definition_digest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","name":"edit_file","server":"fs"}}',
     "sha256:ecbe58f9ceddaeaabb7d1614dc9b540873806a0fdbeb22e820bb5211e6791748"),
    ("the same draft reviewed",
     '{"declaration":1,"action":"fs.edit_file","tool":{"server":"fs","name":"edit_file","definition_digest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},"fields":{"path":{"type":"string","tier":"payload"},"edits":{"type":"json","tier":"payload"},"dryRun":{"type":"boolean","tier":"payload","optional":true}}}',
     None, "sha256:d6f70e9aedeaed4964ab6f37032a05f9e3ac09f0b642611af2873a54688d1289"),
    ("a tool without arguments",
     '{"declaration":1,"action":"fs.list_allowed_directories","tool":{"server":"fs","name":"list_allowed_directories","definition_digest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},"fields":{}}',
     '{"action":"fs.list_allowed_directories","declaration":1,"description":"","fields":{},"tool":{"definition_digest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","name":"list_allowed_directories","server":"fs"}}',
     "sha256:91dfd5f24fd92849941d441b2838c67588a710b008ff1c35eca792682bfc0488"),
]


class Projections(unittest.TestCase):
    def test_vectors(self):
        self.assertEqual(len(PROJECTION_VECTORS), 58)
        for name, field, value, lists, want in PROJECTION_VECTORS:
            with self.subTest(name):
                d = Declaration.parse(('{"declaration":1,"action":"t","fields":{"f":' + field + "}}").encode())
                params = "{}" if value == "" else '{"f":' + value + "}"
                if want.startswith("refused: "):
                    with self.assertRaises(DeclarationError) as cm:
                        d.minimize(params.encode(), allowlists=lists)
                    self.assertEqual(cm.exception.pointer, "/f")
                    problem = want[len("refused: "):]
                    self.assertIn(problem, cm.exception.problem)
                    if value.startswith('"') and len(value) > 8:
                        self.assertNotIn(value[1:-1], str(cm.exception))
                else:
                    r = d.minimize(params.encode(), allowlists=lists)
                    self.assertEqual(r.attributes.decode(), want)

    def test_dotted_capital_i_lowers_as_go_does(self):
        # Go's strings.ToLower maps U+0130 to "i" (simple case mapping);
        # Python's str.lower would give "i" and a combining dot.
        d = Declaration.parse(b'{"declaration":1,"action":"t","fields":{"f":{"type":"string","tier":"derived","projections":["recipient_domain"]}}}')
        self.assertEqual(d.minimize('{"f":"bob@\u0130.example"}'.encode()).attributes, b'{"f":{"recipient_domain":"i.example"}}')


class Definitions(unittest.TestCase):
    def test_vectors(self):
        for name, decl, canonical, digest in DEFINITION_VECTORS:
            with self.subTest(name):
                d = Declaration.parse(decl.encode())
                if canonical is not None:
                    self.assertEqual(d.canonical().decode(), canonical)
                self.assertEqual(d.definition_digest(), digest)

    def test_refusals(self):
        for decl, ptr in (
            (b'{"declaration":1.0,"action":"a","fields":{"x":{"type":"string","tier":"policy"}}}', ""),
            (b'{"declaration":2,"action":"a","fields":{"x":{"type":"string","tier":"policy"}}}', "/declaration"),
            (b'{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"policy"}},"extra":1}', ""),
            (b'{"declaration":1,"action":"a","reviewed":null,"fields":{"x":{"type":"string","tier":"policy"}}}', "/reviewed"),
            (b'{"declaration":1,"action":"a","fields":{"x":{"type":"json","tier":"policy"}}}', "/fields/x/tier"),
            (b'{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"derived","projections":["count"]}}}', "/fields/x/projections/0"),
            (b'{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"policy"},"x":{}}}', "/fields/x"),
            (b'{"declaration":1,"action":"a","fields":{}}', "/fields"),
        ):
            with self.subTest(decl):
                with self.assertRaises(DeclarationError) as cm:
                    Declaration.parse(decl)
                self.assertEqual((cm.exception.code, cm.exception.pointer), ("declaration_invalid", ptr))

    def test_members_match_without_case_as_go_does(self):
        d = Declaration.parse(b'{"Declaration":1,"ACTION":"a","fields":{"x":{"Type":"string","tier":"policy"}}}')
        self.assertEqual(d.action, "a")

    def test_a_later_member_wins_in_the_order_written(self):
        # encoding/json matches "Action" to action and lets the later
        # member win, in document order (not canonical order, where
        # "Action" sorts first). Results checked with Go, 2026-12-02.
        with self.assertRaises(DeclarationError) as cm:
            Declaration.parse(b'{"declaration":1,"action":"a","Action":"","fields":{"x":{"type":"string","tier":"policy"}}}')
        self.assertEqual((cm.exception.code, cm.exception.pointer), ("declaration_invalid", "/action"))
        d = Declaration.parse(b'{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"policy","TYPE":"integer"}}}')
        with self.assertRaises(DeclarationError) as cm:
            d.minimize(b'{"x":"v"}')
        self.assertEqual((cm.exception.code, cm.exception.pointer), ("field_type", "/x"))


class Tiers(unittest.TestCase):
    def test_corpus_actions(self):
        # The tier table of each corpus action, recomputed from the table
        # alone, equals the declaration's.
        for name in sorted(os.listdir(DECLS)):
            with self.subTest(name):
                d = Declaration.parse(_corpus_file(name).encode())
                t = d.tier_table()
                self.assertEqual(tiers_digest(t["action"], [(f["name"], f["tier"], f["projections"]) for f in t["fields"]]),
                                 d.tiers_digest())

    def test_retiering_keeps_params_digest(self):
        a = Declaration.parse(b'{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"policy"}}}')
        b = Declaration.parse(b'{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"payload"}}}')
        ra, rb = a.minimize(b'{"x":"v"}'), b.minimize(b'{"x":"v"}')
        self.assertEqual(ra.params, rb.params)
        self.assertNotEqual(ra.tiers_digest, rb.tiers_digest)
        self.assertEqual((ra.attributes, rb.attributes), (b'{"x":"v"}', b"{}"))

    def test_undeclared_fault_names_no_member(self):
        a = Declaration.parse(b'{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"policy"}}}')
        with self.assertRaises(DeclarationError) as cm:
            a.minimize(b'{"x":"v","secret-name":{"k":1.5}}')
        self.assertEqual((cm.exception.code, cm.exception.pointer), ("domain:non_integer", "(an undeclared field)"))
        self.assertNotIn("secret", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
