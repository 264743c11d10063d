package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/decisionledger/ledger/verify"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/decisionledger/ledger/internal/completion"
	"github.com/decisionledger/ledger/internal/shelltest"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		programName: func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
		// verify-proof FILE: what ledger-verify proof checks, with the
		// key in ledger.vkey; prints the entry's index and tree size.
		"verify-proof": func() { os.Exit(verifyProof(os.Args[1:])) },
		// verify-export FILE: what ledger-verify export checks, with the
		// key in ledger.vkey; prints the range and tree size.
		"verify-export": func() { os.Exit(verifyExport(os.Args[1:])) },
		// perm FILE: prints FILE's permission bits in octal.
		"perm": func() {
			fi, err := os.Stat(os.Args[1])
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			fmt.Printf("%o\n", fi.Mode().Perm())
		},
	})
}

// TestScript runs the CLI scripts in testdata/script (txtar), each against
// its own fake ledgerd (startFake) whose URL is $URL; the work directory
// holds ledger.vkey (its verifier key), other.vkey (another log's key) and
// token (the mediator's token, also in $TOKEN).
func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			f, err := startFake(ledger.Options{})
			if err != nil {
				return err
			}
			env.Defer(f.close)
			_, other, err := ledger.GenerateKey(origin)
			if err != nil {
				return err
			}
			for name, text := range map[string]string{"ledger.vkey": f.vkey, "other.vkey": other, "token": f.token} {
				if err := os.WriteFile(filepath.Join(env.WorkDir, name), []byte(text+"\n"), 0o600); err != nil {
					return err
				}
			}
			env.Setenv("URL", f.srv.URL)
			env.Setenv("TOKEN", f.token)
			env.Setenv(tokenEnv, "")
			env.Setenv(urlEnv, "")
			return nil
		},
		Condition: shelltest.Condition,
	})
}

func verifyExport(args []string) int {
	vkey, err := os.ReadFile("ledger.vkey")
	if err != nil || len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: verify-export FILE (with ledger.vkey)", err)
		return 2
	}
	key, err := verify.ParseKey(strings.TrimSpace(string(vkey)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	f, err := os.Open(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer f.Close()
	r, err := verify.VerifyExport(f, key, verify.ExportOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("verified: entries [%d, %d) in the tree of size %d\n", r.Start, r.End, r.Checkpoint.Size)
	return 0
}

func verifyProof(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: verify-proof FILE")
		return 2
	}
	vkey, err := os.ReadFile("ledger.vkey")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	key, err := verify.ParseKey(strings.TrimSpace(string(vkey)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	e, cp, err := verify.VerifyTlogProof(b, key)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("verified: entry %d (%s) in the tree of size %d\n", e.Index, e.Action, cp.Size)
	return 0
}

const origin = "ledger.example.com/log"

// fake is a ledgerd-like server for the tests: the real ledger (in
// memory, signing with a real key) behind the endpoints ledgerctl uses,
// with ledgerd's status codes and error bodies (docs/api.md). It signs a
// checkpoint after every append, so that proofs are available at once.
type fake struct {
	l     *ledger.Ledger
	srv   *httptest.Server
	vkey  string
	token string
	// lie, if set, rewrites the body of a read answer (path, body).
	lie atomic.Pointer[func(path string, body []byte) []byte]
}

func startFake(opts ledger.Options) (*fake, error) {
	skey, vkey, err := ledger.GenerateKey(origin)
	if err != nil {
		return nil, err
	}
	key, err := ledger.ParseKey([]byte(skey), ledger.KeyOptions{})
	if err != nil {
		return nil, err
	}
	opts.CheckpointInterval = -1
	opts.Logger = slog.New(slog.DiscardHandler)
	l, err := ledger.Open(context.Background(), memory.New(), key, opts)
	if err != nil {
		return nil, err
	}
	f := &fake{l: l, vkey: vkey, token: "mediator-token-for-tests-0123456789"}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/entries", f.appendEntry)
	mux.HandleFunc("GET /v1/entries/{index}", f.read(func(r *http.Request, index uint64) ([]byte, error) {
		return l.Entry(r.Context(), index)
	}))
	mux.HandleFunc("GET /v1/proofs/{index}", f.read(func(r *http.Request, index uint64) ([]byte, error) {
		return l.TlogProof(r.Context(), index, 0)
	}))
	mux.HandleFunc("GET /v1/checkpoint", func(w http.ResponseWriter, r *http.Request) {
		cp, _ := l.Checkpoint()
		if cp == nil { // ledger.Open signs the empty tree's checkpoint
			writeError(w, http.StatusNotFound, "no_checkpoint", "no checkpoint has been signed yet")
			return
		}
		f.write(w, r, cp)
	})
	mux.HandleFunc("GET /v1/consistency", func(w http.ResponseWriter, r *http.Request) {
		size1, err1 := strconv.ParseUint(r.URL.Query().Get("size1"), 10, 64)
		size, err2 := strconv.ParseUint(r.URL.Query().Get("tree_size"), 10, 64)
		if err1 != nil || err2 != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", "size1 and tree_size")
			return
		}
		hashes, err := l.ConsistencyProof(r.Context(), size1, size)
		if err != nil {
			writeError(w, http.StatusBadRequest, "out_of_range", "no such trees")
			return
		}
		if hashes == nil {
			hashes = [][]byte{}
		}
		b, _ := json.Marshal(map[string]any{"size1": size1, "tree_size": size, "hashes": hashes})
		f.write(w, r, b)
	})
	f.srv = httptest.NewServer(mux)
	return f, nil
}

func (f *fake) close() {
	f.srv.Close()
	f.l.Close()
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": message}})
}

func (f *fake) write(w http.ResponseWriter, r *http.Request, b []byte) {
	if lie := f.lie.Load(); lie != nil {
		b = (*lie)(r.URL.Path, b)
	}
	w.Write(b)
}

func (f *fake) read(get func(*http.Request, uint64) ([]byte, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		index, err := strconv.ParseUint(r.PathValue("index"), 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", "the index is not a decimal integer")
			return
		}
		b, err := get(r, index)
		if err != nil {
			writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no entry %d", index))
			return
		}
		f.write(w, r, b)
	}
}

func (f *fake) appendEntry(w http.ResponseWriter, r *http.Request) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || token != f.token {
		writeError(w, http.StatusUnauthorized, "unauthenticated", "a mediator bearer token is required")
		return
	}
	var req struct {
		Principal    string          `json:"principal"`
		Action       string          `json:"action"`
		Decision     string          `json:"decision"`
		Policies     []string        `json:"policies"`
		ParamsDigest string          `json:"params_digest"`
		ParamsSize   int             `json:"params_size"`
		TiersDigest  string          `json:"tiers_digest"`
		Attributes   json.RawMessage `json:"attributes"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 256<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "the body is not an append request")
		return
	}
	rec := ledger.Record{Mediator: "local", Principal: req.Principal, Action: req.Action,
		Decision: entry.Decision(req.Decision), Policies: req.Policies, Attributes: req.Attributes,
		IdempotencyKey: r.Header.Get("Idempotency-Key")}
	var err1, err2 error
	rec.Params.Digest, err1 = commit.ParseDigest(req.ParamsDigest)
	rec.Tiers, err2 = commit.ParseDigest(req.TiersDigest)
	rec.Params.Size = req.ParamsSize
	if err1 != nil || err2 != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "a bad digest")
		return
	}
	receipt, err := f.l.Append(r.Context(), rec)
	switch {
	case errors.Is(err, ledger.ErrInvalidRecord):
		writeError(w, http.StatusBadRequest, "invalid_record", err.Error())
		return
	case errors.Is(err, ledger.ErrIdempotencyConflict):
		writeError(w, http.StatusConflict, "idempotency_conflict", "the Idempotency-Key was used for another decision")
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the entry was not appended")
		return
	}
	if _, err := f.l.Publish(r.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "no checkpoint")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if receipt.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
	fmt.Fprintf(w, `{"index":%d,"leaf_hash":"%x","entry":%s}`+"\n", receipt.Index, receipt.LeafHash, receipt.Entry)
}

// decision is a decision file for the fake (any action: it has no catalog).
const decision = `{
  "principal": "agent:accounts-7", "action": "make_payment", "decision": "needs_approval",
  "policies": ["payments.over-10k"],
  "params_digest": "sha256:e19d67a48f4991a8c6d703eadcc9b39f8cc56e0e1fb9bbdd667daf2ad2f2d0a8",
  "params_size": 146,
  "tiers_digest": "sha256:4097889236a2af26c293033feb964c4cf118c0224e0d063fec0a89e9d0569ef2",
  "attributes": {"amount_minor": 1250000, "currency": "EUR", "payee_known": true}
}`

// ledgerctl runs the command in dir with the environment variable
// LEDGER_TOKEN set to token, and returns its exit status and output.
func ledgerctl(t *testing.T, dir, token string, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv(tokenEnv, token)
	t.Chdir(dir)
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(decision), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// Exit statuses: 0 done and verified; 1 refused by the server, not
// verified, or no answer; 2 bad usage or unreadable input.
func TestExitStatus(t *testing.T) {
	f, err := startFake(ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	_, other, _ := ledger.GenerateKey(origin)
	dir := t.TempDir()
	for name, text := range map[string]string{"decision.json": decision, "bad.json": `{"principal":"p"}`, "token": f.token} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	url := "--url=" + f.srv.URL
	key := "--key=" + f.vkey
	for _, c := range []struct {
		name  string
		token string
		args  []string
		code  int
	}{
		{"no command", "", nil, exitUsage},
		{"help", "", []string{"--help"}, exitOK},
		{"unknown command", "", []string{"delete", "0"}, exitUsage},
		{"append", f.token, []string{"append", url, key, "decision.json"}, exitOK},
		{"append from standard input", f.token, []string{"append", url, key, "-"}, exitOK},
		{"append, token from a file", "", []string{"append", url, key, "--token-file", "token", "decision.json"}, exitOK},
		{"append without a token", "", []string{"append", url, key, "decision.json"}, exitUsage},
		{"append with a wrong token", "not-the-token", []string{"append", url, key, "decision.json"}, exitFailed},
		{"append without a key", f.token, []string{"append", url, "decision.json"}, exitUsage},
		{"append with a key file that holds no key", f.token, []string{"append", url, key, "--key-file", "token", "decision.json"}, exitUsage},
		{"append with a malformed key", f.token, []string{"append", url, "--key=nonsense", "decision.json"}, exitUsage},
		{"append of a missing file", f.token, []string{"append", url, key, "missing.json"}, exitUsage},
		{"append of a bad decision", f.token, []string{"append", url, key, "bad.json"}, exitFailed},
		{"append with a bad idempotency key", f.token, []string{"append", url, key, "--idempotency-key", "a b", "decision.json"}, exitUsage},
		{"append under another key", f.token, []string{"append", url, "--key=" + other, "decision.json"}, exitFailed},
		{"append, two files", f.token, []string{"append", url, key, "decision.json", "decision.json"}, exitUsage},
		{"get", "", []string{"get", url, key, "0"}, exitOK},
		{"get, flags after the index", "", []string{"get", "0", url, key}, exitOK},
		{"get of a missing entry", "", []string{"get", url, key, "99"}, exitFailed},
		{"get of a bad index", "", []string{"get", url, key, "007"}, exitUsage},
		{"get under another key", "", []string{"get", url, "--key=" + other, "0"}, exitFailed},
		{"proof", "", []string{"proof", url, key, "--out", "p", "0"}, exitOK},
		{"proof without --out", "", []string{"proof", url, key, "0"}, exitUsage},
		{"checkpoint", "", []string{"checkpoint", url, key}, exitOK},
		{"checkpoint with an argument", "", []string{"checkpoint", url, key, "0"}, exitUsage},
		{"no server", "", []string{"checkpoint", "--url=http://127.0.0.1:1", key}, exitFailed},
		{"not a URL", "", []string{"checkpoint", "--url=127.0.0.1:8080", key}, exitUsage},
		{"unknown flag", "", []string{"checkpoint", url, key, "--verbose"}, exitUsage},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := ledgerctl(t, dir, c.token, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, stdout, stderr)
			}
			if code != exitOK && !strings.HasPrefix(stderr, "ledgerctl: error: ") && c.args != nil {
				t.Errorf("stderr does not start with an error line: %q", stderr)
			}
		})
	}
}

// A server whose answers do not verify is not believed: an entry from
// another index, a changed byte in a proof, a checkpoint that does not
// extend the trusted one.
func TestLyingServer(t *testing.T) {
	f, err := startFake(ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "decision.json"), []byte(decision), 0o600)
	url, key := "--url="+f.srv.URL, "--key="+f.vkey
	for i := range 3 {
		if code, _, stderr := ledgerctl(t, dir, f.token, "append", url, key, "--idempotency-key", fmt.Sprint("k", i), "decision.json"); code != exitOK {
			t.Fatalf("append: %s", stderr)
		}
	}
	if code, _, stderr := ledgerctl(t, dir, "", "checkpoint", url, key, "--out", "at3.checkpoint"); code != exitOK {
		t.Fatalf("checkpoint: %s", stderr)
	}
	entry1, err := f.l.Entry(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		lie  func(path string, body []byte) []byte
		args []string
		want string
	}{
		{"another entry", func(path string, body []byte) []byte {
			if path == "/v1/entries/2" {
				return entry1
			}
			return body
		}, []string{"get", url, key, "2"}, "asked for entry 2, got entry 1"},
		{"a changed entry", func(path string, body []byte) []byte {
			return bytes.Replace(body, []byte("agent:accounts-7"), []byte("agent:accounts-8"), 1)
		}, []string{"get", url, key, "1"}, "does not verify"},
		{"a changed proof", func(path string, body []byte) []byte {
			// The proof's first hash line, one base64 character changed.
			lines := strings.Split(string(body), "\n")
			for i, l := range lines {
				if i > 2 && len(l) == 44 {
					c := "A"
					if l[0] == 'A' {
						c = "B"
					}
					lines[i] = c + l[1:]
					break
				}
			}
			return []byte(strings.Join(lines, "\n"))
		}, []string{"proof", url, key, "--out", "p", "0"}, "does not verify"},
		{"a forked tree", func(path string, body []byte) []byte {
			if path == "/v1/consistency" {
				return []byte(`{"size1":3,"tree_size":4,"hashes":["` + strings.Repeat("A", 43) + `="]}`)
			}
			return body
		}, []string{"checkpoint", url, key, "--trusted", "at3.checkpoint"}, "consistency"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "a forked tree" {
				if code, _, stderr := ledgerctl(t, dir, f.token, "append", url, key, "--idempotency-key", "k3", "decision.json"); code != exitOK {
					t.Fatalf("append: %s", stderr)
				}
			}
			f.lie.Store(&c.lie)
			defer f.lie.Store(nil)
			code, stdout, stderr := ledgerctl(t, dir, "", c.args...)
			if code != exitFailed || !strings.Contains(stderr, c.want) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, stdout, stderr, c.want)
			}
		})
	}
	// A proof that does not verify is not written.
	if _, err := os.Stat(filepath.Join(dir, "p")); err == nil {
		t.Errorf("a proof that does not verify was written")
	}
}

// A server that takes the connection and never answers: the error after
// --timeout names the URL tried, for a read and for an append (whose
// retries end with the context).
func TestTimeoutNamesURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	f, err := startFake(ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "decision.json"), []byte(decision), 0o600)
	url := "http://" + ln.Addr().String()
	for _, args := range [][]string{
		{"get", "--url", url, "--key", f.vkey, "--timeout", "200ms", "0"},
		{"append", "--url", url, "--key", f.vkey, "--timeout", "200ms", "decision.json"},
	} {
		code, _, stderr := ledgerctl(t, dir, f.token, args...)
		if code != exitFailed || !strings.Contains(stderr, "error: "+args[0]+": ") || !strings.Contains(stderr, url+"/v1/") || !strings.Contains(stderr, "no answer within --timeout") {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and an error naming %s/v1/...", args[0], code, stderr, url)
		}
	}
}

// Every flag of every command has its paragraph in the usage text, which
// COMMAND --help prints (commandUsage marks one without).
func TestCommandUsageCoversFlags(t *testing.T) {
	for _, name := range []string{"append", "decide", "get", "proof", "checkpoint", "export", "disclose", "minimize",
		"approval get", "approval wait", "approval consume", "approval outcome"} {
		var stdout, stderr bytes.Buffer
		if code := run(append(strings.Fields(name), "--help"), strings.NewReader(""), &stdout, &stderr); code != exitOK {
			t.Fatalf("%s --help: exit %d: %s", name, code, stderr.String())
		}
		if !strings.HasPrefix(stdout.String(), "Usage:\n    ledgerctl "+name+" ") || !strings.Contains(stdout.String(), "\n    "+name) {
			t.Errorf("%s --help has not its synopsis and paragraph:\n%s", name, stdout.String())
		}
		if strings.Contains(stdout.String(), undescribed) {
			t.Errorf("%s --help:\n%s", name, stdout.String())
		}
	}
}

// A body's preview is kept, canonical, for the client to send and check
// (append and decide); a decide body refuses an append's members.
func TestParseBodyPreview(t *testing.T) {
	body := `{"principal":"agent:example-1","action":"send_email",
  "params_digest":"sha256:ea3faad1e7a4656a02843c9c4a90e8cbe755372c60e9f55e4648135054324eb1","params_size":65,
  "tiers_digest":"sha256:18824ccc509c09ce6759b05c85686d44b4a45bf16240fabda33221d05fcf3e98",
  "attributes":{},"preview":{"to":"carol@example.org", "subject":"Q3"}}`
	empty := ""
	for _, decide := range []bool{false, true} {
		f := fill{principal: &empty, decision: &empty, policies: new(policyFlag)}
		b := body
		if !decide {
			b = strings.Replace(b, `"action"`, `"decision":"needs_approval","action"`, 1)
		}
		d, err := parseBody([]byte(b), decide, f)
		if err != nil {
			t.Fatalf("decide %v: %v", decide, err)
		}
		if string(d.Preview) != `{"subject":"Q3","to":"carol@example.org"}` {
			t.Errorf("decide %v: preview %q", decide, d.Preview)
		}
	}
	f := fill{principal: &empty}
	if _, err := parseBody([]byte(strings.Replace(body, `"action"`, `"decision":"allow","action"`, 1)), true, f); err == nil || !strings.Contains(err.Error(), "unknown member decision") {
		t.Errorf("a decide body with a decision: %v", err)
	}
}

// TestUsageNamesEveryFlag holds every command's --help (and so what
// completion offers) to the flags the command defines: each flag is
// named, and its synopsis names no other.
func TestUsageNamesEveryFlag(t *testing.T) {
	defer func() { onHelp = nil }()
	for _, words := range completedCommands {
		if words[0] == "completion" || words[0] == "version" {
			continue
		}
		var fs *flag.FlagSet
		onHelp = func(f *flag.FlagSet) { fs = f }
		var stdout, stderr strings.Builder
		name := strings.Join(words, " ")
		if code := run(append(slices.Clone(words), "--help"), strings.NewReader(""), &stdout, &stderr); code != exitOK || fs == nil {
			t.Fatalf("%s --help: exit %d, flag set seen %v: %s", name, code, fs != nil, stderr.String())
		}
		named := map[string]bool{}
		for _, o := range completion.FromHelp(words, stdout.String()).Options {
			named[o.Name] = true
			if fs.Lookup(o.Name) == nil {
				t.Errorf("%s: its usage names --%s, which it does not define", name, o.Name)
			}
		}
		fs.VisitAll(func(f *flag.Flag) {
			if !named[f.Name] {
				t.Errorf("%s: defines --%s, which its usage does not name", name, f.Name)
			}
		})
	}
}
