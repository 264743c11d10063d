package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/decisionledger/ledger/config"
)

// A relative path given to config set is the operator's, from the
// working directory, not from the config's directory as the file's own
// paths are: it is written absolute, or relative to the config's
// directory when it lies beneath it.
func TestConfigSetRelativePath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	path, _, err := initDataDir("d")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"declarations", "d/policies"} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ name, value, want string }{
		{"catalog_dir", "declarations", filepath.Join(dir, "declarations")},
		{"policy_dir", "d/policies", "policies"},
	} {
		var stderr bytes.Buffer
		if code := run(context.Background(), []string{"config", "set", c.name, c.value, "--data", "d"}, &bytes.Buffer{}, &stderr); code != 0 {
			t.Fatalf("config set %s %s: exit %d: %s", c.name, c.value, code, stderr.String())
		}
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got, _, err := config.MemberText(text, c.name); err != nil || got != c.want {
			t.Errorf("config set %s %s wrote %q (%v), want %q", c.name, c.value, got, err, c.want)
		}
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CatalogDir != filepath.Join(dir, "declarations") || cfg.PolicyDir != filepath.Join("d", "policies") {
		t.Errorf("the config names %s and %s", cfg.CatalogDir, cfg.PolicyDir)
	}
}

// Every command that edits the config works on the minimal file a first
// start writes, which lacks every optional member: token add and rotate,
// approver add and remove, config set and unset, key rotate.
func TestEditCommandsOnFirstConfig(t *testing.T) {
	dir := t.TempDir()
	path, _, err := initDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	newKey := filepath.Join(dir, "ledger-2.key")
	if _, err := writeKey(newKey, localOrigin); err != nil {
		t.Fatal(err)
	}
	tokenCommand(t, "add", "billing", "--data", dir)
	tokenCommand(t, "rotate", "local", "--overlap", "1h", "--data", dir)
	if code, stderr := approverRun(t, "a long enough passphrase\n", "add", "alice", "--actions", "send_email", "--data", dir); code != 0 {
		t.Fatalf("approver add: exit %d: %s", code, stderr)
	}
	if code, stderr := approverRun(t, "", "remove", "alice", "--data", dir); code != 0 {
		t.Fatalf("approver remove: exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{
		{"config", "set", "max_body_bytes", "65536", "--data", dir},
		{"config", "unset", "max_body_bytes", "--data", dir},
		{"key", "rotate", "--new-key", newKey, "--data", dir},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
			t.Fatalf("ledgerd %v: exit %d: %s", args, code, stderr.String())
		}
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Mediators) != 2 || cfg.Mediators[0].PreviousTokenSHA256 == "" || cfg.Approvals == nil ||
		len(cfg.Approvals.Approvers) != 0 || cfg.KeyFile != newKey || len(cfg.PreviousKeys) != 1 {
		t.Errorf("after the edits: %d mediators, approvals %v, key_file %s, %d previous keys", len(cfg.Mediators), cfg.Approvals, cfg.KeyFile, len(cfg.PreviousKeys))
	}
}
