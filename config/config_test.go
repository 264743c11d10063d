package config

import (
	"encoding/json"
	"fmt"
	"net"
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
	return Load(writeConfig(t, change))
}

// writeConfig writes the config of configWith and returns its path.
func writeConfig(t *testing.T, change string) string {
	t.Helper()
	dir := t.TempDir()
	skey, _, err := ledger.GenerateKey("ledger.example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ledger.key"), []byte(skey+"\n"), 0o600); err != nil {
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
	return path
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
		``:                            func(c *Config) bool { return c.MaxBodyBytes == defaultMaxBodyBytes && c.Listen == DefaultListen },
		`"max_body_bytes": 16777216`:  func(c *Config) bool { return c.MaxBodyBytes == 16<<20 },
		`"max_body_bytes": 1`:         func(c *Config) bool { return c.MaxBodyBytes == 1 },
		`"listen": ":8080"`:           func(c *Config) bool { return c.Listen == ":8080" },
		`"listen": "[::1]:8080"`:      func(c *Config) bool { return c.Listen == "[::1]:8080" },
		`"min_commit_interval": "0s"`: func(c *Config) bool { d, _ := c.MinCommitIntervalDuration(); return d == -1 },
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
	path := writeConfig(t, "")
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, append(b, []byte(`{"listen": ":9"}`)...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "text after the config's JSON object") {
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
	if d, err := c.CheckpointIntervalDuration(); err != nil || d != ledger.DefaultCheckpointInterval {
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
	if d, err := c.CheckpointIntervalDuration(); err != nil || d != 250*time.Millisecond {
		t.Fatalf("checkpoint_interval 250ms gives %v, %v", d, err)
	}
	for _, bad := range []string{`"0s"`, `"-1s"`, `"soon"`} {
		if c, err := configWith(t, `"checkpoint_interval": `+bad); err == nil {
			if _, err := c.CheckpointIntervalDuration(); err == nil {
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
	if d, err := c.WitnessIntervalDuration(); err != nil || d != time.Second {
		t.Fatalf("default witness interval %v, %v; want 1s", d, err)
	}
	c, err = configWith(t, `"witness_interval": "10s"`)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := c.WitnessIntervalDuration(); err != nil || d != 10*time.Second {
		t.Fatalf("witness_interval 10s gives %v, %v", d, err)
	}
	for _, bad := range []string{`"0s"`, `"-1s"`, `"often"`} {
		if _, err := configWith(t, `"witness_interval": `+bad); err == nil || !strings.Contains(err.Error(), "witness_interval") {
			t.Errorf("witness_interval %s: %v; want it refused", bad, err)
		}
	}
}

func TestConfigConnections(t *testing.T) {
	for limit, want := range map[uint64]int{20000: 4096, 1024: 768, 256: 192, 100: 36, 64: 0, 10: 0} {
		if got := defaultMaxConnections(limit); got != want {
			t.Errorf("defaultMaxConnections(%d) = %d, want %d", limit, got, want)
		}
	}
	if _, err := (&Config{MaxConnections: -1}).maxConnections(); err == nil || !strings.Contains(err.Error(), "max_connections") {
		t.Errorf("negative max_connections: %v", err)
	}
	for _, c := range []struct{ max, perSource, want int }{{768, 0, 384}, {1, 0, 1}, {3, 0, 1}, {768, 10, 10}, {768, 5000, 5000}} {
		if _, got, err := (&Config{MaxConnections: c.max, MaxConnectionsPerSource: c.perSource}).ConnectionCaps(); err != nil || got != c.want {
			t.Errorf("max_connections %d, max_connections_per_source %d: %d %v, want %d", c.max, c.perSource, got, err, c.want)
		}
	}
	// On PostgreSQL the default caps no source: followers forward from
	// their own addresses, and a cluster sits behind a load balancer.
	for _, c := range []struct{ perSource, want int }{{0, 768}, {10, 10}} {
		if _, got, err := (&Config{MaxConnections: 768, MaxConnectionsPerSource: c.perSource, Store: "postgres://db.example.org/l"}).ConnectionCaps(); err != nil || got != c.want {
			t.Errorf("a PostgreSQL store, max_connections_per_source %d: %d %v, want %d", c.perSource, got, err, c.want)
		}
	}
	if _, _, err := (&Config{MaxConnectionsPerSource: -1}).ConnectionCaps(); err == nil || !strings.Contains(err.Error(), "max_connections_per_source") {
		t.Errorf("negative max_connections_per_source: %v", err)
	}
	if limit, ok := fileLimit(); ok && limit < 1<<30 {
		if _, err := (&Config{MaxConnections: int(limit)}).maxConnections(); err == nil || !strings.Contains(err.Error(), "max_connections") {
			t.Errorf("max_connections at the descriptor limit %d: %v", limit, err)
		}
		if n, err := (&Config{MaxConnections: int(limit) - 64}).maxConnections(); err != nil || n != int(limit)-64 {
			t.Errorf("max_connections %d with a limit of %d: %v %v", limit-64, limit, n, err)
		}
	}
	for _, f := range []struct {
		name  string
		parse func(*Config) (time.Duration, error)
		set   func(*Config, string)
		def   time.Duration
	}{
		{"idle_timeout", (*Config).IdleTimeoutDuration, func(c *Config, v string) { c.IdleTimeout = v }, 60 * time.Second},
		{"body_timeout", (*Config).BodyTimeoutDuration, func(c *Config, v string) { c.BodyTimeout = v }, 30 * time.Second},
		{"write_timeout", (*Config).WriteTimeoutDuration, func(c *Config, v string) { c.WriteTimeout = v }, 60 * time.Second},
	} {
		for text, want := range map[string]time.Duration{"": f.def, "2s": 2 * time.Second} {
			var c Config
			f.set(&c, text)
			if got, err := f.parse(&c); err != nil || got != want {
				t.Errorf("%s %q: %v %v, want %v", f.name, text, got, err, want)
			}
		}
		for _, text := range []string{"0s", "-1s", "soon"} {
			var c Config
			f.set(&c, text)
			if _, err := f.parse(&c); err == nil || !strings.Contains(err.Error(), f.name) {
				t.Errorf("%s %q: %v", f.name, text, err)
			}
		}
	}
}

// The store and cluster members are checked at load, naming the member;
// the URL appears only redacted.
func TestClusterConfig(t *testing.T) {
	refused := map[string]string{
		`"store": "mysql://db.example.org/ledger"`:                                                            `store: the scheme "mysql" is not postgres or postgresql`,
		`"store": "postgres://ledger:s3cret@db.example.org:notaport/ledger"`:                                  `store postgres://(unparsable URL) is not a URL: invalid port ":notaport" after host`,
		`"store": "postgres://db.example.org/ledger?password=s3cret&connect_timeout=x"`:                       "store postgres://db.example.org/ledger?connect_timeout=x&password=xxxxx is not a PostgreSQL URL pgx accepts",
		`"cluster": {"instance": "a"}`:                                                                        "cluster needs store, a postgres:// URL",
		`"store": "postgres://db.example.org/l", "cluster": {"instance": "a b"}`:                              `cluster.instance "a b" is not 1 to 64 letters`,
		`"store": "postgres://db.example.org/l", "cluster": {"instance": "` + strings.Repeat("a", 65) + `"}`:  "is not 1 to 64 letters",
		`"store": "postgres://db.example.org/l", "cluster": {"lease_ttl": "100ms"}`:                           `cluster.lease_ttl "100ms" is not a duration from 300ms to 10m0s`,
		`"store": "postgres://db.example.org/l", "cluster": {"lease_ttl": "3"}`:                               `cluster.lease_ttl "3" is not a duration`,
		`"store": "postgres://db.example.org/l", "cluster": {"advertise_url": "https://a.example.org:8443"}`:  `cluster.advertise_url "https://a.example.org:8443" is not http://host:port`,
		`"store": "postgres://db.example.org/l", "cluster": {"advertise_url": "http://a.example.org"}`:        "is not http://host:port",
		`"store": "postgres://db.example.org/l", "cluster": {"advertise_url": "http://a.example.org:80/x"}`:   "is not http://host:port",
		`"store": "postgres://db.example.org/l", "cluster": {"advertise_url": "http://u:p@a.example.org:80"}`: "is not http://host:port",
		`"store": "postgres://db.example.org/l", "cluster": {"unknown": 1}`:                                   `unknown field "unknown"`,
	}
	for change, want := range refused {
		_, err := configWith(t, change)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", change, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the password: %v", change, err)
		}
	}
	cfg, err := configWith(t, `"store": "postgres://ledger:s3cret@db.example.org/ledger", "listen": "127.0.0.1:8081"`)
	if err != nil {
		t.Fatal(err)
	}
	if ttl, err := cfg.Cluster.LeaseTTLDuration(); ttl != 3*time.Second || err != nil {
		t.Errorf("default lease_ttl %v %v", ttl, err)
	}
	if a, err := cfg.AdvertiseURL(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8081}); a != "http://127.0.0.1:8081" || err != nil {
		t.Errorf("default advertise_url %q %v", a, err)
	}
	if a, _ := cfg.AdvertiseURL(nil); a != "http://127.0.0.1:8081" {
		t.Errorf("default advertise_url %q", a)
	}
	if i1, i2 := cfg.Instance(), cfg.Instance(); !instanceName.MatchString(i1) || i1 == i2 {
		t.Errorf("default instances %q, %q: want valid and distinct", i1, i2)
	}
	if v := cfg.LogValue().String(); strings.Contains(v, "s3cret") || !strings.Contains(v, "xxxxx@db.example.org") {
		t.Errorf("the config's log value: %s, want the store redacted", v)
	}
	// With listen on every address, the others cannot know where to
	// reach the instance: advertise_url is required then.
	for _, listen := range []string{":8081", "0.0.0.0:8081", "[::]:8081"} {
		cfg.Listen = listen
		if _, err := cfg.AdvertiseURL(nil); err == nil || !strings.Contains(err.Error(), "cluster.advertise_url is required") {
			t.Errorf("listen %s: %v", listen, err)
		}
	}
	cfg.Listen = ":0"
	cfg.Cluster = &ClusterConfig{AdvertiseURL: "http://a.example.org:8081/"}
	if a, err := cfg.AdvertiseURL(nil); a != "http://a.example.org:8081" || err != nil {
		t.Errorf("advertise_url %q %v", a, err)
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.Cluster = nil
	if a, _ := cfg.AdvertiseURL(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4321}); a != "http://127.0.0.1:4321" {
		t.Errorf("advertise_url for port 0: %q, want the bound port", a)
	}
}

func TestConfigRefusesMissingStoreAndKey(t *testing.T) {
	dir := t.TempDir()
	write := func(cfg string) string {
		p := filepath.Join(dir, "c.json")
		os.WriteFile(p, []byte(cfg), 0o600)
		return p
	}
	hash := strings.Repeat("a", 64)
	if _, err := Load(write(`{"key_file":"k","store_dir":"missing","mediators":[{"name":"m","token_sha256":"` + hash + `"}]}`)); err == nil || !strings.Contains(err.Error(), "store_dir") {
		t.Errorf("missing store: %v", err)
	}
	os.Mkdir(filepath.Join(dir, "store"), 0o700)
	if _, err := Load(write(`{"key_file":"k","store_dir":"store","mediators":[{"name":"m","token_sha256":"` + hash + `"}]}`)); err == nil || !strings.Contains(err.Error(), "key_file") {
		t.Errorf("missing key: %v", err)
	}
	if _, err := Load(write(`{"key_file":"k","store_dir":"store","mediators":[],"extra":1}`)); err == nil {
		t.Error("unknown config field accepted")
	}
	if _, err := Load(write(`{"key_file":"k","store_dir":"store","mediators":[{"name":"m","token_sha256":"secret-token"}]}`)); err == nil || strings.Contains(err.Error(), "secret-token") {
		t.Errorf("bad token hash: %v", err)
	}
}

func TestConfigMinCommitInterval(t *testing.T) {
	for text, want := range map[string]time.Duration{"": 0, "2ms": 2 * time.Millisecond, "0s": -1} {
		if got, err := (&Config{MinCommitInterval: text}).MinCommitIntervalDuration(); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", text, got, err, want)
		}
	}
	for _, text := range []string{"-1ms", "2s", "fast"} {
		if _, err := (&Config{MinCommitInterval: text}).MinCommitIntervalDuration(); err == nil || !strings.Contains(err.Error(), "min_commit_interval") {
			t.Errorf("%q: %v", text, err)
		}
	}
}

// A mediator's name is every entry's mediator, an identifier: a name with
// a control or format character is refused at start, not at each append.
func TestConfigMediatorName(t *testing.T) {
	hash := strings.Repeat("a", 64)
	dir := t.TempDir()
	key, store := filepath.Join(dir, "k"), filepath.Join(dir, "s")
	os.WriteFile(key, nil, 0o600)
	os.Mkdir(store, 0o700)
	for _, name := range []string{"mediator\x1b[2J", "mediator\u202e", "a\x00b", "\xff"} {
		c := &Config{KeyFile: key, StoreDir: store, Mediators: []Mediator{{Name: name, TokenSHA256: hash}}}
		if err := c.Check(); err == nil || !strings.Contains(err.Error(), "mediators[0]: name") {
			t.Errorf("name %q: %v; want a refusal naming mediators[0]", name, err)
		}
	}
	c := &Config{KeyFile: key, StoreDir: store, Mediators: []Mediator{{Name: "médiateur-1", TokenSHA256: hash}}}
	if err := c.Check(); err != nil {
		t.Errorf("a good name refused: %v", err)
	}
}
