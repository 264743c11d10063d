package declare_test

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/commit/tier"
)

var update = flag.Bool("update", false, "rewrite the golden drafts in testdata/mcp/drafts")

// mcpTool is one tool of a tools/list result.
type mcpTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	raw         json.RawMessage
}

// listedTools reads a tools/list result kept in testdata/mcp: the tools
// of an upstream server's published package, as it lists them.
func listedTools(t *testing.T, file string) []mcpTool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "mcp", file))
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Tools []json.RawMessage }
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	var tools []mcpTool
	for _, raw := range list.Tools {
		var tool mcpTool
		if err := json.Unmarshal(raw, &tool); err != nil {
			t.Fatal(err)
		}
		tool.raw = raw
		tools = append(tools, tool)
	}
	return tools
}

// toolDigest stands in for the gateway's definition digest in these
// tests: SHA-256 of the tool's canonical JSON as listed.
func toolDigest(t *testing.T, tool mcpTool) commit.Digest {
	c, err := commit.Canonicalize(tool.raw)
	if err != nil {
		t.Fatalf("%s: %v", tool.Name, err)
	}
	return sha256.Sum256(c)
}

// The drafts of the real tools of two published MCP servers
// (@modelcontextprotocol/server-filesystem and server-everything,
// 2026.8.31, their tools/list kept in testdata/mcp), against golden files
// reviewed by hand (go test -run TestDraftGolden -update rewrites them;
// review the diff). Each draft parses, is unreviewed, pinned, and lets
// nothing cross.
func TestDraftGolden(t *testing.T) {
	for server, file := range map[string]string{
		"fs":         "server-filesystem-2026.8.31.tools.json",
		"everything": "server-everything-2026.8.31.tools.json",
	} {
		tools := listedTools(t, file)
		if len(tools) < 10 {
			t.Fatalf("%s: %d tools", file, len(tools))
		}
		for _, tool := range tools {
			t.Run(server+"."+tool.Name, func(t *testing.T) {
				digest := toolDigest(t, tool)
				draft, skipped, err := declare.DraftFromInputSchema(server, tool.Name, tool.Description, tool.InputSchema, digest)
				if err != nil {
					t.Fatal(err)
				}
				if len(skipped) != 0 {
					t.Errorf("skipped %v", skipped)
				}
				golden := filepath.Join("testdata", "mcp", "drafts", server+"."+tool.Name+".json")
				if *update {
					if err := os.WriteFile(golden, draft, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatal(err)
				}
				if string(draft) != string(want) {
					t.Errorf("draft differs from %s:\n%s", golden, draft)
				}
				d, err := declare.Parse(draft)
				if err != nil {
					t.Fatal(err)
				}
				if d.Reviewed() || d.Tool == nil || d.Tool.Server != server || d.Tool.Name != tool.Name || d.Tool.DefinitionDigest != digest || d.Action != server+"."+tool.Name {
					t.Errorf("draft %s: reviewed %v, tool %+v", d.Action, d.Reviewed(), d.Tool)
				}
				for _, f := range d.Fields {
					if f.Tier != tier.Payload {
						t.Errorf("field %s is %s", f.Name, f.Tier)
					}
				}
			})
		}
	}
}

// One draft written out by hand: edit_file's inputSchema (camelCase
// names, an array of objects) as server-filesystem lists it.
func TestDraftEditFile(t *testing.T) {
	var edit mcpTool
	for _, tool := range listedTools(t, "server-filesystem-2026.8.31.tools.json") {
		if tool.Name == "edit_file" {
			edit = tool
		}
	}
	digest, _ := commit.ParseDigest("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	draft, skipped, err := declare.DraftFromInputSchema("fs", "edit_file", "Edit a text file.", edit.InputSchema, digest)
	if err != nil || len(skipped) != 0 {
		t.Fatalf("%v, skipped %v", err, skipped)
	}
	const want = `{
  "declaration": 1,
  "action": "fs.edit_file",
  "reviewed": false,
  "description": "Edit a text file.",
  "tool": {
    "server": "fs",
    "name": "edit_file",
    "definition_digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
  },
  "fields": {
    "dryRun": {
      "type": "boolean",
      "tier": "payload",
      "optional": true,
      "description": "Preview changes using git-style diff format"
    },
    "edits": {
      "type": "json",
      "tier": "payload"
    },
    "path": {
      "type": "string",
      "tier": "payload"
    }
  }
}
`
	if string(draft) != want {
		t.Errorf("draft:\n%s\nwant:\n%s", draft, want)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "declarations.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```json\n"+want+"```\n") {
		t.Error("docs/declarations.md §8 does not show this draft")
	}
}

// Types, optionality, descriptions, undeclarable names and refusals, on
// hand-written inputSchemas.
func TestDraftFromInputSchema(t *testing.T) {
	digest, _ := commit.ParseDigest("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	schema := `{"type":"object","required":["s","dry-run","ghost"],"properties":{
		"s":{"type":"string","enum":["a","b"]},
		"i":{"type":"integer","minimum":0.5},
		"b":{"type":"boolean","description":"Cafe\u0301 <b>"},
		"u":{"type":"boolean","description":"Tai Yo \ud839\udef5"},
		"l":{"type":"array","items":{"type":"string"}},
		"n":{"type":"number"},
		"o":{"type":"object","properties":{"x":{"type":"string"}}},
		"li":{"type":"array","items":{"type":"integer"}},
		"lr":{"type":"array","items":{"$ref":"#/definitions/x"}},
		"t":{"type":["string","null"]},
		"r":{"$ref":"#/definitions/x","type":"string"},
		"any":true,
		"none":{},
		"dry-run":{"type":"boolean"},
		"_x":{"type":"string"},
		"ünï":{"type":"string"}
	}}`
	draft, skipped, err := declare.DraftFromInputSchema("srv", "get-sum", "Adds.", []byte(schema), digest)
	if err != nil {
		t.Fatal(err)
	}
	d, err := declare.Parse(draft)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range d.Fields {
		s := string(f.Type)
		if f.Optional {
			s += "?"
		}
		if f.Description != "" {
			s += " " + f.Description
		}
		got[f.Name] = s
	}
	want := map[string]string{
		"s": "string", "i": "integer?", "b": "boolean? Caf\u00e9 <b>", "l": "string_list?", "n": "json?", "o": "json?",
		"li": "json?", "lr": "json?", "t": "json?", "r": "json?", "any": "json?", "none": "json?",
		"u": "boolean?", // U+1E6F5's normalization depends on the Unicode version: left out
	}
	if len(got) != len(want) {
		t.Errorf("fields %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("field %s: %q, want %q", k, got[k], v)
		}
	}
	if !strings.Contains(string(draft), `"Café <b>"`) {
		t.Errorf("the description is not kept readable (NFC, no HTML escapes):\n%s", draft)
	}
	var names []string
	for _, s := range skipped {
		names = append(names, s.Name)
		if !strings.Contains(s.Reason, "not a field name") || !strings.Contains(s.Reason, "parameter digest") {
			t.Errorf("skipped %s: %s", s.Name, s.Reason)
		}
	}
	if strings.Join(names, ",") != "_x,dry-run,ünï" {
		t.Errorf("skipped %v", names)
	}
	if d.Action != "srv.get-sum" || d.Description != "Adds." {
		t.Errorf("action %s, description %q", d.Action, d.Description)
	}

	// No properties: a tool without arguments.
	for _, s := range []string{`{"type":"object","properties":{}}`, `{"type":"object"}`, `{}`} {
		draft, _, err := declare.DraftFromInputSchema("fs", "list_allowed_directories", "", []byte(s), digest)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if d, err := declare.Parse(draft); err != nil || len(d.Fields) != 0 || !strings.Contains(string(draft), `"fields": {}`) {
			t.Errorf("%s: %v\n%s", s, err, draft)
		}
	}

	for _, c := range []struct {
		name, server, tool, schema string
		digest                     commit.Digest
		pointer, problem           string
	}{
		{"a tool name with a space", "fs", "get sum", `{}`, digest, "/tool/name", "cannot be declared"},
		{"a tool name with a dot", "fs", "a.b", `{}`, digest, "/tool/name", "cannot be declared"},
		{"an empty tool name", "fs", "", `{}`, digest, "/tool/name", "cannot be declared"},
		{"a server with a dot", "f.s", "a", `{}`, digest, "/tool/server", "not ASCII"},
		{"too long an action", "fs", strings.Repeat("a", 62), `{}`, digest, "/action", "longer than 64"},
		{"a zero digest", "fs", "a", `{}`, commit.Digest{}, "/tool/definition_digest", "all zeros"},
		{"not an object", "fs", "a", `[]`, digest, "", "not a JSON object"},
		{"not JSON", "fs", "a", `{"type":`, digest, "", "not JSON"},
		{"null", "fs", "a", `null`, digest, "", "not a JSON object"},
		{"two values", "fs", "a", `{} {}`, digest, "", "not one JSON value"},
		{"another type", "fs", "a", `{"type":"string"}`, digest, "/type", `not "object"`},
		{"properties not an object", "fs", "a", `{"properties":[]}`, digest, "/properties", "not an object"},
		{"required not a list", "fs", "a", `{"required":"x"}`, digest, "/required", "not a list"},
		{"required holds a number", "fs", "a", `{"required":["x",1]}`, digest, "/required/1", "not a string"},
		{"a repeated property", "fs", "a", `{"properties":{"x":{"type":"string"},"x":{"type":"integer"}}}`, digest, "", "repeats a member name"},
		{"too large", "fs", "a", `{"description":"` + strings.Repeat("x", declare.MaxInputSchemaBytes) + `"}`, digest, "", "more than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := declare.DraftFromInputSchema(c.server, c.tool, "", []byte(c.schema), c.digest)
			var e *declare.Error
			if !errors.As(err, &e) || e.Pointer != c.pointer || !strings.Contains(e.Problem, c.problem) || e.Code != declare.CodeDraftRefused {
				t.Errorf("DraftFromInputSchema = %v; want a refusal (%s) at %q with %q", err, declare.CodeDraftRefused, c.pointer, c.problem)
			}
		})
	}
}
