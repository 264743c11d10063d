package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
)

// Appends and protected reads need the Bearer scheme, whose name is
// matched without regard to case (RFC 9110 §11.1); a bare token is refused.
func TestBearerScheme(t *testing.T) {
	readerToken := "reader-secret-token"
	sum := sha256.Sum256([]byte(readerToken))
	s := startServerWith(t, func(c *config.Config) { c.ReaderTokensSHA256 = []string{fmt.Sprintf("%x", sum)} })
	do := func(method, path, authorization, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for i, auth := range []string{"Bearer " + s.token, "bearer " + s.token, "BEARER " + s.token, "bEaReR  " + s.token} {
		if code := do("POST", "/v1/entries", auth, apitest.AppendBody(i)); code != http.StatusCreated {
			t.Errorf("append with %q: %d", strings.Replace(auth, s.token, "TOKEN", 1), code)
		}
	}
	for _, auth := range []string{s.token, "Basic " + s.token, "Bearer" + s.token, "Bearer ", "Token " + s.token} {
		if code := do("POST", "/v1/entries", auth, apitest.AppendBody(9)); code != http.StatusUnauthorized {
			t.Errorf("append with %q: %d, want 401", strings.Replace(auth, s.token, "TOKEN", 1), code)
		}
	}
	s.l.Publish(context.Background())
	for _, auth := range []string{"Bearer " + readerToken, "bearer " + readerToken, "BEARER " + readerToken, "bearer " + s.token} {
		if code := do("GET", "/v1/checkpoint", auth, ""); code != http.StatusOK {
			t.Errorf("read with %q: %d", auth, code)
		}
	}
	for _, auth := range []string{readerToken, s.token, "Basic " + readerToken, "Bearer" + readerToken, "Bearer "} {
		if code := do("GET", "/v1/checkpoint", auth, ""); code != http.StatusUnauthorized {
			t.Errorf("read with %q: %d, want 401", auth, code)
		}
	}
}

// A 400 names where a fault is, by the fields of the append request,
// positions and byte offsets, never by a member name the client made up.
func TestAppendErrorsRepeatNoClientName(t *testing.T) {
	s := startServer(t)
	good := apitest.AppendBody(1)
	const name = "SECRETNAME"
	cases := []struct {
		body, want string
	}{
		{strings.Replace(good, `{"principal"`, `{"`+name+`":1,"principal"`, 1), "unknown member at index 0 of the top-level object"},
		{strings.TrimSuffix(good, "}") + `,"` + name + `":1}`, "unknown member at index 8 of the top-level object"},
		{strings.Replace(good, `"payee_known":true`, `"`+name+`":"e\u0301"`, 1), "not_nfc inside /attributes (byte "},
		{strings.Replace(good, `"payee_known":true`, `"`+name+`":1,"`+name+`":2`, 1), "duplicate_key inside /attributes (byte "},
		{strings.Replace(good, `"payee_known":true`, `"`+name+"e\u0301"+`":1`, 1), "not_nfc in a member name inside /attributes (byte "},
		{strings.Replace(good, `"payee_known":true`, `"`+name+`":{"`+name+`":1.5}`, 1), "non_integer inside /attributes (byte "},
		{strings.Replace(good, `{"principal"`, `{"`+name+`":"e\u0301","principal"`, 1), "not_nfc in a member that is not a field (byte "},
		{strings.Replace(good, `"agent-1"`, `"e\u0301"`, 1), "not_nfc at /principal (byte "},
		{strings.Replace(good, `"agent-1"`, `1`, 1), `field \"principal\" has the wrong type`},
	}
	for _, c := range cases {
		resp, b := s.post(t, s.token, c.body)
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(b), name) || !strings.Contains(string(b), c.want) {
			t.Errorf("got %d %s, want 400 with %q and without the client's member name", resp.StatusCode, b, c.want)
		}
	}
}

// failingStore is a store whose commits fail once fail is set.
type failingStore struct {
	ledger.Store
	fail atomic.Bool
}

func (f *failingStore) Commit(ctx context.Context, b ledger.Batch) error {
	if f.fail.Load() {
		return errors.New("disk on fire")
	}
	return f.Store.Commit(ctx, b)
}

// After a storage failure every append is refused with 503: the failure is
// logged once, and the refusals counted.
func TestStorageFailureLoggedOnce(t *testing.T) {
	path, token := testDataDir(t, t.TempDir())
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ledger.LoadKey(cfg.KeyFile, ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	logs := &apitest.LockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	store := &failingStore{Store: memory.New()}
	l, err := ledger.Open(t.Context(), store, key, ledger.Options{CheckpointInterval: -1, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	hs := serveHTTP(t, cfg, newServer(t, cfg, l, logger, nil))
	s := &testServer{url: hs.URL, token: token, l: l}

	if resp, b := s.post(t, token, apitest.AppendBody(0)); resp.StatusCode != http.StatusCreated {
		t.Fatalf("append before the failure: %d %s", resp.StatusCode, b)
	}
	store.fail.Store(true)
	const n = 20
	for i := range n {
		if resp, b := s.post(t, token, apitest.AppendBody(1+i)); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("append %d after the failure: %d %s", i, resp.StatusCode, b)
		}
	}
	var ours []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct{ Level, Msg string }
		if json.Unmarshal([]byte(line), &rec) != nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
		// The ledger logs the failure of its store itself.
		if rec.Level == "ERROR" && !strings.HasPrefix(rec.Msg, "ledger: ") {
			ours = append(ours, line)
		}
	}
	if len(ours) != 1 {
		t.Errorf("%d appends refused after a storage failure logged %d ERROR lines, want 1:\n%s", n, len(ours), strings.Join(ours, "\n"))
	}
	if m := apitest.Get(t, s.url+"/metrics"); !strings.Contains(m, fmt.Sprintf(`ledgerd_rejects_total{code="unavailable"} %d`+"\n", n)) {
		t.Errorf("refusals not counted:\n%s", m)
	}
}
