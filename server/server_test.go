package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decisionledger/ledger/catalog"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/policy"
	"github.com/decisionledger/ledger/server/approvals"
	"github.com/decisionledger/ledger/server/metrics"
	"github.com/decisionledger/ledger/server/policies"
	"github.com/decisionledger/ledger/storage/badger"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/decisionledger/ledger/storage/postgres"
	"github.com/decisionledger/ledger/verify"
	"github.com/decisionledger/ledger/witness"
	tlog "github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

type testServer struct {
	url   string
	token string
	l     *ledger.Ledger
	key   *ledger.Key
	cfg   *config.Config
	srv   *Server
	// stopWitnesses stops the witnesses' submissions, if any.
	stopWitnesses func()
}

// testDataDir makes in dir what a first start of ledgerd makes in its
// data directory (cmd/ledgerd): a signing key for ledger.localhost/log
// (mode 0600), an empty store directory, and the config ledgerd.json
// naming them and the mediator "local", whose token it returns; the
// config holds only the token's SHA-256.
func testDataDir(t testing.TB, dir string) (configPath, token string) {
	t.Helper()
	skey, _, err := ledger.GenerateKey("ledger.localhost/log")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ledger.key"), []byte(skey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	token, hash := newToken()
	cfg := config.Config{Listen: config.DefaultListen, KeyFile: "ledger.key", StoreDir: "store",
		Mediators: []config.Mediator{{Name: "local", TokenSHA256: hash}}}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	configPath = filepath.Join(dir, "ledgerd.json")
	if err := os.WriteFile(configPath, append(b, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	return configPath, token
}

// newToken returns a new random bearer token and the lower-case hex of
// its SHA-256, as a config holds it.
func newToken() (token, sha256Hex string) {
	raw := make([]byte, 32)
	rand.Read(raw)
	token = hex.EncodeToString(raw)
	sum := sha256.Sum256([]byte(token))
	return token, hex.EncodeToString(sum[:])
}

// optionsOf are the Options cfg sets, as ledgerd makes them (its config
// checked); a test's change to cfg that does not parse gets the default.
func optionsOf(cfg *config.Config, l *ledger.Ledger, log *slog.Logger) Options {
	body, _ := cfg.BodyTimeoutDuration()
	write, _ := cfg.WriteTimeoutDuration()
	return Options{Ledger: l, Credentials: NewCredentials(cfg), Logger: log,
		TilesPrefix: cfg.TilesPrefix, MaxBodyBytes: cfg.MaxBodyBytes, BodyTimeout: body, WriteTimeout: write,
		TLS: cfg.TLS != nil}
}

// newServer is New of optionsOf(cfg, l, log), changed by change if set.
func newServer(t testing.TB, cfg *config.Config, l *ledger.Ledger, log *slog.Logger, change func(*Options)) *Server {
	t.Helper()
	opts := optionsOf(cfg, l, log)
	if change != nil {
		change(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func startServer(t testing.TB) *testServer {
	t.Helper()
	return startServerWith(t, nil)
}

// startServerWith lets a test change the config before the server starts.
// testLogs, if set, receives the test servers' logs (JSON lines).
var testLogs io.Writer

func startServerWith(t testing.TB, change func(*config.Config)) *testServer {
	t.Helper()
	return startServerOn(t, change, nil)
}

// startServerOn serves a ledger on store, or, if store is nil, on a new
// badger store in the config's store_dir.
func startServerOn(t testing.TB, change func(*config.Config), store ledger.Store) *testServer {
	t.Helper()
	dir := t.TempDir()
	path, token := testDataDir(t, dir)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(cfg)
	}
	key, err := ledger.LoadKey(cfg.KeyFile, ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	if testLogs != nil {
		logger = slog.New(slog.NewJSONHandler(testLogs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	var cat catalog.Catalog
	if cfg.CatalogDir != "" {
		if cat, err = catalog.Load(cfg.CatalogDir); err != nil {
			t.Fatal(err)
		}
	}
	if store == nil {
		if store, err = badger.Open(t.Context(), cfg.StoreDir, badger.Options{Logger: logger}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { store.Close() })
	l, err := ledger.Open(t.Context(), store, key, ledger.Options{CheckpointInterval: -1, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	opts := optionsOf(cfg, l, logger)
	opts.Catalog, opts.Metrics = cat, metrics.New()
	if cfg.Approvals != nil {
		if opts.Approvals, err = approvals.New(cfg.Approvals, cfg.StoreDir, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	opts.Policies = policies.New(cfg.PolicyDir, cfg.StoreDir, cat, l, logger, opts.Metrics)
	if cfg.PolicyDir != "" {
		set, err := policy.Load(cfg.PolicyDir, cat.Declarations())
		if err != nil {
			t.Fatal(err)
		}
		if err := opts.Policies.Start(t.Context(), set); err != nil {
			t.Fatal(err)
		}
	}
	stopWitnesses := func() {}
	if len(cfg.Witnesses) > 0 {
		var cs witness.Store = witness.NewFile(filepath.Join(cfg.StoreDir, "cosigned-checkpoint"), l.CheckpointAt)
		if pg, ok := store.(*postgres.Store); ok {
			cs = pg
		}
		wopts, err := testWitnessOptions(cfg, l, cs, logger)
		if err != nil {
			t.Fatal(err)
		}
		wopts.BackoffMin, wopts.BackoffMax = 20*time.Millisecond, 200*time.Millisecond
		if cfg.WitnessInterval == "" {
			wopts.Interval = 20 * time.Millisecond
		}
		if opts.Witnesses, err = witness.New(t.Context(), wopts); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			opts.Witnesses.Run(ctx)
		}()
		stopWitnesses = sync.OnceFunc(func() { cancel(); <-done })
		// Before the ledger closes (cleanups run last first).
		t.Cleanup(stopWitnesses)
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := serveHTTP(t, cfg, srv)
	return &testServer{url: hs.URL, token: token, l: l, key: key, cfg: cfg, srv: srv,
		stopWitnesses: stopWitnesses}
}

// testWitnessOptions are the options of cfg's witnesses (checked) over
// l, keeping the cosignatures in store, as ledgerd makes them.
func testWitnessOptions(cfg *config.Config, l *ledger.Ledger, store witness.Store, log *slog.Logger) (witness.Options, error) {
	interval, err := cfg.WitnessIntervalDuration()
	if err != nil {
		return witness.Options{}, err
	}
	opts := witness.Options{Log: l, Store: store, Interval: interval, Needed: cfg.WitnessesNeededCount(), Logger: log}
	for i, c := range cfg.Witnesses {
		k, err := verify.ParseWitnessKey(c.Key)
		if err != nil {
			return witness.Options{}, fmt.Errorf("witnesses[%d] (%s): %w", i, c.Name, err)
		}
		opts.Witnesses = append(opts.Witnesses, witness.Witness{Name: c.Name, URL: c.URL, Key: k})
	}
	return opts, nil
}

func (s *testServer) post(t *testing.T, token, body string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.url+"/v1/entries", strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// Appends from concurrent clients over HTTP, then an export downloaded
// over HTTP verifies offline with the verifier key alone.
func TestAppendExportVerify(t *testing.T) {
	s := startServer(t)
	const n = 300
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, b := s.post(t, s.token, apitest.AppendBody(i))
			if resp.StatusCode != http.StatusCreated {
				errs <- fmt.Sprintf("append %d: %d %s", i, resp.StatusCode, b)
			}
			var r struct {
				Index uint64          `json:"index"`
				Entry json.RawMessage `json:"entry"`
			}
			if err := json.Unmarshal(b, &r); err != nil || !bytes.Contains(r.Entry, []byte(`"mediator":"local"`)) {
				errs <- fmt.Sprintf("append %d: receipt %s", i, b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if _, err := s.l.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(fmt.Sprintf("%s/v1/export?start=0&end=%d", s.url, n))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("export: %v %v", err, resp.Status)
	}
	defer resp.Body.Close()
	key, err := verify.ParseKey(s.key.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	report, err := verify.VerifyExport(resp.Body, key, verify.ExportOptions{})
	if err != nil {
		t.Fatalf("export does not verify: %v", err)
	}
	if report.End != n {
		t.Errorf("export of %d entries", report.End)
	}
	checkProofEndpoints(t, s, n)
	proofResp, err := http.Get(s.url + "/v1/proofs/17")
	if err != nil {
		t.Fatal(err)
	}
	proofBytes, _ := io.ReadAll(proofResp.Body)
	proofResp.Body.Close()
	if _, _, err := verify.VerifyTlogProof(proofBytes, key); err != nil {
		t.Errorf("tlog-proof: %v", err)
	}
}

// Bad requests get the right status and a typed error, and append nothing.
func TestAppendRefusals(t *testing.T) {
	s := startServer(t)
	good := apitest.AppendBody(1)
	cases := []struct {
		name   string
		token  string
		body   string
		status int
		code   string
	}{
		{"no-token", "", good, 401, "unauthenticated"},
		{"wrong-token", strings.Repeat("0", 64), good, 401, "unauthenticated"},
		{"claims-a-mediator", s.token, strings.Replace(good, `{"principal"`, `{"mediator":"other","principal"`, 1), 400, "invalid_request"},
		{"unknown-field", s.token, strings.Replace(good, `{"principal"`, `{"zzz":1,"principal"`, 1), 400, "invalid_request"},
		{"malformed", s.token, good[:40], 400, "invalid_request"},
		{"two-objects", s.token, good + good, 400, "invalid_request"},
		{"oversized-after-object", s.token, good + strings.Repeat(" ", 300<<10), 413, "too_large"},
		{"oversized", s.token, strings.Replace(good, `"payee_known":true`, `"memo":"`+strings.Repeat("x", 300<<10)+`"`, 1), 413, "too_large"},
		{"bad-digest", s.token, strings.Replace(good, `"params_digest":"sha256:`, `"params_digest":"sha512:`, 1), 400, "invalid_request"},
		{"bad-decision", s.token, strings.Replace(good, `"allow"`, `"maybe"`, 1), 400, "invalid_record"},
		{"attributes-not-nfc", s.token, strings.Replace(good, `"payee_known":true`, `"payee":"e\u0301"`, 1), 400, "invalid_request"},
		{"repeated-member", s.token, strings.Replace(good, `{"principal":"agent-1"`, `{"principal":"agent-1","principal":"agent-2"`, 1), 400, "invalid_request"},
		{"invalid-utf8", s.token, strings.Replace(good, `"agent-1"`, "\"agent-\xff\"", 1), 400, "invalid_request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, b := s.post(t, c.token, c.body)
			var e struct {
				Error apiError `json:"error"`
			}
			json.Unmarshal(b, &e)
			if resp.StatusCode != c.status || e.Error.Code != c.code {
				t.Fatalf("got %d %s, want %d %s", resp.StatusCode, b, c.status, c.code)
			}
			if bytes.Contains(b, []byte(strings.Repeat("x", 20))) {
				t.Errorf("error repeats the body")
			}
		})
	}
	if s.l.Size() != 0 {
		t.Fatalf("%d entries appended by refused requests", s.l.Size())
	}
}

// FuzzAppendHandler: no body panics the handler, and whatever is accepted
// is a well-formed append.
func FuzzAppendHandler(f *testing.F) {
	f.Add([]byte(apitest.AppendBody(1)))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"attributes":[]}`))
	dir := f.TempDir()
	path, token := testDataDir(f, dir)
	cfg, _ := config.Load(path)
	key, _ := ledger.LoadKey(cfg.KeyFile, ledger.KeyOptions{})
	l, err := ledger.Open(context.Background(), memory.New(), key, ledger.Options{CheckpointInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	h := newServer(f, cfg, l, slog.New(slog.DiscardHandler), nil).Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		before := l.Size()
		req := httptest.NewRequest("POST", "/v1/entries", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusCreated:
			if l.Size() != before+1 {
				t.Fatalf("201 but size %d -> %d", before, l.Size())
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if l.Size() != before {
				t.Fatalf("refused (%d) but appended", w.Code)
			}
		default:
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	})
}

// checkProofEndpoints verifies the served checkpoint with note and
// formats/log, and the served proofs with merkle/proof: code we did not
// write.
func checkProofEndpoints(t *testing.T, s *testServer, n uint64) {
	t.Helper()
	resp, err := http.Get(s.url + "/v1/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	signed, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	v, err := note.NewVerifier(s.key.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	cp, _, _, err := tlog.ParseCheckpoint(signed, s.key.Name(), v)
	if err != nil || cp.Size != n {
		t.Fatalf("served checkpoint: %v (size %v)", err, cp)
	}
	var p proofJSON
	if code := apitest.GetJSON(t, s.url+"/v1/inclusion?index=42", &p); code != 200 {
		t.Fatalf("inclusion: %d", code)
	}
	b, _ := s.l.Entry(context.Background(), 42)
	leaf := rfc6962.DefaultHasher.HashLeaf(b)
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, 42, cp.Size, leaf, p.Hashes, cp.Hash); err != nil {
		t.Errorf("inclusion proof: %v", err)
	}
	var byHash proofJSON
	if code := apitest.GetJSON(t, fmt.Sprintf("%s/v1/inclusion?leaf_hash=%x", s.url, leaf), &byHash); code != 200 || *byHash.Index != 42 {
		t.Fatalf("inclusion by hash: %d", code)
	}
	// An earlier tree: the checkpoint at 100 was never published, so ask
	// for consistency from a size the log has published (n) to itself and
	// check the bounds are enforced.
	var c proofJSON
	if code := apitest.GetJSON(t, fmt.Sprintf("%s/v1/consistency?size1=%d", s.url, n), &c); code != 200 || len(c.Hashes) != 0 {
		t.Errorf("consistency to itself: %d %d hashes", code, len(c.Hashes))
	}
	if code := apitest.GetJSON(t, fmt.Sprintf("%s/v1/consistency?size1=%d", s.url, n+1), &c); code != 400 {
		t.Errorf("consistency beyond the checkpoint: %d", code)
	}
	if code := apitest.GetJSON(t, s.url+"/v1/inclusion?index=abc", &p); code != 400 {
		t.Errorf("bad index: %d", code)
	}
	// Grow the log, sign again, and prove the new tree extends the old.
	for i := range 10 {
		if resp, b := s.post(t, s.token, apitest.AppendBody(1000+i)); resp.StatusCode != 201 {
			t.Fatalf("append: %s", b)
		}
	}
	newer, err := s.l.Publish(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cp2, _, _, err := tlog.ParseCheckpoint(newer, s.key.Name(), v)
	if err != nil {
		t.Fatal(err)
	}
	if code := apitest.GetJSON(t, fmt.Sprintf("%s/v1/consistency?size1=%d", s.url, n), &c); code != 200 {
		t.Fatalf("consistency: %d", code)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, cp.Size, cp2.Size, c.Hashes, cp.Hash, cp2.Hash); err != nil {
		t.Errorf("consistency proof %d -> %d: %v", cp.Size, cp2.Size, err)
	}
}

func TestIdempotencyKeyHeader(t *testing.T) {
	s := startServer(t)
	resp, first := s.post(t, s.token, apitest.AppendBody(1), "Idempotency-Key", "req-42")
	if resp.StatusCode != 201 {
		t.Fatalf("first: %d %s", resp.StatusCode, first)
	}
	resp, again := s.post(t, s.token, apitest.AppendBody(1), "Idempotency-Key", "req-42")
	if resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(first, again) {
		t.Fatalf("retry: %d %s", resp.StatusCode, again)
	}
	resp, b := s.post(t, s.token, apitest.AppendBody(2), "Idempotency-Key", "req-42")
	if resp.StatusCode != 409 || !strings.Contains(string(b), "idempotency_conflict") {
		t.Fatalf("reuse for another decision: %d %s", resp.StatusCode, b)
	}
	resp, b = s.post(t, s.token, apitest.AppendBody(3), "Idempotency-Key", "bad key")
	if resp.StatusCode != 400 {
		t.Fatalf("invalid key: %d %s", resp.StatusCode, b)
	}
	if s.l.Size() != 1 {
		t.Fatalf("size %d, want 1", s.l.Size())
	}
}

// /metrics exposes counters without request values.
func TestMetrics(t *testing.T) {
	s := startServer(t)
	s.post(t, s.token, apitest.AppendBody(1))
	s.post(t, "", apitest.AppendBody(2))
	s.post(t, s.token, strings.Replace(apitest.AppendBody(3), `"allow"`, `"secret-decision-value"`, 1))
	m := apitest.Get(t, s.url+"/metrics")
	for _, want := range []string{
		`ledgerd_appends_total{replayed="false"} 1`,
		`ledgerd_rejects_total{code="unauthenticated"} 1`,
		`ledgerd_rejects_total{code="invalid_record"} 1`,
		`ledgerd_append_seconds_count 1`,
		`ledgerd_tree_size 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
	if strings.Contains(m, "secret-decision-value") || strings.Contains(m, s.token) {
		t.Error("metrics contain a request value")
	}
}

func TestRateLimit(t *testing.T) {
	s := startServer(t)
	s.cfg.Mediators[0].RatePerSecond, s.cfg.Mediators[0].Burst = 2, 3
	rl := newLimiter(s.cfg)
	now := time.Now()
	for i := range 3 {
		if ok, _ := rl.allow("local", now); !ok {
			t.Fatalf("request %d within the burst refused", i)
		}
	}
	ok, wait := rl.allow("local", now)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("4th at once: %v, wait %v; want refused, 500ms", ok, wait)
	}
	if ok, _ := rl.allow("local", now.Add(500*time.Millisecond)); !ok {
		t.Fatal("refused after the wait")
	}
	if ok, _ := rl.allow("someone-else", now); !ok {
		t.Fatal("a mediator without a rate was limited")
	}
	// Over HTTP: 429 with Retry-After, nothing appended.
	s2 := startServerWith(t, func(c *config.Config) { c.Mediators[0].RatePerSecond, c.Mediators[0].Burst = 1, 1 })
	if resp, b := s2.post(t, s2.token, apitest.AppendBody(1)); resp.StatusCode != 201 {
		t.Fatalf("first: %d %s", resp.StatusCode, b)
	}
	resp, b := s2.post(t, s2.token, apitest.AppendBody(2))
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(b), "rate_limited") {
		t.Fatalf("second: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	if s2.l.Size() != 1 {
		t.Fatalf("size %d", s2.l.Size())
	}
}

// ?wait=checkpoint answers once a signed checkpoint covers the entry, with
// an inclusion proof that verifies against it.
func TestAppendWaitCheckpoint(t *testing.T) {
	s := startServer(t)
	// Stand in for the periodic checkpoints (off in tests) until the
	// answer arrives, however slow the machine.
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
				s.l.Publish(context.Background())
			}
		}
	}()
	req, _ := http.NewRequest("POST", s.url+"/v1/entries?wait=checkpoint", strings.NewReader(apitest.AppendBody(1)))
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Index     uint64          `json:"index"`
		Entry     json.RawMessage `json:"entry"`
		Inclusion struct {
			Checkpoint string   `json:"checkpoint"`
			TreeSize   uint64   `json:"tree_size"`
			Hashes     [][]byte `json:"hashes"`
		} `json:"inclusion"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 201 {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	v, _ := note.NewVerifier(s.key.VerifierKey())
	cp, _, _, err := tlog.ParseCheckpoint([]byte(r.Inclusion.Checkpoint), s.key.Name(), v)
	if err != nil || cp.Size != r.Inclusion.TreeSize {
		t.Fatalf("checkpoint: %v", err)
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, r.Index, cp.Size, rfc6962.DefaultHasher.HashLeaf(r.Entry), r.Inclusion.Hashes, cp.Hash); err != nil {
		t.Fatalf("inclusion proof: %v", err)
	}
}

// checkpointStatus is the status of GET /v1/checkpoint at url with the
// bearer token, or with none if token is empty.
func checkpointStatus(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/v1/checkpoint", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestProtectedReads(t *testing.T) {
	readerToken := "reader-secret-token"
	sum := sha256.Sum256([]byte(readerToken))
	s := startServerWith(t, func(c *config.Config) { c.ReaderTokensSHA256 = []string{fmt.Sprintf("%x", sum)} })
	s.post(t, s.token, apitest.AppendBody(1))
	s.l.Publish(context.Background())
	read := func(token string) int { return checkpointStatus(t, s.url, token) }
	if code := read(""); code != 401 {
		t.Errorf("no token: %d", code)
	}
	if code := read("wrong"); code != 401 {
		t.Errorf("wrong token: %d", code)
	}
	if code := read(readerToken); code != 200 {
		t.Errorf("reader token: %d", code)
	}
	if code := read(s.token); code != 200 {
		t.Errorf("mediator token: %d", code)
	}
	if resp, err := http.Get(s.url + "/tile/0/000.p/1"); err != nil || resp.StatusCode != 401 {
		t.Errorf("tiles without a token: %v", resp.Status)
	}
	if resp, err := http.Get(s.url + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("healthz needs no token")
	}
}
