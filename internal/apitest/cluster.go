package apitest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/postgres"
)

// A data directory as a first start of ledgerd makes it (DataDir): the
// log's origin, its one mediator, and the config's file name.
const (
	LocalOrigin   = "ledger.localhost/log"
	LocalMediator = "local"
	ConfigName    = "ledgerd.json"
)

// DataDir makes a data directory in dir as a first start of ledgerd
// does: a new key for LocalOrigin (ledger.key, mode 0600), an empty
// store (store), and ConfigName naming them and the mediator
// LocalMediator with a new token, which it returns with the config's
// path. The config listens on a free port of 127.0.0.1.
func DataDir(t testing.TB, dir string) (configPath, token string) {
	t.Helper()
	skey, _, err := ledger.GenerateKey(LocalOrigin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ledger.key"), []byte(skey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	token = tokenHex()
	c := map[string]any{"listen": "127.0.0.1:0", "key_file": "ledger.key", "store_dir": "store",
		"mediators": []map[string]any{{"name": LocalMediator, "token_sha256": TokenHash(token)}}}
	b, _ := json.MarshalIndent(c, "", "  ")
	configPath = filepath.Join(dir, ConfigName)
	if err := os.WriteFile(configPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return configPath, token
}

// DBPassword is the password in a ClusterFixture's database URL.
const DBPassword = "s3cret-pw"

// ClusterFixture is one log in a fresh PostgreSQL database, its key and
// one mediator token, shared by the instances a test starts.
type ClusterFixture struct {
	PG    *pgtest.Server
	DB    string // the database's URL
	Dir   string
	Base  map[string]any // the config members every instance has
	Token string
}

// NewClusterFixture makes a ClusterFixture: a data directory (DataDir)
// whose config names a new database, with a checkpoint every 50 ms.
func NewClusterFixture(t testing.TB) *ClusterFixture {
	t.Helper()
	pg := pgtest.Shared(t)
	f := &ClusterFixture{PG: pg, DB: pg.NewDatabase(t), Dir: t.TempDir()}
	path, token := DataDir(t, f.Dir)
	f.Token = token
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &f.Base); err != nil {
		t.Fatal(err)
	}
	f.Base["key_file"] = filepath.Join(f.Dir, f.Base["key_file"].(string))
	// The server trusts local connections: the password is there to be
	// kept out of every message.
	u, err := url.Parse(f.DB)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), DBPassword)
	f.DB = u.String()
	f.Base["store"] = f.DB
	f.Base["checkpoint_interval"] = "50ms"
	return f
}

// Config writes the config of instance name, with its own store_dir,
// listening on a free port, and returns its path.
func (f *ClusterFixture) Config(t testing.TB, name, ttl string) string {
	t.Helper()
	dir := filepath.Join(f.Dir, name)
	if err := os.MkdirAll(filepath.Join(dir, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	c := map[string]any{}
	for k, v := range f.Base {
		c[k] = v
	}
	c["store_dir"] = "store"
	c["listen"] = "127.0.0.1:0"
	c["cluster"] = map[string]any{"instance": name, "lease_ttl": ttl}
	b, _ := json.MarshalIndent(c, "", "  ")
	path := filepath.Join(dir, ConfigName)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Store is another holder of the lease, through a store of its own.
func (f *ClusterFixture) Store(t *testing.T) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), f.DB, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Post sends an append to url with the fixture's token and extra
// headers, and returns the answer's status, headers and body; it fails
// the test without an answer in 30 s.
func (f *ClusterFixture) Post(t *testing.T, url string, i int, headers map[string]string) (int, http.Header, string) {
	t.Helper()
	status, h, body, err := f.TryPost(url, i, headers)
	if err != nil {
		t.Fatal(err)
	}
	return status, h, body
}

// TryPost is Post returning the client's error; it may run in another
// goroutine than the test's.
func (f *ClusterFixture) TryPost(url string, i int, headers map[string]string) (int, http.Header, string, error) {
	req, _ := http.NewRequest("POST", url+"/v1/entries", strings.NewReader(AppendBody(i)))
	req.Header.Set("Authorization", "Bearer "+f.Token)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), nil
}

// Readiness is the body of GET /readyz on an instance of a cluster, as
// docs/openapi.json describes it.
type Readiness struct {
	Ready     bool   `json:"ready"`
	Role      string `json:"role"`
	Instance  string `json:"instance"`
	Sequencer string `json:"sequencer"`
	Epoch     uint64 `json:"epoch"`
}

// Readyz returns GET url's status and body (url ends in /readyz, with
// its query); an answer other than 200 must carry Retry-After: 1.
func Readyz(t *testing.T, url string) (int, Readiness) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rd Readiness
	if err := json.NewDecoder(resp.Body).Decode(&rd); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if resp.StatusCode != 200 && resp.Header.Get("Retry-After") != "1" {
		t.Errorf("GET %s: %d without Retry-After: 1", url, resp.StatusCode)
	}
	return resp.StatusCode, rd
}

// WantUnavailable checks a 503 with Retry-After: 1 and the JSON error
// code.
func WantUnavailable(t *testing.T, what string, status int, h http.Header, body, code string) {
	t.Helper()
	var e map[string]APIError
	json.Unmarshal([]byte(body), &e)
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" || e["error"].Code != code ||
		h.Get("Content-Type") != "application/json" {
		t.Errorf("%s: %d Retry-After %q %s, want 503, Retry-After: 1 and code %s", what, status, h.Get("Retry-After"), body, code)
	}
}

// tokenHex is a new random token's text, as ledgerd makes them: 32
// bytes in hex.
func tokenHex() string {
	raw := make([]byte, 32)
	rand.Read(raw)
	return hex.EncodeToString(raw)
}
