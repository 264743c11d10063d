package server

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/storage/memory"
)

// appendDecision appends q with decision as the "local" mediator and
// returns its index.
func (s *medServer) appendDecision(t testing.TB, q apitest.MedRequest, decision string) uint64 {
	t.Helper()
	a := s.do(t, s.token, "POST", "/v1/entries", q.AppendBody(decision, ""))
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
				store, _ := apitest.PGStore(t)
				s = startMedServerOn(t, nil, store)
			case "approvals-off":
				s = startMedServer(t, func(c *config.Config) { c.Approvals = nil })
			default:
				s = startMedServer(t, nil)
			}
			q := apitest.PayRequest(1200)
			allowed, denied := s.appendDecision(t, q, "allow"), s.appendDecision(t, q, "deny")
			body := func(result string) string { return fmt.Sprintf(`{"result":%q}`, result) }

			wantRefusal(t, "a deny decision's outcome", s.do(t, s.token, "POST", apitest.OutcomePath(denied), body("succeeded")), 404, "decision_not_found", "")
			wantRefusal(t, "past the size", s.do(t, s.token, "POST", apitest.OutcomePath(s.l.Size()+5), body("unknown")), 404, "decision_not_found", "")
			wantRefusal(t, "beyond 2^53-1", s.do(t, s.token, "POST", "/v1/entries/18446744073709551615/outcome", body("unknown")), 404, "decision_not_found", "")
			wantRefusal(t, "another mediator", s.do(t, s.otherToken, "POST", apitest.OutcomePath(allowed), body("succeeded")), 409, "outcome_mismatch", "mediator")
			wantRefusal(t, "an index spelled 01", s.do(t, s.token, "POST", "/v1/entries/01/outcome", body("unknown")), 400, "invalid_request", "")
			for what, b := range map[string]string{
				"an unknown result":      body("done"),
				"an unknown member":      `{"result":"unknown","consumption":1}`,
				"no result":              `{"operation_id":"op-1"}`,
				"an empty operation id":  `{"result":"unknown","operation_id":""}`,
				"a numeric operation id": `{"result":"unknown","operation_id":7}`,
				"not JSON":               `{"result":`,
			} {
				a := s.do(t, s.token, "POST", apitest.OutcomePath(allowed), b)
				if a.status != http.StatusBadRequest || a.errorCode() != "invalid_request" {
					t.Errorf("%s: %d %s", what, a.status, a.body)
				}
			}
			if a := s.do(t, "", "POST", apitest.OutcomePath(allowed), body("unknown")); a.status != http.StatusUnauthorized {
				t.Errorf("without a token: %d %s", a.status, a.body)
			}
			size := s.l.Size()

			unknown := s.do(t, s.token, "POST", apitest.OutcomePath(allowed), `{"result":"unknown","operation_id":"op-1"}`, "Idempotency-Key", "o-1")
			if unknown.status != http.StatusCreated {
				t.Fatalf("unknown: %d %s", unknown.status, unknown.body)
			}
			e, err := entry.Parse(mustEntryOf(t, unknown))
			if err != nil || e.Version() != entry.Version5 || e.DecisionIndex != allowed || e.Mediator != "local" ||
				e.Result != entry.Unknown || e.OperationID != "op-1" || e.Index != size {
				t.Fatalf("the outcome entry: %+v %v", e, err)
			}
			succeeded := s.do(t, s.token, "POST", apitest.OutcomePath(allowed), body("succeeded"), "Idempotency-Key", "o-2")
			if succeeded.status != http.StatusCreated {
				t.Fatalf("succeeded: %d %s", succeeded.status, succeeded.body)
			}
			for _, r := range []string{"failed", "succeeded", "unknown"} {
				wantRefusal(t, r+" after succeeded", s.do(t, s.token, "POST", apitest.OutcomePath(allowed), body(r)), 409, "outcome_final", "")
			}
			for key, a := range map[string]medAnswer{"o-1": unknown, "o-2": succeeded} {
				b := body("succeeded")
				if key == "o-1" {
					b = `{"result":"unknown","operation_id":"op-1"}`
				}
				replay := s.do(t, s.token, "POST", apitest.OutcomePath(allowed), b, "Idempotency-Key", key)
				if replay.status != http.StatusOK || replay.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(replay.body, a.body) {
					t.Errorf("retry with %s: %d %s", key, replay.status, replay.body)
				}
			}
			wantRefusal(t, "another final outcome under o-2", s.do(t, s.token, "POST", apitest.OutcomePath(allowed), body("failed"), "Idempotency-Key", "o-2"), 409, "outcome_final", "")
			if got := s.l.Size(); got != size+2 {
				t.Errorf("size %d, want %d: a refusal appended", got, size+2)
			}
			m := apitest.Get(t, s.url+"/metrics")
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
func openAPIDecisionOutcomeAnswers(t *testing.T, a *apitest.AnswerChecker) {
	s := startMedServer(t, nil)
	auth := []string{"Authorization", "Bearer " + s.token}
	withKey := func(key string) []string { return append(append([]string{}, auth...), "Idempotency-Key", key) }
	q := apitest.PayRequest(1300)
	allowed, denied := s.appendDecision(t, q, "allow"), s.appendDecision(t, q, "deny")
	ok := `{"result":"succeeded","operation_id":"op-1"}`
	a.Do(s.testServer.url, 201, "POST", apitest.OutcomePath(allowed), ok, withKey("o-1")...)
	a.Do(s.testServer.url, 200, "POST", apitest.OutcomePath(allowed), ok, withKey("o-1")...)
	a.Do(s.testServer.url, 409, "POST", apitest.OutcomePath(allowed), ok, auth...)
	a.Do(s.testServer.url, 409, "POST", apitest.OutcomePath(allowed), ok, "Authorization", "Bearer "+s.otherToken)
	a.Do(s.testServer.url, 404, "POST", apitest.OutcomePath(denied), ok, auth...)
	a.Do(s.testServer.url, 400, "POST", "/v1/entries/x/outcome", ok, auth...)
	a.Do(s.testServer.url, 400, "POST", apitest.OutcomePath(allowed), `{}`, auth...)
	a.Do(s.testServer.url, 401, "POST", apitest.OutcomePath(allowed), ok)
	a.Do(s.testServer.url, 413, "POST", apitest.OutcomePath(allowed), ok+strings.Repeat(" ", 300<<10), auth...)

	limited := startMedServer(t, func(c *config.Config) { c.Mediators[0].RatePerSecond, c.Mediators[0].Burst = 0.001, 1 })
	limitedAuth := []string{"Authorization", "Bearer " + limited.token}
	a.Do(limited.testServer.url, 404, "POST", apitest.OutcomePath(99), ok, limitedAuth...)
	a.Do(limited.testServer.url, 429, "POST", apitest.OutcomePath(99), ok, limitedAuth...)

	slow := startMedServer(t, func(c *config.Config) { c.BodyTimeout = "200ms" })
	conn := dialRaw(t, slow.url)
	conn.send(t, apitest.PartialPost(apitest.OutcomePath(0), "Bearer "+slow.token))
	resp, body, err := conn.response(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("a partial body: %d %s, want 408", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("POST", slow.url+apitest.OutcomePath(0), nil)
	a.Check(req, resp, []byte(body))

	store := memory.New()
	broken := startMedServerOn(t, nil, store)
	d := broken.appendDecision(t, q, "allow")
	store.Close()
	a.Do(broken.testServer.url, 503, "POST", apitest.OutcomePath(d), ok, "Authorization", "Bearer "+broken.token)
}
