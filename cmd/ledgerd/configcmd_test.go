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
