package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/ledger"
)

// configWith writes, beside a key and a store, a valid config with the
// JSON members of change replacing or adding to the base ones, and loads
// it.
func configWith(t *testing.T, change string) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	if _, err := writeKey(filepath.Join(dir, "ledger.key"), "ledger.example.com/log"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	hash := strings.Repeat("a", 64)
	base := map[string]any{
		"key_file": "ledger.key", "store_dir": "store",
		"mediators": []any{map[string]any{"name": "mediator-1", "token_sha256": hash}},
	}
	var extra map[string]any
	if err := json.Unmarshal([]byte("{"+change+"}"), &extra); err != nil {
		t.Fatalf("%s: %v", change, err)
	}
	for k, v := range extra {
		base[k] = v
	}
	b, _ := json.Marshal(base)
	path := filepath.Join(dir, "ledgerd.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return loadConfig(path)
}

// A value out of range is refused, never replaced by a default; 0 or
// absent means the default where the field says so.
func TestConfigRanges(t *testing.T) {
	hash2 := strings.Repeat("b", 64)
	refused := map[string]string{
		`"max_body_bytes": -1`:          "max_body_bytes -1 is out of range",
		`"max_body_bytes": 16777217`:    "max_body_bytes 16777217 is out of range",
		`"listen": "8080"`:              `listen "8080" is not host:port`,
		`"listen": "127.0.0.1"`:         `listen "127.0.0.1" is not host:port`,
		`"listen": "127.0.0.1:"`:        `listen "127.0.0.1:" is not host:port`,
		`"max_connections": -1`:         "max_connections -1 is negative",
		`"checkpoint_interval": "0s"`:   `checkpoint_interval "0s" is not a positive duration`,
		`"checkpoint_interval": "-1s"`:  `checkpoint_interval "-1s" is not a positive duration`,
		`"idle_timeout": "0s"`:          `idle_timeout "0s" is not a positive duration`,
		`"body_timeout": "-5s"`:         `body_timeout "-5s" is not a positive duration`,
		`"write_timeout": "60"`:         `write_timeout "60" is not a positive duration`,
		`"min_commit_interval": "-1ms"`: `min_commit_interval "-1ms" is not a duration from 0s to 1s`,
		`"min_commit_interval": "2s"`:   `min_commit_interval "2s" is not a duration from 0s to 1s`,
		`"mediators": [{"name": "m", "token_sha256": "` + hash2 + `", "rate_per_second": -1}]`:                          "rate_per_second -1 is out of range",
		`"mediators": [{"name": "m", "token_sha256": "` + hash2 + `", "rate_per_second": 0.0005}]`:                      "rate_per_second 0.0005 is out of range",
		`"mediators": [{"name": "m", "token_sha256": "` + hash2 + `", "rate_per_second": 1, "burst": -1}]`:              "burst -1 is negative",
		`"mediators": [{"name": "m", "token_sha256": "` + hash2 + `", "burst": 5}]`:                                     "burst needs rate_per_second",
		`"mediators": [{"name": "m", "token_sha256": "` + hash2 + `"}, {"name": "n", "token_sha256": "` + hash2 + `"}]`: "mediators[1] (n): token_sha256 is also mediators[0]'s",
	}
	refused[`"max_connections_per_source": -2`] = "max_connections_per_source -2 is negative"
	for change, want := range refused {
		if _, err := configWith(t, change); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", change, err, want)
		}
	}

	accepted := map[string]func(*Config) bool{
		`"max_body_bytes": 0`:         func(c *Config) bool { return c.MaxBodyBytes == defaultMaxBodyBytes },
		``:                            func(c *Config) bool { return c.MaxBodyBytes == defaultMaxBodyBytes && c.Listen == defaultListen },
		`"max_body_bytes": 16777216`:  func(c *Config) bool { return c.MaxBodyBytes == 16<<20 },
		`"max_body_bytes": 1`:         func(c *Config) bool { return c.MaxBodyBytes == 1 },
		`"listen": ":8080"`:           func(c *Config) bool { return c.Listen == ":8080" },
		`"listen": "[::1]:8080"`:      func(c *Config) bool { return c.Listen == "[::1]:8080" },
		`"min_commit_interval": "0s"`: func(c *Config) bool { d, _ := c.minCommitInterval(); return d == -1 },
		`"mediators": [{"name": "m", "token_sha256": "` + hash2 + `", "rate_per_second": 0.001}]`: func(c *Config) bool { return c.Mediators[0].RatePerSecond == 0.001 },
	}
	for change, ok := range accepted {
		if c, err := configWith(t, change); err != nil || !ok(c) {
			t.Errorf("%s: %v, %+v", change, err, c)
		}
	}
}

// Text after the config's object is refused; encoding/json would ignore
// it.
func TestConfigTrailingText(t *testing.T) {
	dir := t.TempDir()
	path, _, err := initDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, append(b, []byte(`{"listen": ":9"}`)...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(path); err == nil || !strings.Contains(err.Error(), "text after the config's JSON object") {
		t.Errorf("config with trailing text: %v", err)
	}
}

// Without checkpoint_interval, ledgerd signs at the ledger's default
// interval, the one docs/config.md states; a duration given is used as
// it is, and zero or a negative one is refused.
func TestCheckpointIntervalDefault(t *testing.T) {
	c, err := configWith(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := c.checkpointInterval(); err != nil || d != ledger.DefaultCheckpointInterval {
		t.Fatalf("default checkpoint interval %v, %v; want %v", d, err, ledger.DefaultCheckpointInterval)
	}
	doc, err := os.ReadFile(configDocPath)
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "### `checkpoint_interval`")
	section, _, _ = strings.Cut(section, "\n### ")
	if want := fmt.Sprintf("default %q", ledger.DefaultCheckpointInterval.String()); !strings.Contains(section, want) {
		t.Errorf("docs/config.md's checkpoint_interval section does not say %s:\n%s", want, section)
	}
	c, err = configWith(t, `"checkpoint_interval": "250ms"`)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := c.checkpointInterval(); err != nil || d != 250*time.Millisecond {
		t.Fatalf("checkpoint_interval 250ms gives %v, %v", d, err)
	}
	for _, bad := range []string{`"0s"`, `"-1s"`, `"soon"`} {
		if c, err := configWith(t, `"checkpoint_interval": `+bad); err == nil {
			if _, err := c.checkpointInterval(); err == nil {
				t.Errorf("checkpoint_interval %s accepted", bad)
			}
		}
	}
}

// witness_interval defaults to 1s; a duration given is used, and zero, a
// negative one or no duration is refused when the config is checked.
func TestWitnessIntervalConfig(t *testing.T) {
	c, err := configWith(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := c.witnessInterval(); err != nil || d != time.Second {
		t.Fatalf("default witness interval %v, %v; want 1s", d, err)
	}
	c, err = configWith(t, `"witness_interval": "10s"`)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := c.witnessInterval(); err != nil || d != 10*time.Second {
		t.Fatalf("witness_interval 10s gives %v, %v", d, err)
	}
	for _, bad := range []string{`"0s"`, `"-1s"`, `"often"`} {
		if _, err := configWith(t, `"witness_interval": `+bad); err == nil || !strings.Contains(err.Error(), "witness_interval") {
			t.Errorf("witness_interval %s: %v; want it refused", bad, err)
		}
	}
}
