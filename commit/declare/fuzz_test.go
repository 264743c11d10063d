package declare_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
)

// Parse either refuses a file or reads a declaration whose canonical form
// is itself a file that reads back to the same canonical form and digest.
func FuzzParse(f *testing.F) {
	for _, dir := range []string{filepath.Join("..", "..", "testdata", "declarations"), filepath.Join("testdata", "mcp", "drafts")} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := declare.Parse(data)
		if err != nil {
			return
		}
		c, err := d.Canonical()
		if err != nil {
			t.Fatalf("Canonical: %v", err)
		}
		d2, err := declare.Parse(c)
		if err != nil {
			t.Fatalf("the canonical form does not parse: %v\n%s", err, c)
		}
		c2, _ := d2.Canonical()
		if string(c2) != string(c) || d2.Reviewed() != d.Reviewed() {
			t.Fatalf("canonical round trip:\n%s\n%s", c, c2)
		}
		if _, err := d.Digest(); err != nil {
			t.Fatal(err)
		}
	})
}

// A draft is refused or parses, unreviewed, all payload, for any
// inputSchema and names.
func FuzzDraftFromInputSchema(f *testing.F) {
	f.Add("fs", "edit_file", "Edit.", []byte(`{"type":"object","properties":{"path":{"type":"string"},"edits":{"type":"array","items":{"type":"object"}},"dry-run":{"type":"boolean"}},"required":["path"]}`))
	f.Add("everything", "get-sum", "", []byte(`{"properties":{"a":{"type":"number"},"l":{"type":"array","items":{"type":"string"}}}}`))
	f.Add("x", "y", "d\u0301", []byte(`{}`))
	digest, _ := commit.ParseDigest("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	f.Fuzz(func(t *testing.T, server, tool, description string, schema []byte) {
		draft, _, err := declare.DraftFromInputSchema(server, tool, description, schema, digest)
		if err != nil {
			return
		}
		d, err := declare.Parse(draft)
		if err != nil {
			t.Fatalf("the draft does not parse: %v\n%s", err, draft)
		}
		if d.Reviewed() || d.Tool == nil || d.Action != server+"."+tool {
			t.Fatalf("draft %s: reviewed %v, tool %+v", d.Action, d.Reviewed(), d.Tool)
		}
		for _, fl := range d.Fields {
			if fl.Tier != "payload" {
				t.Fatalf("field %s is %s", fl.Name, fl.Tier)
			}
		}
	})
}
