package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/decisionledger/ledger/commit/declare"
)

// minimizeCase is one case of minimize.json.
type minimizeCase struct {
	Name        string              `json:"name"`
	Note        string              `json:"note,omitempty"`
	Declaration json.RawMessage     `json:"declaration"`
	Params      []byte              `json:"params_base64"`
	Allowlists  map[string][]string `json:"allowlists,omitempty"`
	Expect      minimizeExpect      `json:"expect"`
}

type minimizeExpect struct {
	ParamsDigest     string   `json:"params_digest,omitempty"`
	ParamsSize       int      `json:"params_size,omitempty"`
	Attributes       []byte   `json:"attributes_base64,omitempty"`
	TiersDigest      string   `json:"tiers_digest,omitempty"`
	DefinitionDigest string   `json:"definition_digest,omitempty"`
	Refusal          *refusal `json:"refusal,omitempty"`
}

// minimizeSource is a case as written by hand: want is the refusal code,
// or "" when the call is minimized; then attributes is the canonical
// minimized attributes it must give.
type minimizeSource struct {
	name, note    string
	decl, params  string
	allowlists    map[string][]string
	want, pointer string
	attributes    string
}

// minimizeResult runs one case through the Go reference: Parse the
// declaration's bytes as the corpus holds them, then Minimize.
func minimizeResult(t *testing.T, decl, params []byte, allowlists map[string][]string) minimizeExpect {
	t.Helper()
	refused := func(err error) minimizeExpect {
		var de *declare.Error
		if !errors.As(err, &de) || de.Code == "" {
			t.Fatalf("refusal %v is not a *declare.Error with a Code", err)
		}
		return minimizeExpect{Refusal: &refusal{Code: de.Code, Pointer: de.Pointer}}
	}
	d, err := declare.Parse(decl)
	if err != nil {
		return refused(err)
	}
	var opts declare.Options
	if allowlists != nil {
		opts.Allowlists = map[string]map[string]bool{}
		for name, vs := range allowlists {
			opts.Allowlists[name] = map[string]bool{}
			for _, v := range vs {
				opts.Allowlists[name][v] = true
			}
		}
	}
	r, err := d.Minimize(params, opts)
	if err != nil {
		return refused(err)
	}
	def, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return minimizeExpect{ParamsDigest: r.Params.Digest.String(), ParamsSize: r.Params.Size,
		Attributes: r.Attributes, TiersDigest: r.Tiers.String(), DefinitionDigest: def.String()}
}

func compactJSON(t *testing.T, s string) json.RawMessage {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("%v in %s", err, s)
	}
	return b.Bytes()
}

func TestMinimizeCorpus(t *testing.T) {
	var names []string
	var cases []any
	refused := 0
	for _, s := range minimizeSources(t) {
		c := minimizeCase{Name: s.name, Note: s.note, Declaration: compactJSON(t, s.decl), Params: []byte(s.params), Allowlists: s.allowlists}
		c.Expect = minimizeResult(t, c.Declaration, c.Params, c.Allowlists)
		if r := c.Expect.Refusal; r != nil {
			refused++
			if r.Code != s.want || r.Pointer != s.pointer {
				t.Errorf("%s: Go refuses with %s at %q, the case says %q at %q", s.name, r.Code, r.Pointer, s.want, s.pointer)
			}
		} else if s.want != "" {
			t.Errorf("%s: Go minimizes it to %s, the case says %s at %q", s.name, c.Expect.Attributes, s.want, s.pointer)
		} else if string(c.Expect.Attributes) != s.attributes {
			t.Errorf("%s: attributes %s, the case says %s", s.name, c.Expect.Attributes, s.attributes)
		}
		names = append(names, s.name)
		cases = append(cases, c)
	}
	if len(cases) < 60 || refused < 20 || len(cases)-refused < 30 {
		t.Errorf("minimize corpus too small: %d cases, %d refused", len(cases), refused)
	}
	checkCorpus(t, "minimize", names, cases)
}

// TestMinimizeCorpusReader reads minimize.json the way another language's
// test does, and checks every case against Go.
func TestMinimizeCorpusReader(t *testing.T) {
	cases := readCases[minimizeCase](t, "minimize")
	for _, c := range cases {
		got := minimizeResult(t, c.Declaration, c.Params, c.Allowlists)
		if a, b := marshalCase(t, got), marshalCase(t, c.Expect); !bytes.Equal(a, b) {
			t.Errorf("%s: Go gives %s, the corpus says %s", c.Name, a, b)
		}
	}
	t.Logf("%d minimize cases", len(cases))
}

func declarationFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../testdata/declarations", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func minimizeSources(t *testing.T) []minimizeSource {
	email := declarationFile(t, "send_email")
	payment := declarationFile(t, "make_payment")
	httpReq := declarationFile(t, "http_request")
	record := declarationFile(t, "read_record")
	upload := declarationFile(t, "upload_file")
	payees := map[string][]string{"payees": {"acct-100", "acct-200"}}

	// Small declarations, one projection or type each.
	field := func(f string) string {
		return `{"declaration":1,"action":"a","fields":{"x":` + f + `}}`
	}
	policyString := field(`{"type":"string","tier":"policy"}`)
	policyInt := field(`{"type":"integer","tier":"policy"}`)
	policyBool := field(`{"type":"boolean","tier":"policy"}`)
	policyList := field(`{"type":"string_list","tier":"policy"}`)
	payloadJSON := field(`{"type":"json","tier":"payload"}`)
	optionalInt := field(`{"type":"integer","tier":"policy","optional":true}`)
	domainOf := field(`{"type":"string","tier":"derived","projections":["recipient_domain"]}`)
	hostOf := field(`{"type":"string","tier":"derived","projections":["endpoint_host"]}`)
	routeOf := field(`{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/v1/items","/v1/items/{id}","/v1/{kind}/{id}","/"]}`)
	dirOf := field(`{"type":"string","tier":"derived","projections":["resource_dir"]}`)
	sizeOf := field(`{"type":"string","tier":"derived","projections":["byte_size"]}`)
	countOf := field(`{"type":"string_list","tier":"derived","projections":["count"]}`)
	known := field(`{"type":"string","tier":"derived","projections":["payee_known"],"allowlist":"payees"}`)
	camel := `{"declaration":1,"action":"fs.write-file","fields":{"dryRun":{"type":"boolean","tier":"policy"},"targetPath":{"type":"string","tier":"derived","projections":["resource_dir","byte_size"]},"Content":{"type":"json","tier":"payload","optional":true}}}`
	tool := `{"declaration":1,"action":"fs.read_file","tool":{"server":"fs","name":"read_file","definition_digest":"sha256:0000000000000000000000000000000000000000000000000000000000000001"},"fields":{}}`
	draft := `{"declaration":1,"action":"fs.list","reviewed":false,"tool":{"server":"fs","name":"list","definition_digest":"sha256:00000000000000000000000000000000000000000000000000000000000000aa"},"fields":{"path":{"type":"string","tier":"derived","projections":["resource_dir"]}}}`

	return []minimizeSource{
		// The declarations of testdata/declarations, with calls.
		{name: "send-email", decl: email,
			params:     `{"recipient":"Bob.Smith@Example.ORG","subject":"Invoice 4711","body":"Hello Bob","attachment_hashes":["sha256:9f86"]}`,
			attributes: `{"attachment_hashes":["sha256:9f86"],"body":{"byte_size":9},"recipient":{"recipient_domain":"example.org"}}`},
		{name: "send-email-optional-absent", decl: email,
			params:     `{"recipient":"a@example.com","subject":"","body":""}`,
			attributes: `{"body":{"byte_size":0},"recipient":{"recipient_domain":"example.com"}}`},
		{name: "send-email-undeclared-dropped", note: "an undeclared member reaches only the digest",
			decl: email, params: `{"recipient":"a@example.com","subject":"s","body":"b","cc":"c@example.com","dry-run":true}`,
			attributes: `{"body":{"byte_size":1},"recipient":{"recipient_domain":"example.com"}}`},
		{name: "send-email-utf8-size", note: "byte_size counts UTF-8 bytes: é is 2, 😀 is 4",
			decl: email, params: `{"recipient":"a@example.com","subject":"s","body":"é😀"}`,
			attributes: `{"body":{"byte_size":6},"recipient":{"recipient_domain":"example.com"}}`},
		{name: "send-email-recipient-absent", decl: email, params: `{"subject":"s","body":"b"}`, want: "field_absent", pointer: "/recipient"},
		{name: "send-email-recipient-malformed", note: "fail closed: no domain is guessed", decl: email,
			params: `{"recipient":"not an address","subject":"s","body":"b"}`, want: "projection_refused", pointer: "/recipient"},
		{name: "send-email-first-field-in-order", note: "fields are checked in byte order of their names: body before recipient",
			decl: email, params: `{"recipient":"bad","subject":"s","body":7}`, want: "field_type", pointer: "/body"},
		{name: "send-email-hashes-not-strings", decl: email,
			params: `{"recipient":"a@example.com","subject":"s","body":"b","attachment_hashes":["x",1]}`, want: "field_type", pointer: "/attachment_hashes"},
		{name: "send-email-payload-wrong-type", note: "a payload field is type-checked too, though nothing of it crosses",
			decl: email, params: `{"recipient":"a@example.com","subject":42,"body":"b"}`, want: "field_type", pointer: "/subject"},
		{name: "make-payment-known", decl: payment, allowlists: payees,
			params:     `{"amount_minor":1250000,"currency":"EUR","payee":"acct-100","memo":"Invoice 2026-1142"}`,
			attributes: `{"amount_minor":1250000,"currency":"EUR","payee":{"payee_known":true}}`},
		{name: "make-payment-unknown", decl: payment, allowlists: payees,
			params:     `{"amount_minor":5,"currency":"EUR","payee":"acct-999"}`,
			attributes: `{"amount_minor":5,"currency":"EUR","payee":{"payee_known":false}}`},
		{name: "make-payment-no-allowlist", note: "a missing list makes every payee unknown",
			decl: payment, params: `{"amount_minor":5,"currency":"EUR","payee":"acct-100"}`,
			attributes: `{"amount_minor":5,"currency":"EUR","payee":{"payee_known":false}}`},
		{name: "make-payment-other-list", decl: payment, allowlists: map[string][]string{"vendors": {"acct-100"}},
			params:     `{"amount_minor":5,"currency":"EUR","payee":"acct-100"}`,
			attributes: `{"amount_minor":5,"currency":"EUR","payee":{"payee_known":false}}`},
		{name: "make-payment-amount-spelled-100-0", note: "the digest admits 100.0 as 100; an integer field wants it written as an integer",
			decl: payment, params: `{"amount_minor":100.0,"currency":"EUR","payee":"acct-100"}`, want: "field_type", pointer: "/amount_minor"},
		{name: "make-payment-amount-exponent", decl: payment, params: `{"amount_minor":1e2,"currency":"EUR","payee":"acct-100"}`, want: "field_type", pointer: "/amount_minor"},
		{name: "make-payment-amount-string", decl: payment, params: `{"amount_minor":"100","currency":"EUR","payee":"acct-100"}`, want: "field_type", pointer: "/amount_minor"},
		{name: "make-payment-amount-unsafe", decl: payment, params: `{"amount_minor":9007199254740992,"currency":"EUR","payee":"acct-100"}`,
			want: "domain:integer_range", pointer: "/amount_minor"},
		{name: "make-payment-amount-fraction", decl: payment, params: `{"amount_minor":12.5,"currency":"EUR","payee":"acct-100"}`,
			want: "domain:non_integer", pointer: "/amount_minor"},
		{name: "make-payment-amount-minus-zero", note: "-0 is the integer 0", decl: payment,
			params: `{"amount_minor":-0,"currency":"EUR","payee":"acct-100"}`, allowlists: payees,
			attributes: `{"amount_minor":0,"currency":"EUR","payee":{"payee_known":true}}`},
		{name: "make-payment-payee-not-string", note: "payee_known never refuses: anything but a listed string is false... but the field's type is checked first",
			decl: payment, params: `{"amount_minor":5,"currency":"EUR","payee":100}`, allowlists: payees, want: "field_type", pointer: "/payee"},
		{name: "http-request", decl: httpReq,
			params:     `{"url":"https://API.Example.com:8443/v1/invoices/4711?expand=lines#top","method":"GET"}`,
			attributes: `{"method":"GET","url":{"endpoint_host":"api.example.com","route_shape":"/v1/invoices/{id}"}}`},
		{name: "http-request-first-route-wins", decl: httpReq,
			params:     `{"url":"http://api.example.com/v1/invoices","method":"POST","body":"{}"}`,
			attributes: `{"body":{"byte_size":2},"method":"POST","url":{"endpoint_host":"api.example.com","route_shape":"/v1/invoices"}}`},
		{name: "http-request-unmatched", decl: httpReq,
			params:     `{"url":"https://api.example.com/v2/secret/path","method":"GET"}`,
			attributes: `{"method":"GET","url":{"endpoint_host":"api.example.com","route_shape":"unmatched"}}`},
		{name: "http-request-nested-route", decl: httpReq,
			params:     `{"url":"https://api.example.com/v1/customers/c-9/orders","method":"GET"}`,
			attributes: `{"method":"GET","url":{"endpoint_host":"api.example.com","route_shape":"/v1/customers/{id}/orders"}}`},
		{name: "http-request-not-http", decl: httpReq, params: `{"url":"ftp://files.example.com/v1/invoices","method":"GET"}`, want: "projection_refused", pointer: "/url"},
		{name: "http-request-relative", decl: httpReq, params: `{"url":"/v1/invoices","method":"GET"}`, want: "projection_refused", pointer: "/url"},
		{name: "read-record", decl: record,
			params:     `{"resource_path":"/records/2026/11/patient-4711.json","purpose":"treatment"}`,
			attributes: `{"purpose":"treatment","resource_path":{"resource_dir":"/records/2026/11"}}`},
		{name: "read-record-dot-segment", decl: record, params: `{"resource_path":"/records/../secrets/x","purpose":"treatment"}`, want: "projection_refused", pointer: "/resource_path"},
		{name: "upload-file", decl: upload,
			params:     `{"destination_url":"https://uploads.example.net/in","local_path":"docs/q4/report.pdf","size_bytes":20480,"content_type":"application/pdf","content":"JVBERi0=","labels":["q4","finance"]}`,
			attributes: `{"content_type":"application/pdf","destination_url":{"endpoint_host":"uploads.example.net"},"labels":{"count":2},"local_path":{"resource_dir":"/docs/q4"},"size_bytes":20480}`},
		{name: "upload-file-labels-absent", decl: upload,
			params:     `{"destination_url":"https://uploads.example.net/in","local_path":"report.pdf","size_bytes":0,"content_type":"text/plain","content":""}`,
			attributes: `{"content_type":"text/plain","destination_url":{"endpoint_host":"uploads.example.net"},"local_path":{"resource_dir":"/"},"size_bytes":0}`},
		{name: "upload-file-labels-null", note: "an optional field present as null is present: null is not a string_list",
			decl: upload, params: `{"destination_url":"https://uploads.example.net/in","local_path":"r","size_bytes":0,"content_type":"t","content":"","labels":null}`,
			want: "field_type", pointer: "/labels"},

		// Every type, policy tier.
		{name: "policy-string", decl: policyString, params: `{"x":"Café"}`, attributes: `{"x":"Café"}`},
		{name: "policy-string-escapes", decl: policyString, params: `{"x":"a\u0000\n\"\\\/\u00e9"}`, attributes: `{"x":"a\u0000\n\"\\/é"}`},
		{name: "policy-string-null", decl: policyString, params: `{"x":null}`, want: "field_type", pointer: "/x"},
		{name: "policy-integer", decl: policyInt, params: `{"x":-9007199254740991}`, attributes: `{"x":-9007199254740991}`},
		{name: "policy-integer-bool", decl: policyInt, params: `{"x":true}`, want: "field_type", pointer: "/x"},
		{name: "policy-boolean", decl: policyBool, params: `{"x":false}`, attributes: `{"x":false}`},
		{name: "policy-boolean-string", decl: policyBool, params: `{"x":"true"}`, want: "field_type", pointer: "/x"},
		{name: "policy-string-list", decl: policyList, params: `{"x":["b","a","b"]}`, attributes: `{"x":["b","a","b"]}`},
		{name: "policy-string-list-empty", decl: policyList, params: `{"x":[]}`, attributes: `{"x":[]}`},
		{name: "policy-string-list-nested", decl: policyList, params: `{"x":[["a"]]}`, want: "field_type", pointer: "/x"},
		{name: "policy-string-list-object", decl: policyList, params: `{"x":{"0":"a"}}`, want: "field_type", pointer: "/x"},
		{name: "optional-present", decl: optionalInt, params: `{"x":3}`, attributes: `{"x":3}`},
		{name: "optional-absent", decl: optionalInt, params: `{}`, attributes: `{}`},
		{name: "optional-null", decl: optionalInt, params: `{"x":null}`, want: "field_type", pointer: "/x"},
		{name: "payload-json-object", decl: payloadJSON, params: `{"x":{"deep":[1,{"k":null}]}}`, attributes: `{}`},
		{name: "payload-json-null", decl: payloadJSON, params: `{"x":null}`, attributes: `{}`},
		{name: "payload-json-absent", note: "a json field that is not optional must be present", decl: payloadJSON, params: `{}`, want: "field_absent", pointer: "/x"},
		{name: "payload-json-domain", note: "the strict domain holds inside payload values too; the pointer stops at the declared field",
			decl: payloadJSON, params: `{"x":{"secret-name":{"k":1,"k":2}}}`, want: "domain:duplicate_key", pointer: "/x"},

		// Each projection, accepted and refused (fail closed).
		{name: "recipient-domain-lowered", decl: domainOf, params: `{"x":"Alice@Mail.EXAMPLE.com"}`, attributes: `{"x":{"recipient_domain":"mail.example.com"}}`},
		{name: "recipient-domain-two-ats", decl: domainOf, params: `{"x":"a@b@example.com"}`, want: "projection_refused", pointer: "/x"},
		{name: "recipient-domain-no-local", decl: domainOf, params: `{"x":"@example.com"}`, want: "projection_refused", pointer: "/x"},
		{name: "recipient-domain-single-label", decl: domainOf, params: `{"x":"root@localhost"}`, want: "projection_refused", pointer: "/x"},
		{name: "recipient-domain-idn", note: "a non-ASCII domain is refused, not converted to punycode", decl: domainOf, params: `{"x":"a@exämple.com"}`, want: "projection_refused", pointer: "/x"},
		{name: "recipient-domain-hyphen-label", decl: domainOf, params: `{"x":"a@-x.example.com"}`, want: "projection_refused", pointer: "/x"},
		{name: "recipient-domain-trailing-dot", decl: domainOf, params: `{"x":"a@example.com."}`, want: "projection_refused", pointer: "/x"},
		{name: "endpoint-host-userinfo-port", decl: hostOf, params: `{"x":"https://user:pw@Files.Example.org:444/p?q=1"}`, attributes: `{"x":{"endpoint_host":"files.example.org"}}`},
		{name: "endpoint-host-ipv4", note: "an IPv4 literal passes the label rule (digits are letters-digits-hyphens) and crosses as written",
			decl: hostOf, params: `{"x":"http://192.0.2.1/"}`, attributes: `{"x":{"endpoint_host":"192.0.2.1"}}`},
		{name: "endpoint-host-ipv6", decl: hostOf, params: `{"x":"http://[2001:db8::1]/"}`, want: "projection_refused", pointer: "/x"},
		{name: "endpoint-host-no-host", decl: hostOf, params: `{"x":"https:///path"}`, want: "projection_refused", pointer: "/x"},
		{name: "endpoint-host-mailto", decl: hostOf, params: `{"x":"mailto:a@example.com"}`, want: "projection_refused", pointer: "/x"},
		{name: "recipient-domain-dotted-capital-i", note: "U+0130 lower-cases to i under simple case mapping (docs/declarations.md): every implementation must map it so",
			decl: domainOf, params: `{"x":"bob@İ.example"}`, attributes: `{"x":{"recipient_domain":"i.example"}}`},
		{name: "recipient-domain-long-s", note: "U+017F has no ASCII lower case: refused, never folded to s", decl: domainOf, params: `{"x":"bob@ſ.example"}`, want: "projection_refused", pointer: "/x"},
		{name: "endpoint-host-dotted-capital-i", decl: hostOf, params: `{"x":"https://İ.example/"}`, attributes: `{"x":{"endpoint_host":"i.example"}}`},
		{name: "endpoint-host-upper-scheme", note: "the scheme is compared after URL parsing lower-cases it", decl: hostOf, params: `{"x":"HTTPS://example.com/"}`, attributes: `{"x":{"endpoint_host":"example.com"}}`},
		{name: "route-shape-variable", decl: routeOf, params: `{"x":"https://example.com/v1/items/42"}`, attributes: `{"x":{"route_shape":"/v1/items/{id}"}}`},
		{name: "route-shape-literal-before-variable", decl: routeOf, params: `{"x":"https://example.com/v1/items"}`, attributes: `{"x":{"route_shape":"/v1/items"}}`},
		{name: "route-shape-two-variables", decl: routeOf, params: `{"x":"https://example.com/v1/orders/7"}`, attributes: `{"x":{"route_shape":"/v1/{kind}/{id}"}}`},
		{name: "route-shape-root", decl: routeOf, params: `{"x":"https://example.com/"}`, attributes: `{"x":{"route_shape":"/"}}`},
		{name: "route-shape-empty-path", note: "an empty path matches no template, not even /", decl: routeOf, params: `{"x":"https://example.com"}`, attributes: `{"x":{"route_shape":"unmatched"}}`},
		{name: "route-shape-trailing-slash", decl: routeOf, params: `{"x":"https://example.com/v1/items/"}`, attributes: `{"x":{"route_shape":"unmatched"}}`},
		{name: "route-shape-escaped-slash", note: "the path is matched in its escaped form: %2F does not split a segment", decl: routeOf, params: `{"x":"https://example.com/v1/items/a%2Fb"}`, attributes: `{"x":{"route_shape":"/v1/items/{id}"}}`},
		{name: "route-shape-not-url", decl: routeOf, params: `{"x":"v1/items"}`, want: "projection_refused", pointer: "/x"},
		{name: "resource-dir-relative", decl: dirOf, params: `{"x":"a/b/c.txt"}`, attributes: `{"x":{"resource_dir":"/a/b"}}`},
		{name: "resource-dir-top", decl: dirOf, params: `{"x":"/name"}`, attributes: `{"x":{"resource_dir":"/"}}`},
		{name: "resource-dir-empty-segment", decl: dirOf, params: `{"x":"/a//b"}`, want: "projection_refused", pointer: "/x"},
		{name: "resource-dir-trailing-slash", decl: dirOf, params: `{"x":"/a/b/"}`, want: "projection_refused", pointer: "/x"},
		{name: "resource-dir-backslash", decl: dirOf, params: `{"x":"a\\b"}`, want: "projection_refused", pointer: "/x"},
		{name: "resource-dir-nul", decl: dirOf, params: `{"x":"a/\u0000"}`, want: "projection_refused", pointer: "/x"},
		{name: "resource-dir-empty", decl: dirOf, params: `{"x":""}`, want: "projection_refused", pointer: "/x"},
		{name: "byte-size-empty", decl: sizeOf, params: `{"x":""}`, attributes: `{"x":{"byte_size":0}}`},
		{name: "byte-size-escapes", note: "the size of the decoded string, not of its JSON spelling", decl: sizeOf, params: `{"x":"\u00e9\n"}`, attributes: `{"x":{"byte_size":3}}`},
		{name: "count-list", decl: countOf, params: `{"x":["a","b","c"]}`, attributes: `{"x":{"count":3}}`},
		{name: "count-empty", decl: countOf, params: `{"x":[]}`, attributes: `{"x":{"count":0}}`},
		{name: "count-not-list", decl: countOf, params: `{"x":"abc"}`, want: "field_type", pointer: "/x"},
		{name: "payee-known-listed", decl: known, params: `{"x":"acct-200"}`, allowlists: payees, attributes: `{"x":{"payee_known":true}}`},
		{name: "payee-known-case", note: "the list is matched exactly", decl: known, params: `{"x":"ACCT-200"}`, allowlists: payees, attributes: `{"x":{"payee_known":false}}`},

		// camelCase names, two projections on one field, tools, drafts.
		{name: "camel-case-names", decl: camel,
			params:     `{"dryRun":true,"targetPath":"/srv/out/a.txt","Content":{"bytes":"aGk="}}`,
			attributes: `{"dryRun":true,"targetPath":{"byte_size":14,"resource_dir":"/srv/out"}}`},
		{name: "camel-case-absent", note: "names are case-sensitive: dryrun is not dryRun", decl: camel,
			params: `{"dryrun":true,"targetPath":"/srv/out/a.txt"}`, want: "field_absent", pointer: "/dryRun"},
		{name: "tool-no-fields", note: "a tool's action may declare no field: everything reaches only the digest",
			decl: tool, params: `{"path":"/etc/passwd","n":1}`, attributes: `{}`},
		{name: "draft-minimizes", note: "an unreviewed draft minimizes like any declaration (ledgerd refuses to serve it)",
			decl: draft, params: `{"path":"/home/a/b"}`, attributes: `{"path":{"resource_dir":"/home/a"}}`},

		// Parameters outside the strict domain: the pointer stops at the
		// declared field, or says the fault is in an undeclared one.
		{name: "domain-undeclared", decl: policyInt, params: `{"x":1,"secret":"e\u0301"}`, want: "domain:not_nfc", pointer: "(an undeclared field)"},
		{name: "domain-unstable-normalization", note: "U+1E08F's normalization depends on the Unicode version (docs/commitment.md §2.4)",
			decl: policyString, params: `{"x":"\u0430\ud838\udc8f"}`, want: "domain:unstable_normalization", pointer: "/x"},
		{name: "domain-declared-nested", decl: policyList, params: `{"x":["ok","\ud800"]}`, want: "domain:lone_surrogate", pointer: "/x"},
		{name: "domain-root", decl: policyInt, params: `[1]`, want: "domain:not_object", pointer: ""},
		{name: "domain-syntax", decl: policyInt, params: `{"x":1,}`, want: "domain:syntax", pointer: ""},
		{name: "domain-invalid-utf8", decl: policyString, params: "{\"x\":\"\xff\"}", want: "domain:invalid_utf8", pointer: "/x"},
		{name: "domain-duplicate-field", decl: policyInt, params: `{"x":1,"x":2}`, want: "domain:duplicate_key", pointer: "/x"},
		{name: "domain-before-fields", note: "the digest's domain is checked before any field", decl: policyInt, params: `{"y":1.5}`, want: "domain:non_integer", pointer: "(an undeclared field)"},

		// Declarations refused: the pointer is into the declaration.
		{name: "declaration-unknown-member", decl: `{"declaration":1,"action":"a","fields":{},"extra":1}`, params: `{}`, want: "declaration_invalid", pointer: ""},
		{name: "declaration-version", decl: `{"declaration":2,"action":"a","fields":{"x":{"type":"string","tier":"policy"}}}`, params: `{}`, want: "declaration_invalid", pointer: "/declaration"},
		{name: "declaration-no-fields", decl: `{"declaration":1,"action":"a","fields":{}}`, params: `{}`, want: "declaration_invalid", pointer: "/fields"},
		{name: "declaration-bad-tier", decl: field(`{"type":"string","tier":"secret"}`), params: `{"x":"v"}`, want: "declaration_invalid", pointer: "/fields/x/tier"},
		{name: "declaration-json-policy", decl: field(`{"type":"json","tier":"policy"}`), params: `{"x":1}`, want: "declaration_invalid", pointer: "/fields/x/tier"},
		{name: "declaration-derived-no-projection", decl: field(`{"type":"string","tier":"derived"}`), params: `{"x":"v"}`, want: "declaration_invalid", pointer: "/fields/x/projections"},
		{name: "declaration-projection-type", decl: field(`{"type":"integer","tier":"derived","projections":["byte_size"]}`), params: `{"x":1}`, want: "declaration_invalid", pointer: "/fields/x/projections/0"},
		{name: "declaration-unknown-projection", decl: field(`{"type":"string","tier":"derived","projections":["recipient_domain","first_name"]}`), params: `{"x":"v"}`, want: "declaration_invalid", pointer: "/fields/x/projections/1"},
		{name: "declaration-route-missing", decl: field(`{"type":"string","tier":"derived","projections":["route_shape"]}`), params: `{"x":"v"}`, want: "declaration_invalid", pointer: "/fields/x/routes"},
		{name: "declaration-allowlist-missing", decl: field(`{"type":"string","tier":"derived","projections":["payee_known"]}`), params: `{"x":"v"}`, want: "declaration_invalid", pointer: "/fields/x/allowlist"},
		{name: "declaration-field-name", decl: `{"declaration":1,"action":"a","fields":{"dry-run":{"type":"boolean","tier":"policy"}}}`, params: `{}`, want: "declaration_invalid", pointer: "/fields/dry-run"},
		{name: "declaration-reviewed-true", decl: `{"declaration":1,"action":"a","reviewed":true,"fields":{"x":{"type":"string","tier":"policy"}}}`, params: `{}`, want: "declaration_invalid", pointer: "/reviewed"},
		{name: "declaration-tool-action", decl: `{"declaration":1,"action":"fs.other","tool":{"server":"fs","name":"read_file","definition_digest":"sha256:0000000000000000000000000000000000000000000000000000000000000001"},"fields":{}}`,
			params: `{}`, want: "declaration_invalid", pointer: "/action"},
	}
}
