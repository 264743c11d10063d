package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/daemon"
	"github.com/decisionledger/ledger/ledger"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestLedgerd runs the CLI scripts in testdata/ledgerd (txtar), each
// against its own real ledgerd in this process (daemon.Start): a badger
// store in a temporary directory, the reference catalog
// (testdata/declarations) and policies (testdata/policies), and approvals
// on, with the page's test approvers. $URL is its URL; the work
// directory holds ledger.vkey (its verifier key), other.vkey (another
// log's key), token (the mediator's
// token, also in $TOKEN), declarations/ (the catalog's files) and
// $PASSWORD is the approvers' password.
func TestLedgerd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a ledgerd per script")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/ledgerd",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			dir, err := os.MkdirTemp("", "ledgerctl-ledgerd")
			if err != nil {
				return err
			}
			env.Defer(func() { os.RemoveAll(dir) })
			d, token, err := startLedgerd(dir, root)
			if err != nil {
				return err
			}
			env.Defer(func() { d.Shutdown(context.Background()) })
			_, other, err := ledger.GenerateKey(origin)
			if err != nil {
				return err
			}
			files := map[string]string{"ledger.vkey": d.VerifierKey(), "other.vkey": other, "token": token}
			for _, name := range []string{"send_email.json", "make_payment.json"} {
				b, err := os.ReadFile(filepath.Join(root, "testdata", "declarations", name))
				if err != nil {
					return err
				}
				files[filepath.Join("declarations", name)] = string(b)
			}
			os.Mkdir(filepath.Join(env.WorkDir, "declarations"), 0o700)
			for name, text := range files {
				if err := os.WriteFile(filepath.Join(env.WorkDir, name), []byte(text), 0o600); err != nil {
					return err
				}
			}
			env.Setenv("URL", d.URL())
			env.Setenv("TOKEN", token)
			env.Setenv("PASSWORD", testPassword)
			env.Setenv(tokenEnv, "")
			env.Setenv(urlEnv, "")
			return nil
		},
	})
}

// The approvers: alice for make_payment and send_email, with the password
// of docs/approvals.md's worked example (internal/apitest's, which this
// package cannot import: its init looks for go.mod above the working
// directory, and the scripts' commands run in $WORK).
const (
	testPassword     = "correct horse battery staple"
	testPasswordHash = "$argon2id$v=19$m=65536,t=3,p=2$c2FsdHNhbHRzYWx0c2FsdA$qie54+IvXCT/C6ByRYKGNAZGg0sxeR/8LT3gdIvqGyU"
)

var testApprovers = []approver.Approver{{Name: "alice", PasswordHash: testPasswordHash, Actions: []string{"make_payment", "send_email"}}}

// startLedgerd starts a ledgerd on 127.0.0.1 with its files in dir.
func startLedgerd(dir, root string) (*daemon.Daemon, string, error) {
	skey, _, err := ledger.GenerateKey(origin)
	if err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "ledger.key"), []byte(skey+"\n"), 0o600); err != nil {
		return nil, "", err
	}
	const token = "mediator-token-for-ledgerctl-tests-0123"
	sum := sha256.Sum256([]byte(token))
	cfg := map[string]any{
		"listen": "127.0.0.1:0", "key_file": filepath.Join(dir, "ledger.key"), "store_dir": filepath.Join(dir, "store"),
		"mediators":           []map[string]any{{"name": "billing", "token_sha256": hex.EncodeToString(sum[:])}},
		"checkpoint_interval": "10ms", "max_body_bytes": 262144,
		"catalog_dir": filepath.Join(root, "testdata", "declarations"),
		"policy_dir":  filepath.Join(root, "testdata", "policies"),
		"approvals":   map[string]any{"pending_ttl": "1h", "execution_ttl": "1h", "approvers": testApprovers},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(dir, "ledgerd.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, "", err
	}
	if err := os.Mkdir(filepath.Join(dir, "store"), 0o700); err != nil {
		return nil, "", err
	}
	c, err := config.Load(path)
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	d, err := daemon.Start(context.Background(), daemon.Options{Config: c, ConfigPath: path, Listener: ln})
	if err != nil {
		ln.Close()
		return nil, "", err
	}
	return d, token, nil
}

// minimize --action believes a catalog's declaration only if its digests
// are those the catalog's list names: a server that serves another file
// than it lists (or lists another digest) is refused, and nothing is
// printed.
func TestMinimizeCatalogDigests(t *testing.T) {
	file, err := os.ReadFile(filepath.Join("..", "..", "testdata", "declarations", "send_email.json"))
	if err != nil {
		t.Fatal(err)
	}
	decl, err := declare.Parse(file)
	if err != nil {
		t.Fatal(err)
	}
	def, _ := decl.Digest()
	tiers, _ := decl.TiersDigest()
	other := strings.Replace(string(file), "The message; the mediator sees its size.", "Another description.", 1)
	for _, c := range []struct {
		name              string
		listDef, listTier string
		served            string
		code              int
	}{
		{"the listed file", def.String(), tiers.String(), string(file), exitOK},
		{"another file", def.String(), tiers.String(), other, exitFailed},
		{"another tiers digest", def.String(), "sha256:" + strings.Repeat("0", 64), string(file), exitFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/v1/actions":
					fmt.Fprintf(w, `{"actions":[{"action":"send_email","tiers_digest":%q,"definition_digest":%q}]}`, c.listTier, c.listDef)
				case "/v1/actions/send_email":
					w.Write([]byte(c.served))
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "mail.json"), []byte(`{"recipient":"carol@example.org","subject":"Q3","body":"figures"}`), 0o600)
			code, stdout, stderr := ledgerctl(t, dir, "", "minimize", "--url", srv.URL, "--action", "send_email", "mail.json")
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, c.code, stderr)
			}
			if code != exitOK && (stdout != "" || !strings.Contains(stderr, "does not have the digests GET /v1/actions names")) {
				t.Errorf("stdout %q, stderr %q", stdout, stderr)
			}
		})
	}
}
