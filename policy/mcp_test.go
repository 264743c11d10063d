package policy_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/policy"
)

// MCP tools' declarations: policies read camelCase attributes (Cedar
// names are case-sensitive), name actions with '-', read a field named
// by a reserved word as context["in"], and may name a tool without
// arguments (an empty context).
func TestMCPDeclarations(t *testing.T) {
	var decls []*declare.Declaration
	for _, s := range []string{
		`{"declaration":1,"action":"fs.edit_file","fields":{"dryRun":{"type":"boolean","tier":"policy","optional":true},"edits":{"type":"json","tier":"payload"},"path":{"type":"string","tier":"derived","projections":["resource_dir"]}}}`,
		`{"declaration":1,"action":"everything.get-sum","tool":{"server":"everything","name":"get-sum","definition_digest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},"fields":{"a":{"type":"integer","tier":"policy"},"in":{"type":"boolean","tier":"policy"}}}`,
		`{"declaration":1,"action":"fs.list_allowed_directories","tool":{"server":"fs","name":"list_allowed_directories","definition_digest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},"fields":{}}`,
	} {
		d, err := declare.Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		decls = append(decls, d)
	}
	const src = `@id("dry-runs")
permit (principal, action == Action::"fs.edit_file", resource) when { context has dryRun && context.dryRun && context.path.resource_dir == "/srv" };

@id("small-sums")
permit (principal, action == Action::"everything.get-sum", resource) when { context.a < 10 && !context["in"] };

@id("list")
permit (principal, action == Action::"fs.list_allowed_directories", resource);
`
	s, err := policy.New([]policy.File{{Name: "mcp.cedar", Bytes: []byte(src)}}, decls)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		action, attrs string
		want          entry.Decision
		ids           []string
	}{
		{"fs.edit_file", `{"dryRun":true,"path":{"resource_dir":"/srv"}}`, entry.Allow, []string{"dry-runs"}},
		{"fs.edit_file", `{"path":{"resource_dir":"/srv"}}`, entry.Deny, []string{}},
		{"everything.get-sum", `{"a":3,"in":false}`, entry.Allow, []string{"small-sums"}},
		{"everything.get-sum", `{"a":3,"in":true}`, entry.Deny, []string{}},
		{"fs.list_allowed_directories", `{}`, entry.Allow, []string{"list"}},
	} {
		r := s.Decide("agent-1", c.action, []byte(c.attrs))
		if r.Invalid != nil || r.Decision != c.want || !slices.Equal(r.Determining, c.ids) {
			t.Errorf("%s %s: %+v; want %s %v", c.action, c.attrs, r, c.want, c.ids)
		}
	}
	if r := s.Decide("agent-1", "fs.edit_file", []byte(`{"dryrun":true,"path":{"resource_dir":"/srv"}}`)); r.Invalid == nil {
		t.Errorf("an attribute of another case is admitted: %+v", r)
	}

	// The wrong case is an undeclared attribute, and the nearest is named.
	bad := `@id("wrong-case")` + "\n" + `permit (principal, action == Action::"fs.edit_file", resource) when { context.dryrun };` + "\n"
	_, err = policy.New([]policy.File{{Name: "bad.cedar", Bytes: []byte(bad)}}, decls)
	var ae *policy.AttributeError
	if !errors.As(err, &ae) || ae.Attribute != "dryrun" || ae.Nearest != "dryRun" || !strings.Contains(err.Error(), "bad.cedar:2:") {
		t.Errorf("wrong case: %v (%+v)", err, ae)
	}
	// A json payload field is never an attribute.
	bad = `@id("edits")` + "\n" + `permit (principal, action == Action::"fs.edit_file", resource) when { context has edits };` + "\n"
	if _, err := policy.New([]policy.File{{Name: "bad.cedar", Bytes: []byte(bad)}}, decls); !errors.As(err, &ae) || !ae.Payload {
		t.Errorf("a json payload field: %v", err)
	}
}
