package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit/declare"
)

// ledger-mcp declare writes an unreviewed, pinned draft per tool and never
// overwrites one; ledger-mcp check reports each tool's status and fails
// while a declared tool is hidden.
func TestDeclareAndCheck(t *testing.T) {
	t.Parallel()
	n := startNotes(t)
	catalog, policies := notesCatalog(t, n.pins(t))
	l := startLedger(t, catalog, policies)
	drafts := t.TempDir()
	cfg, _ := writeGatewayConfig(t, l, drafts, map[string]any{"notes": map[string]any{"url": n.url}}, nil)

	out, err := exec.Command(bins.ledgerMCP, "declare", "--config", cfg, "--server", "notes", "--out", drafts).CombinedOutput()
	if err != nil {
		t.Fatalf("declare: %v\n%s", err, out)
	}
	pins := n.pins(t)
	for tool, pin := range pins {
		b, err := os.ReadFile(filepath.Join(drafts, "notes."+tool+".json"))
		if err != nil {
			t.Fatalf("%s: %v\n%s", tool, err, out)
		}
		d, err := declare.Parse(b)
		if err != nil {
			t.Fatalf("%s: the draft does not parse: %v", tool, err)
		}
		if d.Reviewed() || d.Tool == nil || d.Tool.DefinitionDigest.String() != pin || d.Action != "notes."+tool {
			t.Fatalf("%s: draft %s", tool, b)
		}
		for _, f := range d.Fields {
			if f.Tier != "payload" {
				t.Errorf("%s: field %s is %s in a draft", tool, f.Name, f.Tier)
			}
		}
	}

	check := func() (map[string]string, error) {
		out, err := exec.Command(bins.ledgerMCP, "check", "--config", cfg).Output()
		status := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var r struct{ Name, Status string }
			if json.Unmarshal([]byte(line), &r) == nil {
				status[r.Name] = r.Status
			}
		}
		return status, err
	}
	status, err := check()
	if err == nil || status["notes.write_note"] != "unreviewed" || len(status) != len(pins) {
		t.Fatalf("check on drafts: %v (exit %v)", status, err)
	}

	// A reviewer keeps write_note's draft as it is: reviewed, exposed.
	path := filepath.Join(drafts, "notes.write_note.json")
	b, _ := os.ReadFile(path)
	var m map[string]any
	json.Unmarshal(b, &m)
	delete(m, "reviewed")
	b, _ = json.Marshal(m)
	os.WriteFile(path, b, 0o644)
	if status, _ := check(); status["notes.write_note"] != "exposed" || status["notes.move_note"] != "unreviewed" {
		t.Fatalf("after review: %v", status)
	}

	out, err = exec.Command(bins.ledgerMCP, "declare", "--config", cfg, "--server", "notes", "--out", drafts).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "exists; left as it is") {
		t.Fatalf("declare again: %v\n%s", err, out)
	}
	if again, _ := os.ReadFile(path); string(again) != string(b) {
		t.Fatal("declare overwrote a reviewed declaration")
	}

	n.rugPull()
	if status, err := check(); err == nil || status["notes.write_note"] != "pin_mismatch" {
		t.Fatalf("after a rug pull: %v (exit %v)", status, err)
	}
}
