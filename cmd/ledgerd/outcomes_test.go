package main

import (
	"bytes"
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
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/referencecalls"
	"github.com/decisionledger/ledger/storage/memory"
)

// outcomePath is the path of the outcome of the allowed act of the
// decision at index.
func outcomePath(index uint64) string { return fmt.Sprintf("/v1/entries/%d/outcome", index) }

// appendDecision appends q with decision as the "local" mediator and
// returns its index.
func (s *medServer) appendDecision(t testing.TB, q medRequest, decision string) uint64 {
	t.Helper()
	a := s.do(t, s.token, "POST", "/v1/entries", q.appendBody(decision, ""))
	if a.status != http.StatusCreated {
		t.Fatalf("append %s: %d %s", decision, a.status, a.body)
	}
	return receiptIndex(t, a)
}

// POST /v1/entries/{index}/outcome appends a version 5 outcome of an
// allow decision by the same mediator, refuses every other with its code
// (counted, naming no value), with approvals off too, and on PostgreSQL
// (whose UNIQUE idempotency keys hold the final outcomes' keys).
func TestDecisionOutcomeEndpoint(t *testing.T) {
	for _, kind := range []string{"badger", "approvals-off", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			var s *medServer
			switch kind {
			case "postgres":
				store, _ := pgTestStore(t)
				s = startMedServerOn(t, nil, store)
			case "approvals-off":
				s = startMedServer(t, func(c *config.Config) { c.Approvals = nil })
			default:
				s = startMedServer(t, nil)
			}
			q := payRequest(1200)
			allowed, denied := s.appendDecision(t, q, "allow"), s.appendDecision(t, q, "deny")
			body := func(result string) string { return fmt.Sprintf(`{"result":%q}`, result) }

			wantRefusal(t, "a deny decision's outcome", s.do(t, s.token, "POST", outcomePath(denied), body("succeeded")), 404, "decision_not_found", "")
			wantRefusal(t, "past the size", s.do(t, s.token, "POST", outcomePath(s.l.Size()+5), body("unknown")), 404, "decision_not_found", "")
			wantRefusal(t, "beyond 2^53-1", s.do(t, s.token, "POST", "/v1/entries/18446744073709551615/outcome", body("unknown")), 404, "decision_not_found", "")
			wantRefusal(t, "another mediator", s.do(t, s.otherToken, "POST", outcomePath(allowed), body("succeeded")), 409, "outcome_mismatch", "mediator")
			wantRefusal(t, "an index spelled 01", s.do(t, s.token, "POST", "/v1/entries/01/outcome", body("unknown")), 400, "invalid_request", "")
			for what, b := range map[string]string{
				"an unknown result":      body("done"),
				"an unknown member":      `{"result":"unknown","consumption":1}`,
				"no result":              `{"operation_id":"op-1"}`,
				"an empty operation id":  `{"result":"unknown","operation_id":""}`,
				"a numeric operation id": `{"result":"unknown","operation_id":7}`,
				"not JSON":               `{"result":`,
			} {
				a := s.do(t, s.token, "POST", outcomePath(allowed), b)
				if a.status != http.StatusBadRequest || a.errorCode() != "invalid_request" {
					t.Errorf("%s: %d %s", what, a.status, a.body)
				}
			}
			if a := s.do(t, "", "POST", outcomePath(allowed), body("unknown")); a.status != http.StatusUnauthorized {
				t.Errorf("without a token: %d %s", a.status, a.body)
			}
			size := s.l.Size()

			unknown := s.do(t, s.token, "POST", outcomePath(allowed), `{"result":"unknown","operation_id":"op-1"}`, "Idempotency-Key", "o-1")
			if unknown.status != http.StatusCreated {
				t.Fatalf("unknown: %d %s", unknown.status, unknown.body)
			}
			e, err := entry.Parse(mustEntryOf(t, unknown))
			if err != nil || e.Version() != entry.Version5 || e.DecisionIndex != allowed || e.Mediator != "local" ||
				e.Result != entry.Unknown || e.OperationID != "op-1" || e.Index != size {
				t.Fatalf("the outcome entry: %+v %v", e, err)
			}
			succeeded := s.do(t, s.token, "POST", outcomePath(allowed), body("succeeded"), "Idempotency-Key", "o-2")
			if succeeded.status != http.StatusCreated {
				t.Fatalf("succeeded: %d %s", succeeded.status, succeeded.body)
			}
			for _, r := range []string{"failed", "succeeded", "unknown"} {
				wantRefusal(t, r+" after succeeded", s.do(t, s.token, "POST", outcomePath(allowed), body(r)), 409, "outcome_final", "")
			}
			for key, a := range map[string]medAnswer{"o-1": unknown, "o-2": succeeded} {
				b := body("succeeded")
				if key == "o-1" {
					b = `{"result":"unknown","operation_id":"op-1"}`
				}
				replay := s.do(t, s.token, "POST", outcomePath(allowed), b, "Idempotency-Key", key)
				if replay.status != http.StatusOK || replay.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(replay.body, a.body) {
					t.Errorf("retry with %s: %d %s", key, replay.status, replay.body)
				}
			}
			wantRefusal(t, "another final outcome under o-2", s.do(t, s.token, "POST", outcomePath(allowed), body("failed"), "Idempotency-Key", "o-2"), 409, "outcome_final", "")
			if got := s.l.Size(); got != size+2 {
				t.Errorf("size %d, want %d: a refusal appended", got, size+2)
			}
			m := get(t, s.url+"/metrics")
			for _, want := range []string{`ledgerd_rejects_total{code="decision_not_found"} 3`, `ledgerd_rejects_total{code="outcome_mismatch"} 1`,
				`ledgerd_rejects_total{code="outcome_final"} 4`} {
				if !strings.Contains(m, want+"\n") {
					t.Errorf("metrics lack %s", want)
				}
			}
			if strings.Contains(s.logs.String(), "op-1") {
				t.Error("a log line holds the operation id")
			}
		})
	}
}

// openAPIDecisionOutcomeAnswers brings about, for TestOpenAPIAnswers,
// every answer docs/openapi.json gives POST /v1/entries/{index}/outcome
// (its 500 is excused in notExercised: appendAndAnswer's, as an append's).
func openAPIDecisionOutcomeAnswers(t *testing.T, a *answerChecker) {
	s := startMedServer(t, nil)
	auth := []string{"Authorization", "Bearer " + s.token}
	withKey := func(key string) []string { return append(append([]string{}, auth...), "Idempotency-Key", key) }
	q := payRequest(1300)
	allowed, denied := s.appendDecision(t, q, "allow"), s.appendDecision(t, q, "deny")
	ok := `{"result":"succeeded","operation_id":"op-1"}`
	a.do(s.testServer, 201, "POST", outcomePath(allowed), ok, withKey("o-1")...)
	a.do(s.testServer, 200, "POST", outcomePath(allowed), ok, withKey("o-1")...)
	a.do(s.testServer, 409, "POST", outcomePath(allowed), ok, auth...)
	a.do(s.testServer, 409, "POST", outcomePath(allowed), ok, "Authorization", "Bearer "+s.otherToken)
	a.do(s.testServer, 404, "POST", outcomePath(denied), ok, auth...)
	a.do(s.testServer, 400, "POST", "/v1/entries/x/outcome", ok, auth...)
	a.do(s.testServer, 400, "POST", outcomePath(allowed), `{}`, auth...)
	a.do(s.testServer, 401, "POST", outcomePath(allowed), ok)
	a.do(s.testServer, 413, "POST", outcomePath(allowed), ok+strings.Repeat(" ", 300<<10), auth...)

	limited := startMedServer(t, func(c *config.Config) { c.Mediators[0].RatePerSecond, c.Mediators[0].Burst = 0.001, 1 })
	limitedAuth := []string{"Authorization", "Bearer " + limited.token}
	a.do(limited.testServer, 404, "POST", outcomePath(99), ok, limitedAuth...)
	a.do(limited.testServer, 429, "POST", outcomePath(99), ok, limitedAuth...)

	slow := startMedServer(t, func(c *config.Config) { c.BodyTimeout = "200ms" })
	conn := dialRaw(t, slow.url)
	conn.send(t, partialPost(outcomePath(0), "Bearer "+slow.token))
	resp, body, err := conn.response(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("a partial body: %d %s, want 408", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("POST", slow.url+outcomePath(0), nil)
	a.check(req, resp, []byte(body))

	store := memory.New()
	broken := startMedServerOn(t, nil, store)
	d := broken.appendDecision(t, q, "allow")
	store.Close()
	a.do(broken.testServer, 503, "POST", outcomePath(d), ok, "Authorization", "Bearer "+broken.token)
}

// TestDaemonAllowOutcome runs the real ledgerd and ledger-verify: two
// ledger decisions to allow (POST /v1/decide with the repository's
// catalog and policies) get outcomes — unknown, then succeeded; a second final one, an outcome of a deny
// decision, another mediator's and one past the log's size are refused,
// also after a restart — and the export verifies, its outcomes audited
// sound by ledger-verify approvals and its decisions replayed by
// ledger-verify decisions.
func TestDaemonAllowOutcome(t *testing.T) {
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
	corpus, _ := filepath.Abs(corpusDir)
	policies, _ := filepath.Abs(referencePolicies)
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
		status, body := post(base, tok, "/v1/decide", "", decideBody(t, referencecalls.Call{Principal: "agent-1", Action: "make_payment",
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
		status, body = post(base, tok, outcomePath(dec), "", `{"result":"unknown"}`)
		want("unknown", status, body, http.StatusCreated, "")
		status, body = post(base, tok, outcomePath(dec), fmt.Sprintf("final-%d", dec), `{"result":"succeeded","operation_id":"op-1"}`)
		want("succeeded", status, body, http.StatusCreated, "")
		status, body = post(base, tok, outcomePath(dec), "", `{"result":"failed"}`)
		want("a second final outcome", status, body, http.StatusConflict, "outcome_final")
	}
	status, body = post(base, tok, outcomePath(denied), "", `{"result":"succeeded"}`)
	want("a deny decision's outcome", status, body, http.StatusNotFound, "decision_not_found")
	status, body = post(base, otherToken, outcomePath(ledgerAllow), "", `{"result":"unknown"}`)
	want("another mediator's outcome", status, body, http.StatusConflict, "outcome_mismatch")
	status, body = post(base, tok, outcomePath(1000), "", `{"result":"unknown"}`)
	want("an index past the size", status, body, http.StatusNotFound, "decision_not_found")

	// After a restart the final outcomes are still known.
	d.cmd.Process.Kill()
	d.cmd.Wait()
	d = startDaemon(t, ledgerd, dir)
	base = "http://" + d.addr
	status, body = post(base, tok, outcomePath(ledgerAllow), "", `{"result":"unknown"}`)
	want("an outcome after the final one, after a restart", status, body, http.StatusConflict, "outcome_final")
	status, body = post(base, tok, outcomePath(mediatorAllow), fmt.Sprintf("final-%d", mediatorAllow), `{"result":"succeeded","operation_id":"op-1"}`)
	want("the final outcome's retry after a restart", status, body, http.StatusOK, "")

	var size uint64
	waitFor(t, "a checkpoint of every entry", func() bool {
		lines := strings.Split(get(t, base+"/v1/checkpoint"), "\n")
		return len(lines) > 1 && json.Unmarshal([]byte(lines[1]), &size) == nil && size == last+1
	})
	if line := exportAndVerify(t, ledgerVerify, base, d.vkey, size); !strings.HasPrefix(line, "verified: ") {
		t.Fatalf("ledger-verify export: %s", line)
	}
	export := filepath.Join(t.TempDir(), "all.ledger")
	if err := os.WriteFile(export, []byte(get(t, fmt.Sprintf("%s/v1/export?start=0&end=%d", base, size))), 0o600); err != nil {
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
