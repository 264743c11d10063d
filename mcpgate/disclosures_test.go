package mcpgate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit"
)

// configWith is a minimal valid config with members set (nil deletes).
func configWith(t *testing.T, members map[string]any) ([]byte, string) {
	t.Helper()
	cfg := map[string]any{
		"ledger":           map[string]any{"url": "http://127.0.0.1:8080", "token_file": "ledger.token", "verifier_key": "k"},
		"declarations_dir": "declarations",
		"servers":          map[string]any{"fs": map[string]any{"url": "http://127.0.0.1:9/mcp"}},
	}
	for k, v := range members {
		if v == nil {
			delete(cfg, k)
		} else {
			cfg[k] = v
		}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b, t.TempDir()
}

// The commitment is the hiding one unless "v1" is written; the hiding
// commitment needs the disclosures member (a directory or "none"), which
// v1 refuses.
func TestConfigCommitment(t *testing.T) {
	for _, c := range []struct {
		name    string
		members map[string]any
		hiding  bool
		dir     string // DisclosureDir, relative to the config's directory
		err     string
	}{
		{"default without disclosures", nil, true, "", "disclosures: missing"},
		{"default with a directory", map[string]any{"disclosures": "disc"}, true, "disc", ""},
		{"default with none", map[string]any{"disclosures": "none"}, true, "", ""},
		{"a directory named none", map[string]any{"disclosures": "./none"}, true, "none", ""},
		{"hiding", map[string]any{"commitment": "hiding", "disclosures": "disc"}, true, "disc", ""},
		{"hiding without disclosures", map[string]any{"commitment": "hiding"}, true, "", "disclosures: missing"},
		{"v1", map[string]any{"commitment": "v1"}, false, "", ""},
		{"v1 with disclosures", map[string]any{"commitment": "v1", "disclosures": "disc"}, false, "", "disclosures: only with the hiding commitment"},
		{"v1 with none", map[string]any{"commitment": "v1", "disclosures": "none"}, false, "", "disclosures: only with the hiding commitment"},
		{"another version", map[string]any{"commitment": "v2", "disclosures": "disc"}, false, "", `commitment: not "hiding" or "v1"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, dir := configWith(t, c.members)
			cfg, err := ParseConfig(b, dir)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want an error with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			if c.dir != "" {
				want = filepath.Join(dir, c.dir)
			}
			if cfg.Hiding() != c.hiding || cfg.DisclosureDir() != want {
				t.Fatalf("Hiding %v, DisclosureDir %q; want %v, %q", cfg.Hiding(), cfg.DisclosureDir(), c.hiding, want)
			}
		})
	}
}

// The store makes its directory 0700, refuses one others may enter, and
// writes each disclosure, mode 0600, under its digest's hex, once:
// ParseDisclosure reads it back and it checks against the commitment.
func TestDisclosureStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "disclosures")
	s, err := openDisclosureStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the directory: %v %v, want mode 0700", fi.Mode(), err)
	}
	c, x, err := commit.Hide([]byte(`{"payee":"payee-0001","amount_minor":42000}`), commit.RandomOpenings())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.write(x); err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(c.DigestText(), "v2:sha256:") + ".json"
	if DisclosureFile(c) != name {
		t.Fatalf("DisclosureFile %q, want %q", DisclosureFile(c), name)
	}
	path := filepath.Join(dir, name)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the file: %v %v, want mode 0600", fi.Mode(), err)
	}
	b, _ := os.ReadFile(path)
	want, _ := x.MarshalJSON()
	if string(b) != string(want) {
		t.Fatalf("the file holds\n%s\nwant the canonical disclosure\n%s", b, want)
	}
	back, err := commit.ParseDisclosure(b, commit.Domain{})
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Check(c); err != nil {
		t.Fatal(err)
	}
	if err := s.write(x); err == nil {
		t.Fatal("a second write of the same disclosure replaced the file")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d files in the directory, want 1 (no temporary file left)", len(entries))
	}
	if err := s.remove(c); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("removed, the file: %v", err)
	}

	open := filepath.Join(t.TempDir(), "open")
	os.Mkdir(open, 0o750)
	os.Chmod(open, 0o750)
	if _, err := openDisclosureStore(open); err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("a directory of mode 0750: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := openDisclosureStore(file); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("a file: %v", err)
	}
}
