package declare_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cedar-policy/cedar-go/types"
	"github.com/cedar-policy/cedar-go/x/exp/schema"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/decisionledger/ledger/commit/declare"
)

func corpusDecls(t *testing.T) map[string]*declare.Declaration {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "declarations", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	out := map[string]*declare.Declaration{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := declare.Parse(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[d.Action] = d
	}
	return out
}

// The generated Cedar schema is read and resolved by cedar-go, per action
// and for the whole corpus, and has the context the declaration says.
func TestCedarSchema(t *testing.T) {
	decls := corpusDecls(t)
	var all []*declare.Declaration
	for _, d := range decls {
		all = append(all, d)
		var s schema.Schema
		if err := s.UnmarshalCedar(declare.CedarSchema(d)); err != nil {
			t.Fatalf("%s: cedar-go refuses the schema: %v\n%s", d.Action, err, declare.CedarSchema(d))
		}
		if _, err := s.Resolve(); err != nil {
			t.Fatalf("%s: cedar-go cannot resolve the schema: %v", d.Action, err)
		}
	}
	var s schema.Schema
	if err := s.UnmarshalCedar(declare.CedarSchema(all...)); err != nil {
		t.Fatal(err)
	}
	r, err := s.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	for action := range decls {
		if _, ok := r.Actions[types.NewEntityUID("Action", types.String(action))]; !ok {
			t.Errorf("action %s missing from the resolved schema", action)
		}
	}
	// One schema written out by hand: a generator change shows here.
	const want = `// Generated from action declarations (docs/declarations.md); do not edit.
entity Agent;

entity Tool;

action "send_email" appliesTo {
	principal: Agent,
	resource: Tool,
	context: {
		attachment_hashes?: Set<String>,
		body: {
			byte_size: Long
		},
		recipient: {
			recipient_domain: String
		}
	}
};
`
	if got := string(declare.CedarSchema(decls["send_email"])); got != want {
		t.Errorf("send_email Cedar schema:\n%s\nwant:\n%s", got, want)
	}
}

// The generated JSON Schema compiles under the 2020-12 metaschema, accepts
// the corpus attributes and refuses anything that would widen disclosure.
func TestJSONSchema(t *testing.T) {
	decls := corpusDecls(t)
	compile := func(d *declare.Declaration) *jsonschema.Schema { return compileSchema(t, d) }
	valid := func(s *jsonschema.Schema, attrs string) error {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(attrs))
		if err != nil {
			t.Fatal(err)
		}
		return s.Validate(v)
	}
	for _, d := range decls {
		compile(d)
	}
	email := compile(decls["send_email"])
	if err := valid(email, `{"attachment_hashes":["sha256:9f86"],"body":{"byte_size":35},"recipient":{"recipient_domain":"example.org"}}`); err != nil {
		t.Errorf("corpus attributes refused: %v", err)
	}
	if err := valid(email, `{"body":{"byte_size":35},"recipient":{"recipient_domain":"example.org"}}`); err != nil {
		t.Errorf("attributes without the optional field refused: %v", err)
	}
	for name, attrs := range map[string]string{
		"a payload field":           `{"body":{"byte_size":35},"recipient":{"recipient_domain":"example.org"},"subject":"Invoice 4711"}`,
		"the raw derived value":     `{"body":{"byte_size":35},"recipient":"bob.smith@example.org"}`,
		"an extra projection":       `{"body":{"byte_size":35},"recipient":{"recipient_domain":"example.org","local_part":"bob"}}`,
		"an unknown attribute":      `{"body":{"byte_size":35},"recipient":{"recipient_domain":"example.org"},"x":1}`,
		"a missing required field":  `{"recipient":{"recipient_domain":"example.org"}}`,
		"a negative size":           `{"body":{"byte_size":-1},"recipient":{"recipient_domain":"example.org"}}`,
		"a size of the wrong type":  `{"body":{"byte_size":"35"},"recipient":{"recipient_domain":"example.org"}}`,
		"a list of the wrong items": `{"attachment_hashes":[1],"body":{"byte_size":35},"recipient":{"recipient_domain":"example.org"}}`,
	} {
		if err := valid(email, attrs); err == nil {
			t.Errorf("send_email schema accepts %s", name)
		}
	}
	http := compile(decls["http_request"])
	if err := valid(http, `{"method":"GET","url":{"endpoint_host":"api.example.com","route_shape":"/v1/invoices/inv-88231"}}`); err == nil {
		t.Errorf("http_request schema accepts a route that is not a declared template")
	}
	if err := valid(http, `{"method":"GET","url":{"endpoint_host":"api.example.com","route_shape":"unmatched"}}`); err != nil {
		t.Errorf("http_request schema refuses unmatched: %v", err)
	}
	var parsed map[string]any
	if err := json.Unmarshal(decls["make_payment"].JSONSchema(), &parsed); err != nil || parsed["additionalProperties"] != false {
		t.Errorf("make_payment schema: %v, additionalProperties %v", err, parsed["additionalProperties"])
	}
}

// MCP-shaped declarations through both generators: camelCase attributes,
// an action with '-', json payload fields (no attribute), a tool without
// arguments (an empty context) and fields named by Cedar reserved words,
// which the schema writes as strings.
func TestGeneratorsMCPNames(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	parse := func(s string) *declare.Declaration {
		d, err := declare.Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	edit := parse(`{"declaration":1,"action":"fs.edit_file","fields":{"path":{"type":"string","tier":"derived","projections":["resource_dir"]},` +
		`"dryRun":{"type":"boolean","tier":"policy","optional":true},"edits":{"type":"json","tier":"payload"},"headLines":{"type":"integer","tier":"policy","optional":true}}}`)
	sum := parse(`{"declaration":1,"action":"everything.get-sum","tool":{"server":"everything","name":"get-sum","definition_digest":"` + digest + `"},` +
		`"fields":{"a":{"type":"integer","tier":"policy"},"in":{"type":"boolean","tier":"policy"},"if":{"type":"string","tier":"derived","projections":["byte_size"]},"is":{"type":"json","tier":"payload"}}}`)
	none := parse(`{"declaration":1,"action":"fs.list_allowed_directories","tool":{"server":"fs","name":"list_allowed_directories","definition_digest":"` + digest + `"},"fields":{}}`)
	cedar := declare.CedarSchema(edit, sum, none)
	const want = `// Generated from action declarations (docs/declarations.md); do not edit.
entity Agent;

entity Tool;

action "everything.get-sum" appliesTo {
	principal: Agent,
	resource: Tool,
	context: {
		a: Long,
		"if": {
			byte_size: Long
		},
		"in": Bool
	}
};

action "fs.edit_file" appliesTo {
	principal: Agent,
	resource: Tool,
	context: {
		dryRun?: Bool,
		headLines?: Long,
		path: {
			resource_dir: String
		}
	}
};

action "fs.list_allowed_directories" appliesTo {
	principal: Agent,
	resource: Tool,
	context: {}
};
`
	if string(cedar) != want {
		t.Errorf("Cedar schema:\n%s\nwant:\n%s", cedar, want)
	}
	var s schema.Schema
	if err := s.UnmarshalCedar(cedar); err != nil {
		t.Fatalf("cedar-go refuses the schema: %v", err)
	}
	r, err := s.Resolve()
	if err != nil {
		t.Fatalf("cedar-go cannot resolve the schema: %v", err)
	}
	for _, a := range []string{"fs.edit_file", "everything.get-sum", "fs.list_allowed_directories"} {
		if _, ok := r.Actions[types.NewEntityUID("Action", types.String(a))]; !ok {
			t.Errorf("action %s missing from the resolved schema", a)
		}
	}

	valid := func(d *declare.Declaration, attrs string) error {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(attrs))
		if err != nil {
			t.Fatal(err)
		}
		return compileSchema(t, d).Validate(v)
	}
	for _, c := range []struct {
		d     *declare.Declaration
		attrs string
		ok    bool
	}{
		{edit, `{"dryRun":true,"headLines":10,"path":{"resource_dir":"/srv"}}`, true},
		{edit, `{"path":{"resource_dir":"/srv"}}`, true},
		{edit, `{"dryrun":true,"path":{"resource_dir":"/srv"}}`, false}, // names are case-sensitive
		{edit, `{"edits":[],"path":{"resource_dir":"/srv"}}`, false},    // a json payload field never crosses
		{sum, `{"a":1,"if":{"byte_size":3},"in":false}`, true},
		{sum, `{"a":1,"if":{"byte_size":3},"in":false,"is":null}`, false},
		{none, `{}`, true},
		{none, `{"x":1}`, false},
	} {
		if err := valid(c.d, c.attrs); (err == nil) != c.ok {
			t.Errorf("%s: %s: %v; want ok=%v", c.d.Action, c.attrs, err, c.ok)
		}
	}
	// What Minimize gives is what the schema accepts.
	res, err := edit.Minimize([]byte(`{"path":"/srv/x","edits":[{"oldText":"a","newText":"b"}],"dryRun":false}`), declare.Options{})
	if err != nil || string(res.Attributes) != `{"dryRun":false,"path":{"resource_dir":"/srv"}}` {
		t.Fatalf("Minimize = %s, %v", res.Attributes, err)
	}
	if err := valid(edit, string(res.Attributes)); err != nil {
		t.Errorf("the schema refuses Minimize's attributes: %v", err)
	}
}
