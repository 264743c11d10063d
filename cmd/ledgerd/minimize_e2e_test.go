package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/apitest"
)

// TestMinimizationEndToEnd runs the real binaries: a workload computes
// the commitment, minimized attributes and applied-tiers digest of a call
// from its declaration (examples/workload), a mediator appends them to a
// ledgerd that checks them against its catalog, and ledger-verify confirms
// from an export, offline, that the entry committed to exactly the raw
// parameters and was minimized under the declaration.
func TestMinimizationEndToEnd(t *testing.T) {
	t.Parallel() // a process of its own on its own directory and port
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	ledgerd, verifier := buildBinaries(t)
	workload := built(t, "../../examples/workload")
	dir := t.TempDir()
	d := startDaemon(t, ledgerd, dir) // creates the data directory
	d.cmd.Process.Kill()
	d.cmd.Wait()
	catalog, err := filepath.Abs(apitest.CorpusDir)
	if err != nil {
		t.Fatal(err)
	}
	configPath := filepath.Join(dir, "data", "ledgerd.json")
	var cfg map[string]any
	b, err := os.ReadFile(configPath)
	if err != nil || json.Unmarshal(b, &cfg) != nil {
		t.Fatalf("reading the config: %v", err)
	}
	cfg["catalog_dir"] = catalog
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(configPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, ledgerd, dir)
	defer func() { d.cmd.Process.Kill(); d.cmd.Wait() }()
	url := "http://" + d.addr

	params := filepath.Join(dir, "params.json")
	os.WriteFile(params, []byte(`{
  "recipient": "Bob.Smith@Example.ORG",
  "subject": "Invoice 4711 for March",
  "body": "Hello Bob, the invoice is attached.",
  "attachment_hashes": ["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]
}
`), 0o644)
	decl := filepath.Join(catalog, "send_email.json")
	out, err := exec.Command(workload, "--url", url, "--token-file", filepath.Join(dir, "token"), "--key", d.vkey,
		"--declaration", decl, params).CombinedOutput()
	if err != nil {
		t.Fatalf("workload: %v\n%s", err, out)
	}
	for _, want := range []string{
		"workload: params_digest sha256:e3dd1acbd9f73cc6e2fa2a2cbabc9a6228e9c42b70f46f3cd0a99b85388e24ee (213 bytes)",
		"workload: tiers_digest  sha256:18824ccc509c09ce6759b05c85686d44b4a45bf16240fabda33221d05fcf3e98",
		`"recipient":{"recipient_domain":"example.org"}`,
		"mediator: appended entry 0 (entry version 2, definition sha256:",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("workload output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "Invoice 4711") || strings.Contains(string(out), "Bob.Smith") {
		t.Errorf("the workload's output shows raw values:\n%s", out)
	}

	// The export, once a checkpoint covers the entry.
	var export string
	for deadline := time.Now().Add(10 * time.Second); export == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		export = apitest.Get(t, url+"/v1/export?start=0&end=1")
	}
	if export == "" {
		t.Fatal("no export of entry 0")
	}
	if strings.Contains(export, "Invoice 4711") || strings.Contains(export, "Bob.Smith") || strings.Contains(export, "Hello Bob") {
		t.Fatal("the export holds raw values")
	}
	exportFile := filepath.Join(dir, "export.ledger")
	os.WriteFile(exportFile, []byte(export), 0o644)

	verify := func(args ...string) (string, error) {
		out, err := exec.Command(verifier, append([]string{args[0], "--key", d.vkey, "--export", exportFile, "--index", "0"}, args[1:]...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := verify("params", params); err != nil || !strings.HasPrefix(out, "match: entry 0 committed to exactly these parameters") {
		t.Errorf("ledger-verify params: %v\n%s", err, out)
	}
	if out, err := verify("tiers", decl); err != nil || !strings.HasPrefix(out, "match: entry 0 records the applied-tiers digest and action definition digest of this send_email declaration") {
		t.Errorf("ledger-verify tiers: %v\n%s", err, out)
	}
	other := filepath.Join(dir, "other.json")
	os.WriteFile(other, []byte(`{"recipient":"Bob.Smith@Example.ORG","subject":"Invoice 4712 for March","body":"Hello Bob, the invoice is attached.","attachment_hashes":["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]}`), 0o644)
	if out, err := verify("params", other); err == nil || !strings.HasPrefix(out, "mismatch") {
		t.Errorf("ledger-verify params with another subject: %v\n%s", err, out)
	}
	// The declaration the server applied is public and byte-identical.
	served := apitest.Get(t, url+"/v1/actions/send_email")
	if want, _ := os.ReadFile(decl); served != string(want) {
		t.Errorf("GET /v1/actions/send_email differs from the declaration")
	}
}
