package declare_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"

	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/commit/project"
	"github.com/decisionledger/ledger/commit/tier"
	"github.com/decisionledger/ledger/entry"
)

// The leak guard. For every corpus action, property-generated calls carry
// secret tokens (upper-case letters, which nothing the ledger writes by
// itself contains) in every payload and derived value, inside the fixed
// scaffolding the value needs (a URL's scheme, an address's '@'), which is
// public vocabulary and not checked. No 4-character window of a secret may
// appear in the minimized attributes, in a signed ledger entry holding
// them, or in the message of a refused call, except inside an occurrence
// of what may cross by construction (leak says exactly how): each derived
// field's expected projection outputs (a domain, a host, a directory, a
// route template or "unmatched"), computed here from how the call was
// drawn, the raw value of each policy field, and the declaration's own
// names. An allowed value covers only its own occurrences, as a whole JSON
// value: two allowed directory names joined by '/' do not make "AAA/" of a
// secret allowed elsewhere, and the directory "/AAAAAA/AAAAAA" is allowed
// as itself.
//
// The guard checks itself on every call: the attributes of the same call
// with any one derived field's projection returning its input must be
// caught (mustCatchIdentity), so the guard can never pass vacuously.
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
				allowed := append(jsonStrings(names(d)), call.allowed...)
				checkNoLeak(t, "attributes", string(res.Attributes), call.secrets, allowed)
				mustCatchIdentity(t, d, call, res.Attributes, allowed)

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

// names is the declaration's own vocabulary: the action, field and
// projection names, route templates and allowlist names.
func names(d *declare.Declaration) []string {
	parts := []string{d.Action}
	for _, f := range d.Fields {
		parts = append(parts, f.Name)
		parts = append(parts, f.Projections...)
		parts = append(parts, f.Routes...)
		if f.Allowlist != "" {
			parts = append(parts, f.Allowlist)
		}
	}
	return parts
}

// jsonText is v as JSON, the way it appears in attributes and entries
// ('/' and the other characters the tests use are not escaped).
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// jsonStrings is each string as a JSON string, quotes included.
func jsonStrings(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = jsonText(v)
	}
	return out
}

// leak returns the first 4-character window of a secret that out holds
// outside every occurrence of the allowed texts, or "" if there is none.
// Each occurrence of an allowed text in out (longest texts first) is
// blanked out with a byte no secret holds before the windows are looked
// for, so a window counts as allowed only where it lies inside an allowed
// occurrence, never because it happens to be a substring of some allowed
// text, or of two allowed texts side by side.
func leak(out string, secrets, allowed []string) (window, secret string) {
	byLength := slices.Clone(allowed)
	slices.SortStableFunc(byLength, func(a, b string) int { return len(b) - len(a) })
	for _, a := range byLength {
		if a != "" {
			out = strings.ReplaceAll(out, a, "\x00")
		}
	}
	for _, s := range secrets {
		for i := 0; i+4 <= len(s); i++ {
			if w := s[i : i+4]; strings.Contains(out, w) {
				return w, s
			}
		}
	}
	return "", ""
}

func checkNoLeak(t *rapid.T, where, out string, secrets, allowed []string) {
	if w, s := leak(out, secrets, allowed); w != "" {
		t.Fatalf("%s leaks %q of a raw value %q:\n%s", where, w, s, out)
	}
}

// mustCatchIdentity replaces, one derived field at a time, the field's
// attributes with what a projection that returned its input would give,
// and fails unless leak catches it: a guard that cannot fail proves
// nothing. (A string list with no items has nothing to leak.)
func mustCatchIdentity(t *rapid.T, d *declare.Declaration, c call, attributes []byte, allowed []string) {
	var attrs map[string]any
	if err := json.Unmarshal(attributes, &attrs); err != nil {
		t.Fatal(err)
	}
	var params map[string]any
	if err := json.Unmarshal(c.raw, &params); err != nil {
		t.Fatal(err)
	}
	for _, f := range d.Fields {
		if f.Tier != tier.Derived {
			continue
		}
		if items, ok := params[f.Name].([]any); ok && len(items) == 0 {
			continue
		}
		mutated := maps.Clone(attrs)
		mutated[f.Name] = map[string]any{f.Projections[0]: params[f.Name]}
		out := jsonText(mutated)
		if w, _ := leak(out, c.secrets, allowed); w == "" {
			t.Fatalf("the guard misses %s's projection %s returning its input:\n%s", f.Name, f.Projections[0], out)
		}
	}
}

type call struct {
	raw        []byte
	secrets    []string // raw payload and derived values
	allowed    []string // JSON values that may cross by construction
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
			allowed = append(allowed, jsonText(v))
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
			allowed = append(allowed, jsonStrings(out)...)
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
	c.raw, c.allowed = raw, allowed
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
// its projections must drop them, and returns the tokens and the exact
// outputs its projections must give (the only text of the value that may
// cross).
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
		path, route := "/v1/invoices/"+tok("id"), "/v1/invoices/{id}"
		if rapid.Bool().Draw(t, "unmatched") {
			path, route = "/"+tok("seg")+"/"+tok("seg2"), project.Unmatched
		}
		if has("endpoint_host") {
			keep = append(keep, "api."+domain)
		}
		if has("route_shape") {
			keep = append(keep, route)
		}
		return "https://api." + domain + path + "?token=" + tok("query") + "#" + tok("frag"), tokens, keep
	case has("resource_dir"):
		n := rapid.IntRange(0, 3).Draw(t, "dirs")
		var dirs []string
		for range n {
			dirs = append(dirs, secretToken.Draw(t, "dir"))
		}
		file := tok("file")
		return "/" + strings.Join(append(slices.Clone(dirs), file+".json"), "/"), tokens, []string{"/" + strings.Join(dirs, "/")}
	}
	// Free text: byte_size, payee_known.
	words := rapid.IntRange(1, 6).Draw(t, "words")
	var text []string
	for range words {
		text = append(text, tok("word"))
	}
	return strings.Join(text, " "), tokens, nil
}

// leak on literal outputs. The first two are the cases rapid found about
// once in a few thousand calls while "allowed" was a window of any allowed
// text: directory names that are allowed one by one, joined by '/'. The
// others are projections that return (part of) their input, which must be
// caught even where every window of the secret is also a window of some
// allowed text.
func TestLeak(t *testing.T) {
	for _, c := range []struct {
		name             string
		out              string
		secrets, allowed []string
		want             string // the window reported, or ""
	}{
		{"two allowed directories", `{"purpose":"aaa","resource_path":{"resource_dir":"/AAAYBB/AAAAAA"}}`,
			[]string{"AAAAAA", "AAAYBBAAAYBB//"}, []string{`"/AAAYBB/AAAAAA"`, `"aaa"`}, ""},
		{"three allowed directories", `{"local_path":{"resource_dir":"/AAAAAA/AAAAAA/AAAAAA"},"size_bytes":0}`,
			[]string{"AAAAAA", "AAAAAAAAAAAA//"}, []string{`"/AAAAAA/AAAAAA/AAAAAA"`}, ""},
		{"resource_dir returning its input", `{"resource_path":{"resource_dir":"/AAAYBB/QQQQQQ.json"}}`,
			[]string{"QQQQQQ"}, []string{`"/AAAYBB"`}, "QQQQ"},
		{"resource_dir keeping a file named like its directory", `{"resource_path":{"resource_dir":"/AAAAAA/AAAAAA.json"}}`,
			[]string{"AAAAAA"}, []string{`"/AAAAAA"`}, "AAAA"},
		{"recipient_domain returning its input", `{"recipient":{"recipient_domain":"LOCALX.OTHERY@example.com"}}`,
			[]string{"LOCALX", "OTHERY"}, []string{`"example.com"`}, "LOCA"},
		{"endpoint_host keeping the path", `{"url":{"endpoint_host":"api.example.com/INVOICE"}}`,
			[]string{"INVOICE"}, []string{`"api.example.com"`}, "INVO"},
		{"a secret in an error message", `declare: action read_record: /resource_path: projection resource_dir: bad segment SEGMENT`,
			[]string{"SEGMENT"}, []string{"read_record", "resource_path", "resource_dir"}, "SEGM"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got, _ := leak(c.out, c.secrets, c.allowed); got != c.want {
				t.Errorf("leak = %q, want %q", got, c.want)
			}
		})
	}
}
