package declare

import (
	"errors"
	"strings"
	"testing"
)

// The names MCP tools use: camelCase fields, actions with '-' in a part.
// The field rule is a Cedar identifier's (ASCII, either case), the action
// rule dot-separated parts that may also hold '-'.
func TestNames(t *testing.T) {
	decl := func(action, field string) string {
		return `{"declaration":1,"action":"` + action + `","fields":{"` + field + `":{"type":"string","tier":"payload"}}}`
	}
	for _, c := range []struct{ action, field string }{
		{"fs.write_file", "dryRun"},
		{"everything.get-sum", "excludePatterns"},
		{"everything.trigger-long-running-operation", "x"},
		{"Everything.Get-Sum", "X1_y"},
		{"a-", "a"},
		{"a.b.c", "a_"},
		{strings.Repeat("a", 64), strings.Repeat("B", 64)},
	} {
		if d, err := Parse([]byte(decl(c.action, c.field))); err != nil || d.Action != c.action || d.Fields[0].Name != c.field {
			t.Errorf("Parse(%s, %s) = %v", c.action, c.field, err)
		}
	}
	for _, c := range []struct{ action, field, pointer string }{
		{"1a", "x", "/action"},
		{"-a", "x", "/action"},
		{"_a", "x", "/action"},
		{"a..b", "x", "/action"},
		{"a.", "x", "/action"},
		{".a", "x", "/action"},
		{"a.-b", "x", "/action"},
		{"a b", "x", "/action"},
		{"a/b", "x", "/action"},
		{"café", "x", "/action"},
		{strings.Repeat("a", 65), "x", "/action"},
		{"a", "get-sum", "/fields/get-sum"},
		{"a", "_x", "/fields/_x"},
		{"a", "1x", "/fields/1x"},
		{"a", "a.b", "/fields/a.b"},
		{"a", "é", "/fields/é"},
		{"a", strings.Repeat("x", 65), "/fields/" + strings.Repeat("x", 65)},
	} {
		_, err := Parse([]byte(decl(c.action, c.field)))
		var e *Error
		if !errors.As(err, &e) || e.Pointer != c.pointer {
			t.Errorf("Parse(%q, %q) = %v; want a refusal at %s", c.action, c.field, err, c.pointer)
		}
	}
	if !IsFieldName("dryRun") || IsFieldName("dry-run") || !IsActionName("fs.get-sum") || IsActionPart("fs.get-sum") || !IsActionPart("get-sum") {
		t.Error("IsFieldName, IsActionName, IsActionPart disagree with Parse")
	}
}

// A json field is payload only, and minimization lets any present value
// pass (null included) without letting anything of it cross.
func TestJSONField(t *testing.T) {
	d, err := Parse([]byte(`{"declaration":1,"action":"fs.edit_file","fields":{"path":{"type":"string","tier":"derived","projections":["resource_dir"]},"edits":{"type":"json","tier":"payload"},"head":{"type":"json","tier":"payload","optional":true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, edits := range []string{`[{"oldText":"SECRETOLD","newText":"SECRETNEW"}]`, `null`, `7`, `"SECRET"`, `{}`, `true`, `[]`} {
		res, err := d.Minimize([]byte(`{"path":"/srv/a/b.txt","edits":`+edits+`,"head":{"n":[1,2]}}`), Options{})
		if err != nil || string(res.Attributes) != `{"path":{"resource_dir":"/srv/a"}}` {
			t.Errorf("edits %s: %s, %v", edits, res.Attributes, err)
		}
	}
	_, err = d.Minimize([]byte(`{"path":"/srv/a/b.txt"}`), Options{})
	var e *Error
	if !errors.As(err, &e) || e.Pointer != "/edits" || !strings.Contains(e.Problem, "absent") {
		t.Errorf("a required json field absent: %v", err)
	}
	_, err = d.Minimize([]byte(`{"path":"/srv/a/b.txt","edits":[{"SECRETNAME":1.5}]}`), Options{})
	if !errors.As(err, &e) || e.Pointer != "/edits" || !strings.Contains(e.Problem, "strict domain") || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("a json value outside the strict domain: %v", err)
	}
	// Undeclarable argument names (with '-') are unclassified: they pass
	// to the digest and nothing of them crosses.
	res, err := d.Minimize([]byte(`{"path":"/srv/a/b.txt","edits":[],"dry-run":"SECRET"}`), Options{})
	if err != nil || string(res.Attributes) != `{"path":{"resource_dir":"/srv/a"}}` {
		t.Errorf("an undeclarable argument: %s, %v", res.Attributes, err)
	}
}

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func toolDecl(action, tool, fields string) string {
	return `{"declaration":1,"action":"` + action + `","tool":` + tool + `,"fields":` + fields + `}`
}

// The tool pin: its members' rules, and the action it fixes.
func TestToolPin(t *testing.T) {
	pin := func(server, name, digest string) string {
		return `{"server":"` + server + `","name":"` + name + `","definition_digest":"` + digest + `"}`
	}
	d, err := Parse([]byte(toolDecl("everything.get-sum", pin("everything", "get-sum", testDigest), `{"a":{"type":"integer","tier":"policy"}}`)))
	if err != nil {
		t.Fatal(err)
	}
	if d.Tool == nil || d.Tool.Server != "everything" || d.Tool.Name != "get-sum" || d.Tool.DefinitionDigest.String() != testDigest || !d.Reviewed() {
		t.Errorf("tool = %+v, reviewed %v", d.Tool, d.Reviewed())
	}
	if d, err := Parse([]byte(toolDecl("fs.write_file", "null", `{"a":{"type":"string","tier":"payload"}}`))); err != nil || d.Tool != nil {
		t.Errorf("a null tool is absent: %v, %+v", err, d)
	}
	long := strings.Repeat("x", 65)
	for _, c := range []struct{ name, action, tool, pointer, problem string }{
		{"missing server", "fs.a", `{"name":"a","definition_digest":"` + testDigest + `"}`, "/tool/server", "missing"},
		{"server with a dot", "fs.x.a", pin("fs.x", "a", testDigest), "/tool/server", "not ASCII letters"},
		{"server not starting with a letter", "fs.a", pin("1fs", "a", testDigest), "/tool/server", "not ASCII letters"},
		{"missing name", "fs.a", `{"server":"fs","definition_digest":"` + testDigest + `"}`, "/tool/name", "missing"},
		{"name with a space", "fs.a", pin("fs", "get sum", testDigest), "/tool/name", "cannot be declared"},
		{"name with a dot", "fs.a.b", pin("fs", "a.b", testDigest), "/tool/name", "cannot be declared"},
		{"name not ASCII", "fs.a", pin("fs", "café", testDigest), "/tool/name", "cannot be declared"},
		{"name too long to declare", "fs.a", pin("fs", long, testDigest), "/tool/name", "cannot be declared"},
		{"name too long", "fs.a", pin("fs", strings.Repeat("x", 1025), testDigest), "/tool/name", "more than 1024 bytes"},
		{"name with a control character", "fs.a", pin("fs", `a\u0007`, testDigest), "/tool/name", "control character"},
		{"name with a C1 control", "fs.a", pin("fs", `a\u0085`, testDigest), "/tool/name", "control character"},
		{"missing digest", "fs.a", `{"server":"fs","name":"a"}`, "/tool/definition_digest", "missing"},
		{"upper-case digest", "fs.a", pin("fs", "a", strings.ToUpper(testDigest)), "/tool/definition_digest", "lower-case hex"},
		{"short digest", "fs.a", pin("fs", "a", testDigest[:70]), "/tool/definition_digest", "lower-case hex"},
		{"another algorithm", "fs.a", pin("fs", "a", "sha512:"+testDigest[7:]), "/tool/definition_digest", "lower-case hex"},
		{"zero digest", "fs.a", pin("fs", "a", "sha256:"+strings.Repeat("0", 64)), "/tool/definition_digest", "all zeros"},
		{"unknown member", "fs.a", `{"server":"fs","name":"a","definition_digest":"` + testDigest + `","version":"1"}`, "", `unknown member "version"`},
		{"another action", "fs.b", pin("fs", "a", testDigest), "/action", "(fs.a)"},
		{"the action without its server", "a", pin("fs", "a", testDigest), "/action", "joined by '.'"},
		{"the action joined otherwise", "fs_a", pin("fs", "a", testDigest), "/action", "joined by '.'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(toolDecl(c.action, c.tool, `{"a":{"type":"string","tier":"payload"}}`)))
			var e *Error
			if !errors.As(err, &e) || e.Pointer != c.pointer || !strings.Contains(e.Problem, c.problem) {
				t.Errorf("Parse = %v; want a refusal at %q with %q", err, c.pointer, c.problem)
			}
		})
	}
}

// A tool's declaration may have no field: its attributes are {}; any
// argument it gets is unclassified. Other declarations need a field.
func TestToolWithoutArguments(t *testing.T) {
	d, err := Parse([]byte(toolDecl("fs.list_allowed_directories",
		`{"server":"fs","name":"list_allowed_directories","definition_digest":"`+testDigest+`"}`, `{}`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, params := range []string{`{}`, `{"extra":"SECRET"}`} {
		res, err := d.Minimize([]byte(params), Options{})
		if err != nil || string(res.Attributes) != `{}` {
			t.Errorf("Minimize(%s) = %s, %v", params, res.Attributes, err)
		}
	}
	table, err := d.TierTable().Canonical()
	if want := `{"action":"fs.list_allowed_directories","fields":[]}`; err != nil || string(table) != want {
		t.Errorf("tier table = %s, %v; want %s", table, err, want)
	}
	if _, err := Parse([]byte(`{"declaration":1,"action":"a","fields":{}}`)); err == nil {
		t.Error("a declaration without tool and without field parses")
	}
}

// The review marker: only false may be written; absent means reviewed.
func TestReviewed(t *testing.T) {
	decl := func(reviewed string) string {
		return `{"declaration":1,"action":"a",` + reviewed + `"fields":{"x":{"type":"string","tier":"policy"}}}`
	}
	for reviewed, want := range map[string]bool{``: true, `"reviewed":false,`: false, `"reviewed" : false ,`: false} {
		d, err := Parse([]byte(decl(reviewed)))
		if err != nil || d.Reviewed() != want {
			t.Errorf("%s: Parse = %v, reviewed %v; want %v", reviewed, err, d != nil && d.Reviewed(), want)
		}
	}
	for _, reviewed := range []string{`"reviewed":true,`, `"reviewed":null,`, `"reviewed":"false",`, `"reviewed":0,`, `"reviewed":[],`} {
		_, err := Parse([]byte(decl(reviewed)))
		var e *Error
		if !errors.As(err, &e) || e.Pointer != "/reviewed" || !strings.Contains(e.Problem, "only false") {
			t.Errorf("%s: Parse = %v; want a refusal at /reviewed", reviewed, err)
		}
	}
	if (&Declaration{}).Reviewed() != true {
		t.Error("the zero Declaration is unreviewed")
	}
}
