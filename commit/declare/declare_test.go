package declare

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/project"
	"github.com/decisionledger/ledger/commit/tier"
)

const minimal = `{"declaration":1,"action":"send_email","fields":{"recipient":{"type":"string","tier":"derived","projections":["recipient_domain"]}}}`

// Parse refuses every rule of the format, naming where.
func TestParseRefuses(t *testing.T) {
	for _, c := range []struct {
		name, decl, pointer, problem string
	}{
		{"duplicate member", `{"declaration":1,"declaration":1,"action":"a","fields":{}}`, "/declaration", "duplicate"},
		{"unknown member", `{"declaration":1,"action":"a","fields":{},"extra":1}`, "", `unknown member "extra"`},
		{"unknown field member", `{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"policy","secret":true}}}`, "", `unknown member "secret"`},
		{"wrong member type", `{"declaration":"1","action":"a","fields":{}}`, "", `"declaration" is not a JSON int`},
		{"not an object", `[1]`, "", "not a declaration object"},
		{"missing version", `{"action":"a","fields":{"x":{"type":"string","tier":"policy"}}}`, "/declaration", "missing"},
		{"null version", `{"declaration":null,"action":"a","fields":{"x":{"type":"string","tier":"policy"}}}`, "/declaration", "missing"},
		{"version with a fraction", `{"declaration":1.0,"action":"a","fields":{"x":{"type":"string","tier":"policy"}}}`, "", `"declaration" is not a JSON int`},
		{"null type", `{"declaration":1,"action":"a","fields":{"x":{"type":null,"tier":"policy"}}}`, "/fields/x/type", "missing"},
		{"future version", `{"declaration":2,"action":"a","fields":{"x":{"type":"string","tier":"policy"}}}`, "/declaration", "version 2"},
		{"missing action", `{"declaration":1,"fields":{"x":{"type":"string","tier":"policy"}}}`, "/action", "missing"},
		{"bad action", `{"declaration":1,"action":"Send Email","fields":{"x":{"type":"string","tier":"policy"}}}`, "/action", "dot-separated parts"},
		{"no fields", `{"declaration":1,"action":"a","fields":{}}`, "/fields", "only the declaration of a tool"},
		{"missing fields", `{"declaration":1,"action":"a"}`, "/fields", "missing"},
		{"null fields", `{"declaration":1,"action":"a","fields":null}`, "/fields", "missing"},
		{"bad field name", `{"declaration":1,"action":"a","fields":{"to-do":{"type":"string","tier":"policy"}}}`, "/fields/to-do", "not a field name"},
		{"missing type", `{"declaration":1,"action":"a","fields":{"x":{"tier":"policy"}}}`, "/fields/x/type", "missing"},
		{"unknown type", `{"declaration":1,"action":"a","fields":{"x":{"type":"float","tier":"policy"}}}`, "/fields/x/type", "not string"},
		{"json policy field", `{"declaration":1,"action":"a","fields":{"x":{"type":"json","tier":"policy"}}}`, "/fields/x/tier", "a json field must be payload"},
		{"json derived field", `{"declaration":1,"action":"a","fields":{"x":{"type":"json","tier":"derived","projections":["byte_size"]}}}`, "/fields/x/tier", "a json field must be payload"},
		{"json field of an unknown tier", `{"declaration":1,"action":"a","fields":{"x":{"type":"json","tier":"public"}}}`, "/fields/x/tier", "not policy"},
		{"missing tier", `{"declaration":1,"action":"a","fields":{"x":{"type":"string"}}}`, "/fields/x/tier", "missing"},
		{"unknown tier", `{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"public"}}}`, "/fields/x/tier", "not policy"},
		{"derived without projection", `{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"derived"}}}`, "/fields/x/projections", "at least one"},
		{"policy with projection", `{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"policy","projections":["byte_size"]}}}`, "/fields/x/projections", "only derived"},
		{"unknown projection", `{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"derived","projections":["first_letter"]}}}`, "/fields/x/projections/0", "unknown projection"},
		{"projection of another type", `{"declaration":1,"action":"a","fields":{"x":{"type":"integer","tier":"derived","projections":["byte_size"]}}}`, "/fields/x/projections/0", "takes a string field"},
		{"repeated projection", `{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"derived","projections":["byte_size","byte_size"]}}}`, "/fields/x/projections/1", "repeated"},
		{"route_shape without routes", `{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"derived","projections":["route_shape"]}}}`, "/fields/x/routes", "needs"},
		{"routes without route_shape", `{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"policy","routes":["/a"]}}}`, "/fields/x/routes", "only a field"},
		{"bad route", `{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"derived","projections":["route_shape"],"routes":["/a/{b"]}}}`, "/fields/x/routes/0", "segments"},
		{"relative route", `{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"derived","projections":["route_shape"],"routes":["a/b"]}}}`, "/fields/x/routes/0", "starting with '/'"},
		{"payee_known without allowlist", `{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"derived","projections":["payee_known"]}}}`, "/fields/x/allowlist", "needs the name"},
		{"allowlist without payee_known", `{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"policy","allowlist":"l"}}}`, "/fields/x/allowlist", "only a field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.decl))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse = %v, want an *Error", err)
			}
			if e.Pointer != c.pointer || !strings.Contains(e.Problem, c.problem) || e.Code != CodeDeclarationInvalid {
				t.Errorf("Parse = pointer %q, problem %q, code %q; want %q, a problem with %q and %s", e.Pointer, e.Problem, e.Code, c.pointer, c.problem, CodeDeclarationInvalid)
			}
		})
	}
	if _, err := Parse([]byte(minimal)); err != nil {
		t.Errorf("Parse(minimal) = %v", err)
	}
}

// Re-tiering a field changes the attributes and the applied-tiers digest,
// never the parameter digest.
func TestRetieringKeepsParamsDigest(t *testing.T) {
	c := corpus[0] // send_email
	base := loadCorpus(t, c.action)
	retiered := *base
	retiered.Fields = append([]Field(nil), base.Fields...)
	for i, f := range retiered.Fields {
		if f.Name == "subject" { // payload -> derived: its size now crosses
			retiered.Fields[i].Tier, retiered.Fields[i].Projections = tier.Derived, []string{"byte_size"}
		}
	}
	a, err := base.Minimize([]byte(c.params), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := retiered.Minimize([]byte(c.params), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Params != b.Params {
		t.Errorf("re-tiering changed the parameter commitment: %v, %v", a.Params, b.Params)
	}
	if a.Tiers == b.Tiers {
		t.Errorf("re-tiering kept the applied-tiers digest %v", a.Tiers)
	}
	const want = `{"attachment_hashes":["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"],"body":{"byte_size":35},"recipient":{"recipient_domain":"example.org"},"subject":{"byte_size":22}}`
	if string(b.Attributes) != want {
		t.Errorf("re-tiered attributes = %s\nwant %s", b.Attributes, want)
	}
}

// Minimize refuses bad calls with the parameter's pointer, never its value.
func TestMinimizeRefuses(t *testing.T) {
	email := loadCorpus(t, "send_email")
	pay := loadCorpus(t, "make_payment")
	for _, c := range []struct {
		name    string
		d       *Declaration
		params  string
		pointer string
		problem string
		errIs   any
		code    string
	}{
		{"absent field", email, `{"body":"b","subject":"secret subject line"}`, "/recipient", "absent", nil, CodeFieldAbsent},
		{"wrong type", email, `{"body":"b","recipient":["x@example.com"],"subject":"s"}`, "/recipient", "not a string", nil, CodeFieldType},
		{"malformed address", email, `{"body":"b","recipient":"bob.smith-at-example.org","subject":"s"}`, "/recipient", "not an email address", &project.Error{}, CodeProjectionRefused},
		{"not an integer", pay, `{"amount_minor":12.5,"currency":"EUR","payee":"p"}`, "/amount_minor", "strict domain", nil, CodeDomainPrefix + "non_integer"},
		{"integer of a string", pay, `{"amount_minor":"125000","currency":"EUR","payee":"p"}`, "/amount_minor", "not a integer", nil, CodeFieldType},
		{"list of numbers", email, `{"attachment_hashes":[1],"body":"b","recipient":"a@example.com","subject":"s"}`, "/attachment_hashes", "not an array of strings", nil, CodeFieldType},
		{"bad value below a payload", email, `{"body":"b","recipient":"a@example.com","subject":{"private-name-4711":1.5}}`, "/subject", "strict domain", nil, CodeDomainPrefix + "non_integer"},
		{"bad value in an undeclared field", email, `{"body":"b","recipient":"a@example.com","subject":"s","x-secret-field":{"y":1.5}}`, "(an undeclared field)", "strict domain", nil, CodeDomainPrefix + "non_integer"},
		{"not an object", email, `["a@example.com"]`, "", "strict domain", nil, CodeDomainPrefix + "not_object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.d.Minimize([]byte(c.params), Options{})
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Minimize = %v, want an *Error", err)
			}
			if e.Pointer != c.pointer || !strings.Contains(e.Problem, c.problem) || e.Code != c.code {
				t.Errorf("got pointer %q problem %q code %q; want %q, %q and %q", e.Pointer, e.Problem, e.Code, c.pointer, c.problem, c.code)
			}
			if pe, ok := c.errIs.(*project.Error); ok && !errors.As(err, &pe) {
				t.Errorf("error %v does not wrap a *project.Error", err)
			}
			for _, secret := range []string{"secret", "bob.smith", "private-name", "4711", "125000", "x@example"} {
				if strings.Contains(err.Error(), secret) && strings.Contains(c.params, secret) {
					t.Errorf("error %q shows the parameter value %q", err, secret)
				}
			}
		})
	}
}

// An optional field may be absent; payee_known without its list is false.
func TestMinimizeOptionalAndAllowlist(t *testing.T) {
	pay := loadCorpus(t, "make_payment")
	res, err := pay.Minimize([]byte(`{"amount_minor":5,"currency":"EUR","payee":"DE89370400440532013000"}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"amount_minor":5,"currency":"EUR","payee":{"payee_known":false}}`; string(res.Attributes) != want {
		t.Errorf("without the allowlist: %s, want %s", res.Attributes, want)
	}
	http := loadCorpus(t, "http_request")
	res, err = http.Minimize([]byte(`{"method":"DELETE","url":"https://api.example.com/v1/admin/users/u-123"}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"method":"DELETE","url":{"endpoint_host":"api.example.com","route_shape":"unmatched"}}`; string(res.Attributes) != want {
		t.Errorf("unmatched route: %s, want %s", res.Attributes, want)
	}
}

// The floor caps declarations: narrower passes, wider is refused, and
// nothing is minimized.
func TestFloor(t *testing.T) {
	d := loadCorpus(t, "make_payment")
	params := []byte(corpus[1].params)
	for _, c := range []struct {
		name  string
		floor Floor
		ok    bool
	}{
		{"no floor", nil, true},
		{"another action", Floor{"send_email": {"*": tier.Payload}}, true},
		{"caps at the declared tiers", Floor{"make_payment": {"amount_minor": tier.Policy, "payee": tier.Derived, "*": tier.Policy}}, true},
		{"payee may not cross at all", Floor{"make_payment": {"payee": tier.Payload}}, false},
		{"nothing raw by default", Floor{"make_payment": {"*": tier.Derived}}, false},
		{"a named cap beats the default", Floor{"make_payment": {"*": tier.Payload, "amount_minor": tier.Policy, "currency": tier.Policy, "payee": tier.Derived}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := d.Minimize(params, Options{Floor: c.floor, Allowlists: corpusAllowlists})
			if c.ok != (err == nil) {
				t.Fatalf("Minimize = %v; want ok=%v", err, c.ok)
			}
			if err != nil {
				var e *Error
				if !errors.As(err, &e) || !strings.Contains(e.Problem, "past the workload's floor") || e.Code != CodeFloorExceeded || res.Attributes != nil {
					t.Errorf("refusal = %v, %s", err, res.Attributes)
				}
			}
		})
	}
}

// Declarations that differ only in spelling have one canonical form and
// one digest; any change in meaning changes the digest.
func TestDeclarationDigest(t *testing.T) {
	a, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse([]byte("{\n \"fields\": {\"recipient\": {\"projections\": [\"recipient_domain\"], \"tier\": \"derived\", \"type\": \"string\", \"optional\": false}},\n \"action\": \"send_email\", \"declaration\": 1\n}"))
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("respelled declaration: %v != %v", da, db)
	}
	changed, err := Parse([]byte(strings.Replace(minimal, `"tier":"derived"`, `"optional":true,"tier":"derived"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if dc, _ := changed.Digest(); dc == da {
		t.Errorf("making a field optional kept the digest")
	}
	if ta, _ := a.TiersDigest(); ta == (commit.Digest{}) {
		t.Errorf("zero tiers digest")
	}
}

// A declaration with faults in several fields is refused at the first
// field in byte order, on every run.
func TestRefusedAtFirstFieldInOrder(t *testing.T) {
	src := []byte(`{"declaration":1,"action":"a","fields":{"m":{"type":"bogus","tier":"policy"},"b":{"type":"string","tier":"nope"},"z":{"tier":"policy"},"c":{"type":"string","tier":"derived"}}}`)
	for range 50 {
		_, err := Parse(src)
		var de *Error
		if !errors.As(err, &de) || de.Pointer != "/fields/b/tier" {
			t.Fatalf("refused at %v, want /fields/b/tier", err)
		}
	}
}

// With openings, Minimize commits with the hiding commitment and returns
// the disclosure that opens it; the attributes and tiers digest are those
// of version 1, and a retry committed with the disclosure gets the same
// commitment.
func TestMinimizeHiding(t *testing.T) {
	file, err := os.ReadFile("../../testdata/declarations/make_payment.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse(file)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../../testdata/calls/make_payment.json")
	if err != nil {
		t.Fatal(err)
	}
	v1, err := d.Minimize(raw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := d.Minimize(raw, Options{Openings: commit.RandomOpenings()})
	if err != nil {
		t.Fatal(err)
	}
	if !v2.Params.Hiding || v2.Disclosure == nil || v2.Disclosure.Check(v2.Params) != nil || v1.Disclosure != nil {
		t.Fatalf("version 2: %+v", v2)
	}
	if !bytes.Equal(v1.Attributes, v2.Attributes) || v1.Tiers != v2.Tiers {
		t.Errorf("attributes or tiers differ between versions")
	}
	again, err := d.Minimize(raw, Options{Openings: v2.Disclosure})
	if err != nil || !again.Params.Equal(v2.Params) {
		t.Errorf("committed again with the disclosure: %v %+v", err, again.Params)
	}
	var e *Error
	if _, err := d.Minimize([]byte(`{"payee":"p","amount_minor":1,"currency":"EUR","memo":"m","extra":1}`), Options{Openings: v2.Disclosure}); !errors.As(err, &e) || e.Code != CodeOpeningMissing {
		t.Errorf("a field the disclosure lacks: %v", err)
	}
}
