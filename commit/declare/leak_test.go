package declare_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"

	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/commit/tier"
	"github.com/decisionledger/ledger/entry"
)

// The leak guard. For every corpus action, property-generated calls carry
// secret tokens (upper-case letters, which nothing the ledger writes by
// itself contains) in every payload and derived value, inside the fixed
// scaffolding the value needs (a URL's scheme, an address's '@'), which is
// public vocabulary and not checked. No 4-character
// window of a secret may appear in the minimized attributes, in a signed
// ledger entry holding them, or in the message of a refused call, unless
// that window is also in what may cross by construction: the projections'
// outputs (a domain, a host, a directory, a route template), the raw
// values of policy fields, and the declaration's own names.
func TestLeakGuard(t *testing.T) {
	decls := corpusDecls(t)
	_, priv, _ := ed25519.GenerateKey(nil)
	for action, d := range decls {
		schema := compileSchema(t, d)
		t.Run(action, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				call := genCall(t, d)
				res, err := d.Minimize(call.raw, declare.Options{Allowlists: call.allowlists})
				if err != nil {
					t.Fatalf("Minimize of a well-formed call: %v", err)
				}
				v, _ := jsonschema.UnmarshalJSON(bytes.NewReader(res.Attributes))
				if err := schema.Validate(v); err != nil {
					t.Fatalf("attributes %s break the generated schema: %v", res.Attributes, err)
				}
				allowed := call.allowed + " " + names(d)
				checkNoLeak(t, "attributes", string(res.Attributes), call.secrets, allowed)

				e := &entry.Entry{
					Origin: "ledger.example.org/test", Index: 7, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
					Mediator: "mediator-a", Principal: "agent-b", Action: d.Action, Decision: entry.Allow,
					Policies: []string{"policy.one"}, Params: res.Params, Tiers: res.Tiers, Attributes: res.Attributes,
				}
				if _, err := e.Sign("ledger.example.org/test+01020304", func(m []byte) []byte { return ed25519.Sign(priv, m) }); err != nil {
					t.Fatal(err)
				}
				signed, err := e.Marshal()
				if err != nil {
					t.Fatal(err)
				}
				// Digests and the signature are hashes: drop them, so their
				// random text does not pass for a leak.
				var m map[string]any
				if err := json.Unmarshal(signed, &m); err != nil {
					t.Fatal(err)
				}
				for _, k := range []string{"sig", "params_digest", "tiers_digest", "prev"} {
					delete(m, k)
				}
				rest, _ := json.Marshal(m)
				checkNoLeak(t, "entry", string(rest), call.secrets, allowed)

				// Every derived field, broken so its projection refuses:
				// the refusal names the field, never the value.
				for _, bad := range call.broken {
					_, err := d.Minimize(bad, declare.Options{Allowlists: call.allowlists})
					if err == nil {
						continue // payee_known and sizes never refuse
					}
					checkNoLeak(t, "error", err.Error(), call.secrets, names(d))
				}
			})
		})
	}
}

func compileSchema(t *testing.T, d *declare.Declaration) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(d.JSONSchema()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	url := "urn:decision-ledger:attributes:" + d.Action
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// names is the declaration's own vocabulary, which may appear anywhere.
func names(d *declare.Declaration) string {
	parts := []string{d.Action}
	for _, f := range d.Fields {
		parts = append(parts, f.Name, strings.Join(f.Projections, " "), strings.Join(f.Routes, " "), f.Allowlist)
	}
	return strings.Join(parts, " ")
}

func checkNoLeak(t *rapid.T, where, out string, secrets []string, allowed string) {
	for _, s := range secrets {
		for i := 0; i+4 <= len(s); i++ {
			w := s[i : i+4]
			if strings.Contains(out, w) && !strings.Contains(allowed, w) {
				t.Fatalf("%s leaks %q of a raw value %q:\n%s", where, w, s, out)
			}
		}
	}
}

type call struct {
	raw        []byte
	secrets    []string // raw payload and derived values
	allowed    string   // what may cross by construction
	allowlists map[string]map[string]bool
	broken     [][]byte // the call with one derived field made malformed
}

var (
	secretToken = rapid.StringMatching(`[A-Z]{6,14}`)
	domains     = []string{"example.com", "example.org", "mail.example.net"}
)

// genCall draws a well-formed call of d: every field present, secrets in
// every payload and derived value.
func genCall(t *rapid.T, d *declare.Declaration) call {
	c := call{allowlists: map[string]map[string]bool{}}
	params := map[string]any{}
	var allowed []string
	for _, f := range d.Fields {
		var v any
		switch {
		case f.Tier == tier.Policy:
			v = genPolicyValue(t, f)
			allowed = append(allowed, fmt.Sprint(v))
		case f.Type == declare.Integer:
			v = rapid.IntRange(0, 1<<40).Draw(t, f.Name)
		case f.Type == declare.Boolean:
			v = rapid.Bool().Draw(t, f.Name)
		case f.Type == declare.StringList:
			items := rapid.SliceOfN(secretToken, 0, 5).Draw(t, f.Name)
			c.secrets = append(c.secrets, items...)
			list := make([]any, len(items))
			for i, s := range items {
				list[i] = s
			}
			v = list
		default:
			s, tokens, out := genString(t, f)
			c.secrets = append(c.secrets, tokens...)
			allowed = append(allowed, out...)
			v = s
			if f.Allowlist != "" && rapid.Bool().Draw(t, "listed") {
				c.allowlists[f.Allowlist] = map[string]bool{s: true}
			}
		}
		params[f.Name] = v
	}
	raw, err := json.MarshalIndent(params, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	c.raw, c.allowed = raw, strings.Join(allowed, " ")
	for _, f := range d.Fields {
		if f.Tier != tier.Derived || f.Type != declare.String {
			continue
		}
		broken := map[string]any{}
		for k, v := range params {
			broken[k] = v
		}
		// No '@', no scheme, an empty segment: each projection refuses.
		broken[f.Name] = "BROKEN" + strings.Repeat(secretToken.Draw(t, "broken"), 2) + "//"
		c.secrets = append(c.secrets, broken[f.Name].(string)[6:])
		b, _ := json.Marshal(broken)
		c.broken = append(c.broken, b)
	}
	return c
}

func genPolicyValue(t *rapid.T, f declare.Field) any {
	switch f.Type {
	case declare.Integer:
		return rapid.IntRange(0, 1<<40).Draw(t, f.Name)
	case declare.Boolean:
		return rapid.Bool().Draw(t, f.Name)
	case declare.StringList:
		items := rapid.SliceOfN(rapid.StringMatching(`[a-f0-9]{8}`), 0, 3).Draw(t, f.Name)
		list := make([]any, len(items))
		for i, s := range items {
			list[i] = s
		}
		return list
	}
	return rapid.StringMatching(`[a-z]{3,10}`).Draw(t, f.Name)
}

// genString draws a derived string field's value with secret tokens where
// its projections must drop them, and returns the tokens and what the
// projections may keep.
func genString(t *rapid.T, f declare.Field) (value string, tokens, keep []string) {
	has := func(p string) bool {
		for _, q := range f.Projections {
			if q == p {
				return true
			}
		}
		return false
	}
	domain := rapid.SampledFrom(domains).Draw(t, "domain")
	tok := func(label string) string {
		s := secretToken.Draw(t, label)
		tokens = append(tokens, s)
		return s
	}
	switch {
	case has("recipient_domain"):
		return tok("local") + "." + tok("local2") + "@" + domain, tokens, []string{domain}
	case has("endpoint_host") || has("route_shape"):
		path := "/v1/invoices/" + tok("id")
		if rapid.Bool().Draw(t, "unmatched") {
			path = "/" + tok("seg") + "/" + tok("seg2")
		}
		return "https://api." + domain + path + "?token=" + tok("query") + "#" + tok("frag"), tokens, []string{"api." + domain}
	case has("resource_dir"):
		n := rapid.IntRange(0, 3).Draw(t, "dirs")
		var dirs []string
		for range n {
			dirs = append(dirs, secretToken.Draw(t, "dir"))
		}
		file := tok("file")
		return "/" + strings.Join(append(slices.Clone(dirs), file+".json"), "/"), tokens, dirs
	}
	// Free text: byte_size, payee_known.
	words := rapid.IntRange(1, 6).Draw(t, "words")
	var text []string
	for range words {
		text = append(text, tok("word"))
	}
	return strings.Join(text, " "), tokens, nil
}
