package declare

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Vectors for docs/declarations.md §2 and §4, as hand-written literals:
// what a second implementation must reproduce from the document alone.
// The definition digests were computed outside Go, with
//
//	printf 'ledger/v1/action\n%s' "$CANONICAL" | sha256sum
//
// over the canonical literal of each case.

// The action definition digest writes every member out: an absent
// optional member (or one that is null) enters with its default, so these
// spellings are one definition; projections are sorted, routes keep their
// declared order (the first match wins, so order is meaning).
func TestDefinitionDigestVectors(t *testing.T) {
	corpusFile := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "declarations", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	httpRequest := corpusFile("http_request.json")
	for _, c := range []struct {
		name, decl, canonical, digest string
	}{
		{
			name:      "absent optional members",
			decl:      `{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"policy"}}}`,
			canonical: `{"action":"a","declaration":1,"description":"","fields":{"x":{"allowlist":"","description":"","optional":false,"projections":[],"routes":[],"tier":"policy","type":"string"}}}`,
			digest:    "sha256:4bc0a9249a1f5ccebfb08ae4064fa50e4cdc2ee665966ed3fe68e8bef526d067",
		},
		{
			name:      "optional members with their defaults",
			decl:      `{"declaration":1,"action":"a","description":"","fields":{"x":{"type":"string","tier":"policy","projections":[],"optional":false,"routes":[],"allowlist":"","description":""}}}`,
			canonical: `{"action":"a","declaration":1,"description":"","fields":{"x":{"allowlist":"","description":"","optional":false,"projections":[],"routes":[],"tier":"policy","type":"string"}}}`,
			digest:    "sha256:4bc0a9249a1f5ccebfb08ae4064fa50e4cdc2ee665966ed3fe68e8bef526d067",
		},
		{
			name:      "optional members null",
			decl:      `{"declaration":1,"action":"a","description":null,"fields":{"x":{"type":"string","tier":"policy","projections":null,"optional":null,"routes":null,"allowlist":null,"description":null}}}`,
			canonical: `{"action":"a","declaration":1,"description":"","fields":{"x":{"allowlist":"","description":"","optional":false,"projections":[],"routes":[],"tier":"policy","type":"string"}}}`,
			digest:    "sha256:4bc0a9249a1f5ccebfb08ae4064fa50e4cdc2ee665966ed3fe68e8bef526d067",
		},
		{
			name:      "minimal send_email",
			decl:      minimal,
			canonical: `{"action":"send_email","declaration":1,"description":"","fields":{"recipient":{"allowlist":"","description":"","optional":false,"projections":["recipient_domain"],"routes":[],"tier":"derived","type":"string"}}}`,
			digest:    "sha256:04770616065d45a9788ce5d62d7fa74ae8879d193b7c5840c2ab3656ba14b0be",
		},
		{
			name:      "corpus make_payment (allowlist)",
			decl:      corpusFile("make_payment.json"),
			canonical: `{"action":"make_payment","declaration":1,"description":"An agent pays an invoice.","fields":{"amount_minor":{"allowlist":"","description":"The amount in minor units (cents).","optional":false,"projections":[],"routes":[],"tier":"policy","type":"integer"},"currency":{"allowlist":"","description":"ISO 4217 code.","optional":false,"projections":[],"routes":[],"tier":"policy","type":"string"},"memo":{"allowlist":"","description":"Free text for the payee.","optional":true,"projections":[],"routes":[],"tier":"payload","type":"string"},"payee":{"allowlist":"payees","description":"The payee's account; the mediator sees whether it is on the allowlist.","optional":false,"projections":["payee_known"],"routes":[],"tier":"derived","type":"string"}}}`,
			digest:    "sha256:abeb9e18b9fcb2a17ae3c6444b6c2a52f647b36764cd51bd43f9f8ca78c24d37",
		},
		{
			name:      "corpus http_request (routes in declared order)",
			decl:      httpRequest,
			canonical: `{"action":"http_request","declaration":1,"description":"An agent calls an HTTP API.","fields":{"body":{"allowlist":"","description":"","optional":true,"projections":["byte_size"],"routes":[],"tier":"derived","type":"string"},"method":{"allowlist":"","description":"","optional":false,"projections":[],"routes":[],"tier":"policy","type":"string"},"url":{"allowlist":"","description":"The request URL; the mediator sees the host and the matched route.","optional":false,"projections":["endpoint_host","route_shape"],"routes":["/v1/invoices","/v1/invoices/{id}","/v1/customers/{id}/orders"],"tier":"derived","type":"string"}}}`,
			digest:    "sha256:f547c157d3687e3d3ed6e53d70715bf1db6168ee050c0dbbf4a12f3707cfb2b7",
		},
		{
			name:      "projections in another order: the same definition",
			decl:      strings.Replace(httpRequest, `["endpoint_host", "route_shape"]`, `["route_shape", "endpoint_host"]`, 1),
			canonical: `{"action":"http_request","declaration":1,"description":"An agent calls an HTTP API.","fields":{"body":{"allowlist":"","description":"","optional":true,"projections":["byte_size"],"routes":[],"tier":"derived","type":"string"},"method":{"allowlist":"","description":"","optional":false,"projections":[],"routes":[],"tier":"policy","type":"string"},"url":{"allowlist":"","description":"The request URL; the mediator sees the host and the matched route.","optional":false,"projections":["endpoint_host","route_shape"],"routes":["/v1/invoices","/v1/invoices/{id}","/v1/customers/{id}/orders"],"tier":"derived","type":"string"}}}`,
			digest:    "sha256:f547c157d3687e3d3ed6e53d70715bf1db6168ee050c0dbbf4a12f3707cfb2b7",
		},
		{
			name:      "routes in another order: another definition",
			decl:      strings.Replace(httpRequest, `["/v1/invoices", "/v1/invoices/{id}", "/v1/customers/{id}/orders"]`, `["/v1/customers/{id}/orders", "/v1/invoices/{id}", "/v1/invoices"]`, 1),
			canonical: `{"action":"http_request","declaration":1,"description":"An agent calls an HTTP API.","fields":{"body":{"allowlist":"","description":"","optional":true,"projections":["byte_size"],"routes":[],"tier":"derived","type":"string"},"method":{"allowlist":"","description":"","optional":false,"projections":[],"routes":[],"tier":"policy","type":"string"},"url":{"allowlist":"","description":"The request URL; the mediator sees the host and the matched route.","optional":false,"projections":["endpoint_host","route_shape"],"routes":["/v1/customers/{id}/orders","/v1/invoices/{id}","/v1/invoices"],"tier":"derived","type":"string"}}}`,
			digest:    "sha256:5273b7a9747c833582e756a0250851126e15b47faaa6847f34d4a6ba5f129ba0",
		},
		{
			// The tool pin and the review marker enter the hashed object
			// only when the file has them, so the vectors above keep
			// their digests.
			name:      "a tool's unreviewed draft (camelCase, json)",
			decl:      `{"declaration":1,"action":"fs.edit_file","reviewed":false,"tool":{"server":"fs","name":"edit_file","definition_digest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},"fields":{"path":{"type":"string","tier":"payload"},"edits":{"type":"json","tier":"payload"},"dryRun":{"type":"boolean","tier":"payload","optional":true}}}`,
			canonical: `{"action":"fs.edit_file","declaration":1,"description":"","fields":{"dryRun":{"allowlist":"","description":"","optional":true,"projections":[],"routes":[],"tier":"payload","type":"boolean"},"edits":{"allowlist":"","description":"","optional":false,"projections":[],"routes":[],"tier":"payload","type":"json"},"path":{"allowlist":"","description":"","optional":false,"projections":[],"routes":[],"tier":"payload","type":"string"}},"reviewed":false,"tool":{"definition_digest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","name":"edit_file","server":"fs"}}`,
			digest:    "sha256:ecbe58f9ceddaeaabb7d1614dc9b540873806a0fdbeb22e820bb5211e6791748",
		},
		{
			name:      "the same draft reviewed: another definition",
			decl:      `{"declaration":1,"action":"fs.edit_file","tool":{"server":"fs","name":"edit_file","definition_digest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},"fields":{"path":{"type":"string","tier":"payload"},"edits":{"type":"json","tier":"payload"},"dryRun":{"type":"boolean","tier":"payload","optional":true}}}`,
			canonical: `{"action":"fs.edit_file","declaration":1,"description":"","fields":{"dryRun":{"allowlist":"","description":"","optional":true,"projections":[],"routes":[],"tier":"payload","type":"boolean"},"edits":{"allowlist":"","description":"","optional":false,"projections":[],"routes":[],"tier":"payload","type":"json"},"path":{"allowlist":"","description":"","optional":false,"projections":[],"routes":[],"tier":"payload","type":"string"}},"tool":{"definition_digest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","name":"edit_file","server":"fs"}}`,
			digest:    "sha256:d6f70e9aedeaed4964ab6f37032a05f9e3ac09f0b642611af2873a54688d1289",
		},
		{
			name:      "a tool without arguments",
			decl:      `{"declaration":1,"action":"fs.list_allowed_directories","tool":{"server":"fs","name":"list_allowed_directories","definition_digest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},"fields":{}}`,
			canonical: `{"action":"fs.list_allowed_directories","declaration":1,"description":"","fields":{},"tool":{"definition_digest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","name":"list_allowed_directories","server":"fs"}}`,
			digest:    "sha256:91dfd5f24fd92849941d441b2838c67588a710b008ff1c35eca792682bfc0488",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := Parse([]byte(c.decl))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := d.Canonical(); err != nil || string(got) != c.canonical {
				t.Errorf("canonical = %s, %v\nwant %s", got, err, c.canonical)
			}
			if got, err := d.Digest(); err != nil || got.String() != c.digest {
				t.Errorf("digest = %v, %v; want %s", got, err, c.digest)
			}
		})
	}
}

// Each projection's edge rules, through Minimize, as the wire attributes
// (or the refusal) a call gives. One field "f" per case; "refused: X"
// wants an *Error at /f whose problem holds X.
func TestProjectionVectors(t *testing.T) {
	const (
		email = `{"type":"string","tier":"derived","projections":["recipient_domain"]}`
		host  = `{"type":"string","tier":"derived","projections":["endpoint_host"]}`
		route = `{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/","/v1/invoices/{id}"]}`
		dir   = `{"type":"string","tier":"derived","projections":["resource_dir"]}`
		payee = `{"type":"string","tier":"derived","projections":["payee_known"],"allowlist":"payees","optional":true}`
		size  = `{"type":"string","tier":"derived","projections":["byte_size"],"optional":true}`
		count = `{"type":"string_list","tier":"derived","projections":["count"],"optional":true}`
		num   = `{"type":"integer","tier":"policy"}`
	)
	allowlists := map[string]map[string]bool{"payees": {"DE89370400440532013000": true}}
	for _, c := range []struct {
		name, field, value string
		allowlists         map[string]map[string]bool
		want               string
	}{
		// recipient_domain: one '@', a non-empty local part, a domain of
		// two or more LDH labels, lower-cased; no IDNA processing.
		{"domain lower-cased", email, `"Bob.Smith@Mail.Example.ORG"`, nil, `{"f":{"recipient_domain":"mail.example.org"}}`},
		{"local part is anything without '@'", email, `"a b+c@example.com"`, nil, `{"f":{"recipient_domain":"example.com"}}`},
		{"A-label kept as written", email, `"bob@xn--bcher-kva.example"`, nil, `{"f":{"recipient_domain":"xn--bcher-kva.example"}}`},
		{"U-label refused, not mapped", email, `"bob@bücher.example"`, nil, "refused: not ASCII letters"},
		{"Kelvin sign is not NFC", email, `"bob@\u212Aexample.com"`, nil, "refused: not_nfc"},
		{"dotted-quad passes as labels", email, `"bob@192.0.2.1"`, nil, `{"f":{"recipient_domain":"192.0.2.1"}}`},
		{"address literal", email, `"bob@[192.0.2.1]"`, nil, "refused: not ASCII letters"},
		{"no '@'", email, `"bob.example.com"`, nil, "refused: not an email address"},
		{"empty local part", email, `"@example.com"`, nil, "refused: not an email address"},
		{"quoted '@' in the local part", email, `"\"a@b\"@example.com"`, nil, "refused: not an email address"},
		{"trailing dot", email, `"bob@example.com."`, nil, "refused: not ASCII letters"},
		{"one label", email, `"bob@localhost"`, nil, "refused: not ASCII letters"},
		{"underscore", email, `"bob@mail_1.example.com"`, nil, "refused: not ASCII letters"},

		// endpoint_host: scheme http or https (any case), a host; user
		// information, port, path, query and fragment dropped.
		{"everything but the host dropped", host, `"HTTPS://user:pw@API.Example.COM:8443/v1/x?q=1#f"`, nil, `{"f":{"endpoint_host":"api.example.com"}}`},
		{"empty port", host, `"https://api.example.com:/x"`, nil, `{"f":{"endpoint_host":"api.example.com"}}`},
		{"IPv4 literal passes as labels", host, `"https://192.0.2.1/x"`, nil, `{"f":{"endpoint_host":"192.0.2.1"}}`},
		{"IPv6 literal", host, `"https://[2001:db8::1]:8443/x"`, nil, "refused: not a DNS name"},
		{"IDN host", host, `"https://bücher.example/"`, nil, "refused: not a DNS name"},
		{"trailing dot", host, `"https://api.example.com./x"`, nil, "refused: not a DNS name"},
		{"scheme-relative", host, `"//api.example.com/x"`, nil, "refused: not an absolute http or https URL"},
		{"opaque", host, `"http:api.example.com"`, nil, "refused: not an absolute http or https URL"},
		{"another scheme", host, `"ftp://files.example.com/x"`, nil, "refused: not an absolute http or https URL"},
		{"bad port", host, `"https://api.example.com:https/x"`, nil, "refused: not an absolute http or https URL"},

		// route_shape: the escaped path against the templates in order.
		{"empty path is not /", route, `"https://api.example.com"`, nil, `{"f":{"route_shape":"unmatched"}}`},
		{"root", route, `"https://api.example.com/?q=1"`, nil, `{"f":{"route_shape":"/"}}`},
		{"encoded slash is one segment", route, `"https://api.example.com/v1/invoices/a%2Fb"`, nil, `{"f":{"route_shape":"/v1/invoices/{id}"}}`},
		{"dot segments are not resolved", route, `"https://api.example.com/v1/invoices/.."`, nil, `{"f":{"route_shape":"/v1/invoices/{id}"}}`},
		{"trailing slash", route, `"https://api.example.com/v1/invoices/7/"`, nil, `{"f":{"route_shape":"unmatched"}}`},
		{"literals are case-sensitive", route, `"https://api.example.com/V1/invoices/7"`, nil, `{"f":{"route_shape":"unmatched"}}`},
		{"the host is not checked", route, `"https://[2001:db8::1]/v1/invoices/7"`, nil, `{"f":{"route_shape":"/v1/invoices/{id}"}}`},
		{"bad escape", route, `"https://api.example.com/v1/invoices/%zz"`, nil, "refused: not an absolute http or https URL"},
		{"bad escape in the fragment", route, `"https://api.example.com/v1/invoices/7#%zz"`, nil, "refused: not an absolute http or https URL"},
		{"the query is not checked", route, `"https://api.example.com/v1/invoices/7?q=%zz"`, nil, `{"f":{"route_shape":"/v1/invoices/{id}"}}`},
		{"a space in the path", route, `"https://api.example.com/v1/invoices/a b"`, nil, `{"f":{"route_shape":"/v1/invoices/{id}"}}`},
		{"first match wins", `{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/v1/{kind}/7","/v1/invoices/{id}"]}`,
			`"https://api.example.com/v1/invoices/7"`, nil, `{"f":{"route_shape":"/v1/{kind}/7"}}`},
		{"a non-ASCII literal never matches", `{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/café"]}`,
			`"https://api.example.com/café"`, nil, `{"f":{"route_shape":"unmatched"}}`},

		// resource_dir: the last segment dropped, the rest kept verbatim.
		{"relative path", dir, `"records/2026/x.json"`, nil, `{"f":{"resource_dir":"/records/2026"}}`},
		{"no directory", dir, `"x.json"`, nil, `{"f":{"resource_dir":"/"}}`},
		{"kept verbatim", dir, `"/Records 2026/é/%2e%2e/x"`, nil, `{"f":{"resource_dir":"/Records 2026/é/%2e%2e"}}`},
		{"root alone", dir, `"/"`, nil, "refused: empty or dot segment"},
		{"trailing slash", dir, `"/records/2026/"`, nil, "refused: empty or dot segment"},
		{"dot segment", dir, `"/records/../x"`, nil, "refused: empty or dot segment"},
		{"backslash", dir, `"C:\\records\\x"`, nil, "refused: not a slash-separated path"},

		// payee_known: exact membership; never refuses a string.
		{"listed", payee, `"DE89370400440532013000"`, allowlists, `{"f":{"payee_known":true}}`},
		{"compared byte for byte", payee, `"de89370400440532013000"`, allowlists, `{"f":{"payee_known":false}}`},
		{"no list", payee, `"DE89370400440532013000"`, nil, `{"f":{"payee_known":false}}`},
		{"another list", payee, `"DE89370400440532013000"`, map[string]map[string]bool{"vendors": {"DE89370400440532013000": true}}, `{"f":{"payee_known":false}}`},
		{"not a string", payee, `42`, allowlists, "refused: not a string"},

		// byte_size and count.
		{"UTF-8 bytes of the decoded string", size, `"\u00e9t\u00e9"`, nil, `{"f":{"byte_size":5}}`},
		{"empty string", size, `""`, nil, `{"f":{"byte_size":0}}`},
		{"empty list", count, `[]`, nil, `{"f":{"count":0}}`},

		// Absent, null, and how integers must be written.
		{"absent optional field", payee, ``, allowlists, `{}`},
		{"null is not absent", size, `null`, nil, "refused: not a string"},
		{"null list", count, `null`, nil, "refused: not a string_list"},
		{"integer with a fraction", num, `1.0`, nil, "refused: without fraction or exponent"},
		{"integer with an exponent", num, `1e3`, nil, "refused: without fraction or exponent"},
		{"minus zero", num, `-0`, nil, `{"f":0}`},
		{"beyond 2^53-1", num, `9007199254740992`, nil, "refused: integer_range"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := Parse([]byte(`{"declaration":1,"action":"t","fields":{"f":` + c.field + `}}`))
			if err != nil {
				t.Fatal(err)
			}
			params := `{}`
			if c.value != "" {
				params = `{"f":` + c.value + `}`
			}
			res, err := d.Minimize([]byte(params), Options{Allowlists: c.allowlists})
			if problem, refused := strings.CutPrefix(c.want, "refused: "); refused {
				var e *Error
				if !errors.As(err, &e) || e.Pointer != "/f" || !strings.Contains(e.Problem, problem) {
					t.Fatalf("Minimize = %s, %v; want a refusal at /f with %q", res.Attributes, err, problem)
				}
				return
			}
			if err != nil || string(res.Attributes) != c.want {
				t.Fatalf("attributes = %s, %v; want %s", res.Attributes, err, c.want)
			}
		})
	}
}
