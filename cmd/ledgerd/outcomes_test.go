package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/internal/referencecalls"
)

// TestDaemonAllowOutcome runs the real ledgerd and ledger-verify: two
// ledger decisions to allow (POST /v1/decide with the repository's
// catalog and policies) get outcomes — unknown, then succeeded; a second final one, an outcome of a deny
// decision, another mediator's and one past the log's size are refused,
// also after a restart — and the export verifies, its outcomes audited
// sound by ledger-verify approvals and its decisions replayed by
// ledger-verify decisions.
func TestDaemonAllowOutcome(t *testing.T) {
	t.Parallel() // a process of its own on its own directory and port
	if testing.Short() {
		t.Skip("builds and runs ledgerd")
	}
	ledgerd, ledgerVerify := buildBinaries(t)
	dir := t.TempDir()
	d := startDaemon(t, ledgerd, dir) // makes the data directory and a mediator token
	d.cmd.Process.Kill()
	d.cmd.Wait()
	token, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	const otherToken = "token-of-the-other-mediator-0123456789"
	otherHash := sha256.Sum256([]byte(otherToken))
	var cfg map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "data", "ledgerd.json"))
	if err != nil || json.Unmarshal(b, &cfg) != nil {
		t.Fatalf("reading the config: %v", err)
	}
	mediators := append(cfg["mediators"].([]any), map[string]any{"name": "other", "token_sha256": hex.EncodeToString(otherHash[:])})
	corpus, _ := filepath.Abs(apitest.CorpusDir)
	policies, _ := filepath.Abs(apitest.ReferencePolicies)
	setConfig(t, dir, map[string]any{"mediators": mediators, "catalog_dir": corpus, "policy_dir": policies})

	post := func(base, tok, path, key, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	var last uint64 // the index of the last entry appended
	index := func(b []byte) uint64 {
		t.Helper()
		var r struct{ Index *uint64 }
		if json.Unmarshal(b, &r) != nil || r.Index == nil {
			t.Fatalf("no receipt: %s", b)
		}
		last = max(last, *r.Index)
		return *r.Index
	}
	want := func(what string, status int, b []byte, wantStatus int, code string) {
		t.Helper()
		if status != wantStatus || (code != "" && errorCode(b) != code) {
			t.Fatalf("%s: %d %s, want %d %s", what, status, b, wantStatus, code)
		}
		if status == http.StatusCreated {
			index(b)
		}
	}

	d = startDaemon(t, ledgerd, dir)
	base := "http://" + d.addr
	tok := string(token)
	// Ledger decisions: small payments to a known payee, which the
	// reference policies allow, and one of nothing, which they deny.
	decide := func(amount int64, wantDecision string) uint64 {
		t.Helper()
		status, body := post(base, tok, "/v1/decide", "", apitest.DecideBody(t, referencecalls.Call{Principal: "agent-1", Action: "make_payment",
			Params: referencecalls.Pay(amount, "EUR", "payee-0001")}))
		want("decide", status, body, http.StatusCreated, "")
		var decided struct{ Decision string }
		json.Unmarshal(body, &decided)
		if decided.Decision != wantDecision {
			t.Fatalf("the reference policies decided %q, not %s: %s", decided.Decision, wantDecision, body)
		}
		return index(body)
	}
	ledgerAllow, mediatorAllow, denied := decide(5000, "allow"), decide(6000, "allow"), decide(0, "deny")
	var status int
	var body []byte

	for _, dec := range []uint64{ledgerAllow, mediatorAllow} {
		status, body = post(base, tok, apitest.OutcomePath(dec), "", `{"result":"unknown"}`)
		want("unknown", status, body, http.StatusCreated, "")
		status, body = post(base, tok, apitest.OutcomePath(dec), fmt.Sprintf("final-%d", dec), `{"result":"succeeded","operation_id":"op-1"}`)
		want("succeeded", status, body, http.StatusCreated, "")
		status, body = post(base, tok, apitest.OutcomePath(dec), "", `{"result":"failed"}`)
		want("a second final outcome", status, body, http.StatusConflict, "outcome_final")
	}
	status, body = post(base, tok, apitest.OutcomePath(denied), "", `{"result":"succeeded"}`)
	want("a deny decision's outcome", status, body, http.StatusNotFound, "decision_not_found")
	status, body = post(base, otherToken, apitest.OutcomePath(ledgerAllow), "", `{"result":"unknown"}`)
	want("another mediator's outcome", status, body, http.StatusConflict, "outcome_mismatch")
	status, body = post(base, tok, apitest.OutcomePath(1000), "", `{"result":"unknown"}`)
	want("an index past the size", status, body, http.StatusNotFound, "decision_not_found")

	// After a restart the final outcomes are still known.
	d.cmd.Process.Kill()
	d.cmd.Wait()
	d = startDaemon(t, ledgerd, dir)
	base = "http://" + d.addr
	status, body = post(base, tok, apitest.OutcomePath(ledgerAllow), "", `{"result":"unknown"}`)
	want("an outcome after the final one, after a restart", status, body, http.StatusConflict, "outcome_final")
	status, body = post(base, tok, apitest.OutcomePath(mediatorAllow), fmt.Sprintf("final-%d", mediatorAllow), `{"result":"succeeded","operation_id":"op-1"}`)
	want("the final outcome's retry after a restart", status, body, http.StatusOK, "")

	var size uint64
	apitest.WaitFor(t, "a checkpoint of every entry", func() bool {
		lines := strings.Split(apitest.Get(t, base+"/v1/checkpoint"), "\n")
		return len(lines) > 1 && json.Unmarshal([]byte(lines[1]), &size) == nil && size == last+1
	})
	if line := exportAndVerify(t, ledgerVerify, base, d.vkey, size); !strings.HasPrefix(line, "verified: ") {
		t.Fatalf("ledger-verify export: %s", line)
	}
	export := filepath.Join(t.TempDir(), "all.ledger")
	if err := os.WriteFile(export, []byte(apitest.Get(t, fmt.Sprintf("%s/v1/export?start=0&end=%d", base, size))), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(ledgerVerify, "approvals", "--key", d.vkey, export).CombinedOutput()
	if err != nil {
		t.Fatalf("ledger-verify approvals: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "2 allow decisions, 0 without outcome; outcomes of allowed acts: 2 succeeded, 0 failed, 2 unknown") {
		t.Errorf("ledger-verify approvals:\n%s", out)
	}
	if out, err := exec.Command(ledgerVerify, "decisions", "--key", d.vkey, export).CombinedOutput(); err != nil {
		t.Errorf("ledger-verify decisions: %v\n%s", err, out)
	}
}
