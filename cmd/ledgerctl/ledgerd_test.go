package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/daemon"
	"github.com/decisionledger/ledger/internal/progress"
	"github.com/decisionledger/ledger/internal/ptytest"
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
		Cmds:                map[string]func(*testscript.TestScript, bool, []string){"jsonvar": jsonVar, "verdict": verdict},
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

// jsonvar FILE NAME=MEMBER...: sets each $NAME to the member of the JSON
// object in FILE at the path MEMBER (names joined by dots), a string or a
// number.
func jsonVar(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: jsonvar FILE NAME=MEMBER...")
	}
	var doc any
	ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &doc))
	for _, a := range args[1:] {
		name, path, _ := strings.Cut(a, "=")
		v := doc
		for _, m := range strings.Split(path, ".") {
			obj, _ := v.(map[string]any)
			v = obj[m]
		}
		switch v := v.(type) {
		case string:
			ts.Setenv(name, v)
		case float64:
			ts.Setenv(name, strconv.FormatFloat(v, 'f', -1, 64))
		default:
			ts.Fatalf("%s: no string or number at %s", args[0], path)
		}
	}
}

// verdict approve|deny: alice signs in to the approver's page at $URL and
// records the verdict on approval $ID, shown the preview $PREVIEW.
func verdict(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: verdict approve|deny")
	}
	base := ts.Getenv("URL")
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	post := func(path string, form url.Values) []byte {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Origin", base)
		resp, err := hc.Do(req)
		ts.Check(err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			ts.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
		return b
	}
	var signedIn struct{ CSRF string }
	ts.Check(json.Unmarshal(post("/approvals/sign-in", url.Values{"name": {"alice"}, "password": {testPassword}}), &signedIn))
	post("/approvals/"+ts.Getenv("ID")+"/verdict", url.Values{"verdict": {args[0]}, "preview_digest": {ts.Getenv("PREVIEW")},
		"csrf": {signedIn.CSRF}, "confirm": {"yes"}})
}

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

// approval get does not take ledgerd's account at its word: a server
// whose account names another entry as the request, or as the verdict, or
// another approver, is refused (exit 1, nothing on standard output).
func TestApprovalAccountLies(t *testing.T) {
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	d, token, err := startLedgerd(t.TempDir(), root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "mail.json"), []byte(`{"recipient":"carol@example.org","subject":"Q3","body":"figures"}`), 0o600)
	os.WriteFile(filepath.Join(dir, "decl.json"), mustRead(t, filepath.Join(root, "testdata", "declarations", "send_email.json")), 0o600)
	code, body, stderr := ledgerctl(t, dir, token, "minimize", "--declaration", "decl.json", "--principal", "agent:example-1", "mail.json")
	if code != exitOK {
		t.Fatal(stderr)
	}
	os.WriteFile(filepath.Join(dir, "body.json"), []byte(body), 0o600)
	key := "--key=" + d.VerifierKey()
	code, out, stderr := ledgerctl(t, dir, token, "decide", "--url", d.URL(), key, "--json", "body.json")
	if code != exitOK {
		t.Fatal(stderr)
	}
	var decided struct {
		Approval struct {
			ID string `json:"id"`
		} `json:"approval"`
	}
	if err := json.Unmarshal([]byte(out), &decided); err != nil || decided.Approval.ID == "" {
		t.Fatalf("decide: %v: %s", err, out)
	}
	id := decided.Approval.ID
	var lie atomic.Pointer[func(map[string]any)]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Get(d.URL() + r.URL.RequestURI())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if f := lie.Load(); f != nil && strings.HasPrefix(r.URL.Path, "/v1/approvals/") {
			var m map[string]any
			json.Unmarshal(b, &m)
			(*f)(m)
			b, _ = json.Marshal(m)
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(b)
	}))
	defer srv.Close()
	if code, _, stderr := ledgerctl(t, dir, "", "approval", "get", "--url", srv.URL, key, id); code != exitOK {
		t.Fatalf("the honest account: %s", stderr)
	}
	for _, c := range []struct {
		name string
		lie  func(map[string]any)
	}{
		{"another request", func(m map[string]any) { m["request"] = m["request"].(float64) - 1 }},
		{"another principal", func(m map[string]any) { m["principal"] = "agent:example-2" }},
		{"a verdict that is not there", func(m map[string]any) {
			m["state"], m["verdict"], m["verdict_index"], m["approver"] = "approved", "approve", m["request"], "alice"
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			lie.Store(&c.lie)
			defer lie.Store(nil)
			code, stdout, stderr := ledgerctl(t, dir, "", "approval", "get", "--url", srv.URL, key, id)
			if code != exitFailed || stdout != "" || !strings.Contains(stderr, "does not verify") {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and does not verify", code, stdout, stderr)
			}
		})
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// exportLedgerd starts a ledgerd holding three entries (its own first
// and two decisions) under a signed checkpoint, behind a proxy that
// changes a byte of the last signature in exports once tamper is set, and
// returns a directory to run ledgerctl in, the proxy's URL and the
// --key option.
func exportLedgerd(t *testing.T) (dir, url, key string, tamper *atomic.Bool) {
	t.Helper()
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	d, token, err := startLedgerd(t.TempDir(), root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	dir = t.TempDir()
	os.WriteFile(filepath.Join(dir, "mail.json"), []byte(`{"recipient":"dave@example.com","subject":"lunch","body":"at noon"}`), 0o600)
	key = "--key=" + d.VerifierKey()
	code, body, stderr := ledgerctl(t, dir, token, "minimize", "--url", d.URL(), "--action", "send_email", "--principal", "agent:example-1", "mail.json")
	if code != exitOK {
		t.Fatal(stderr)
	}
	os.WriteFile(filepath.Join(dir, "request.json"), []byte(body), 0o600)
	for range 2 {
		if code, _, stderr := ledgerctl(t, dir, token, "decide", "--url", d.URL(), key, "request.json"); code != exitOK {
			t.Fatal(stderr)
		}
	}
	tamper = new(atomic.Bool)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Get(d.URL() + r.URL.RequestURI())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if tamper.Load() && r.URL.Path == "/v1/export" {
			if i := bytes.LastIndex(b, []byte(`"sig":"`)); i >= 0 {
				c := byte('A')
				if b[i+7] == 'A' {
					c = 'B'
				}
				b[i+7] = c
			}
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	// The checkpoint covers both entries once it is signed (10 ms).
	for i := 0; ; i++ {
		code, out, _ := ledgerctl(t, dir, "", "checkpoint", "--url", srv.URL, key, "--json")
		if code == exitOK && strings.Contains(out, `"tree_size":3`) || i > 200 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return dir, srv.URL, key, tamper
}

// An export that does not verify is not written: one changed byte in an
// entry's signature, and nothing is left in the directory.
func TestExportTampered(t *testing.T) {
	dir, url, key, tamper := exportLedgerd(t)
	if code, _, stderr := ledgerctl(t, dir, "", "export", "--url", url, key, "--out", "good.ledger"); code != exitOK {
		t.Fatalf("the honest export: %s", stderr)
	}
	tamper.Store(true)
	code, stdout, stderr := ledgerctl(t, dir, "", "export", "--url", url, key, "--out", "bad.ledger")
	if code != exitFailed || stdout != "" || !strings.Contains(stderr, "does not verify") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and does not verify", code, stdout, stderr)
	}
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		if n.Name() != "mail.json" && n.Name() != "request.json" && n.Name() != "good.ledger" {
			t.Errorf("left in the directory: %s", n.Name())
		}
	}
}

// ledgerctl export with stderr a terminal (LEDGER_PROGRESS=now) draws the
// download's progress, then the verification's, each erased; on a pipe
// (TestExportTampered) stderr says nothing of it.
func TestExportProgress(t *testing.T) {
	dir, url, key, _ := exportLedgerd(t)
	t.Setenv(progress.Env, "now")
	t.Setenv("TERM", "xterm")
	if code, _, stderr := ledgerctl(t, dir, "", "export", "--url", url, key, "--out", "pipe.ledger"); code != exitOK || stderr != "" {
		t.Fatalf("export, stderr not a terminal: exit %d, stderr %q; want 0 and nothing", code, stderr)
	}
	pty := ptytest.Open(t)
	var stdout bytes.Buffer
	code := run([]string{"export", "--url", url, key, "--out", "term.ledger"}, nil, &stdout, pty.Terminal)
	term := string(pty.Output())
	if code != exitOK || !strings.HasPrefix(stdout.String(), "wrote ") {
		t.Fatalf("export: exit %d, stdout %q, terminal %q", code, stdout.String(), term)
	}
	want := regexp.MustCompile(`^\rledgerctl: export: downloading: [0-9.]+ K?i?B( of [0-9.]+ K?i?B \(\d+%\))?\x1b\[K(\r[^\r]*\x1b\[K)*\r\x1b\[K` +
		`\rledgerctl: export: verifying: 1 of \d+ entries \(\d+%\)\x1b\[K(\r[^\r]*\x1b\[K)*\r\x1b\[K$`)
	if !want.MatchString(term) {
		t.Fatalf("on the terminal: %q; want the download's line, erased, then the verification's, erased", term)
	}
}
