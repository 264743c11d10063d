package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/logtest"
)

// These tests play a ledger that lies: its answers are built from entries
// that internal/logtest signs with the log's own key, so every signature
// is good and only the client's checks of what the entries say stand
// between a lie and the mediator. Each lie is one change to an honest
// answer that the client accepts.

var (
	now        = time.Date(2026, 11, 30, 9, 15, 0, 123456000, time.UTC)
	payParams  = logtest.Params(`{"amount_minor":125000,"currency":"EUR","payee":"payee-0042"}`)
	otherParam = logtest.Params(`{"amount_minor":125001,"currency":"EUR","payee":"payee-0042"}`)
	attrs      = `{"amount_minor":125000,"payee_known":false}`
	doc        = `{"payee":"payee-0042","amount":"1,250.00 EUR","memo":"invoice 2026-117","api_key":"not shown"}`
)

// fakeLedger is a log and what the test's server answers.
type fakeLedger struct {
	t   *testing.T
	log *logtest.Log
	// answer, if set, answers every request but GET /v1/entries/{i},
	// which the log serves.
	answer func(r *http.Request, body []byte) (status int, answer string)
	// hidden, if set, says entry i is not served yet (404), as ledgerd
	// does until an entry is durable.
	hidden func(i uint64) bool
	url    string
}

func newFake(t *testing.T) *fakeLedger {
	t.Helper()
	l, err := logtest.New("ledger.example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeLedger{t: t, log: l}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if rest, ok := strings.CutPrefix(r.URL.Path, "/v1/entries/"); ok && r.Method == "GET" {
			i, err := strconv.ParseUint(rest, 10, 64)
			if err != nil || i >= f.log.Len() || f.hidden != nil && f.hidden(i) {
				http.Error(w, `{"error":{"code":"not_found","message":"no such entry"}}`, http.StatusNotFound)
				return
			}
			w.Write(f.log.Entry(i))
			return
		}
		status, a := f.answer(r, body)
		w.WriteHeader(status)
		io.WriteString(w, a)
	}))
	t.Cleanup(hs.Close)
	f.url = hs.URL
	return f
}

// client trusts the log's key (or another's).
func (f *fakeLedger) client(vkey string) *client.Client {
	f.t.Helper()
	if vkey == "" {
		vkey = f.log.VerifierKey
	}
	c, err := client.New(f.url, "token-of-mediator-1", vkey)
	if err != nil {
		f.t.Fatal(err)
	}
	c.MaxAttempts, c.Backoff = 3, time.Millisecond
	return c
}

func (f *fakeLedger) add(e entry.Entry) (uint64, commit.Digest) {
	f.t.Helper()
	if e.Time.IsZero() {
		e.Time = now.Add(time.Duration(f.log.Len()) * time.Second)
	}
	i, h, err := f.log.Append(e)
	if err != nil {
		f.t.Fatal(err)
	}
	return i, h
}

// receipt is the answer that carries entry i.
func (f *fakeLedger) receipt(i uint64) string {
	return fmt.Sprintf(`{"index":%d,"leaf_hash":"sha256:%s","entry":%s}`, i, strings.Repeat("0", 64), f.log.Entry(i))
}

// request is a needs_approval request of payee-0042, as a version 1
// decision a mediator appends.
func request() entry.Entry {
	return entry.Entry{Mediator: "mediator-1", Principal: "agent:example-1", Action: "make_payment",
		Decision: entry.NeedsApproval, Policies: []string{"payments.review"}, Params: payParams,
		Tiers: logtest.Digest("tiers"), Attributes: []byte(attrs)}
}

func decision(e entry.Entry) client.Decision {
	return client.Decision{Principal: e.Principal, Action: e.Action, Decision: e.Decision, Policies: e.Policies,
		Params: e.Params, Tiers: e.Tiers, Attributes: e.Attributes}
}

func renderDigest(t *testing.T, doc string) commit.Digest {
	t.Helper()
	p, err := preview.Render([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return p.Digest
}

func opened(id commit.Digest, deadline time.Time, digest commit.Digest) string {
	return fmt.Sprintf(`"approval":{"id":"%s","pending_deadline":"%s","preview_digest":"%s"},`,
		id, deadline.Format(time.RFC3339Nano), digest)
}

// An append of a needs_approval decision with a preview gets the opened
// approval, checked against the signed entry: its id is the entry's hash,
// its deadline after the entry's time, its preview digest that of the
// preview the client rendered itself. Each lie is caught.
func TestAppendOpensApproval(t *testing.T) {
	f := newFake(t)
	i, id := f.add(request())
	shown := renderDigest(t, doc)
	deadline := now.Add(24 * time.Hour)
	var sent map[string]json.RawMessage
	answer := func(a string) func(*http.Request, []byte) (int, string) {
		return func(r *http.Request, body []byte) (int, string) {
			sent = nil
			json.Unmarshal(body, &sent)
			return http.StatusCreated, "{" + a + f.receipt(i)[1:]
		}
	}
	d := decision(request())
	d.Preview = json.RawMessage(doc)
	f.answer = answer(opened(id, deadline, shown))
	r, err := f.client("").Append(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	if r.Approval == nil || r.Approval.ID != id || !r.Approval.PendingDeadline.Equal(deadline) || r.Approval.PreviewDigest != shown {
		t.Fatalf("approval %+v, want %s %s %s", r.Approval, id, deadline, shown)
	}
	if string(sent["preview"]) != doc || string(sent["decision"]) != `"needs_approval"` {
		t.Errorf("sent preview %s, decision %s", sent["preview"], sent["decision"])
	}

	allow := request()
	allow.Decision, allow.Policies = entry.Allow, []string{"payments.allow-known-payee"}
	j, allowHash := f.add(allow)
	for _, lie := range []struct {
		name    string
		approve string // the approval member
		d       client.Decision
		at      uint64
	}{
		{"an id that is not the entry hash", opened(logtest.Digest("another request"), deadline, shown), d, i},
		{"the id of another entry", opened(allowHash, deadline, shown), d, i},
		{"a deadline at the entry's time", opened(id, now, shown), d, i},
		{"a deadline before the entry's time", opened(id, now.Add(-time.Hour), shown), d, i},
		{"another preview's digest", opened(id, deadline, renderDigest(t, `{"payee":"payee-0043"}`)), d, i},
		{"no preview digest", fmt.Sprintf(`"approval":{"id":"%s","pending_deadline":"%s"},`, id, deadline.Format(time.RFC3339Nano)), decision(request()), i},
		{"a malformed approval", strings.Replace(opened(id, deadline, shown), `{"id"`, `{"id":5,"id"`, 1), d, i},
		{"no approval for a needs_approval decision with a preview", "", d, i},
		{"an approval for an allow", opened(allowHash, deadline, shown), decision(allow), j},
	} {
		f.answer = func(*http.Request, []byte) (int, string) {
			return http.StatusCreated, "{" + lie.approve + f.receipt(lie.at)[1:]
		}
		if _, err := f.client("").Append(context.Background(), lie.d); !errors.Is(err, client.ErrUnverified) {
			t.Errorf("%s: %v, want ErrUnverified", lie.name, err)
		}
	}

	// Without a preview, the absence of an approval is no lie (a ledger
	// without approvals), and the digest of a default preview, made by
	// the ledger, is taken as given.
	f.answer = answer("")
	if r, err := f.client("").Append(context.Background(), decision(request())); err != nil || r.Approval != nil {
		t.Errorf("no approval, no preview: %+v %v", r, err)
	}
	if _, ok := sent["preview"]; ok {
		t.Errorf("sent a preview member without a preview: %s", sent["preview"])
	}
	f.answer = answer(opened(id, deadline, logtest.Digest("a default preview")))
	if r, err := f.client("").Append(context.Background(), decision(request())); err != nil || r.Approval == nil || r.Approval.ID != id {
		t.Errorf("a default preview: %+v %v", r, err)
	}
}

// A preview the ledger would refuse is refused before anything is sent.
func TestPreviewRefusedLocally(t *testing.T) {
	f := newFake(t)
	var calls atomic.Int32
	f.answer = func(*http.Request, []byte) (int, string) { calls.Add(1); return http.StatusInternalServerError, "{}" }
	c := f.client("")
	for _, bad := range []string{`{"amount":1.5}`, `{"a":1,"a":2}`, `{"a":`} {
		d := decision(request())
		d.Preview = json.RawMessage(bad)
		if _, err := c.Append(context.Background(), d); err == nil || errors.Is(err, client.ErrUnverified) {
			t.Errorf("append with preview %s: %v", bad, err)
		}
		if _, err := c.Decide(context.Background(), client.Request{Principal: "agent:example-1", Action: "make_payment",
			Params: payParams, Tiers: logtest.Digest("tiers"), Attributes: []byte(attrs), Preview: json.RawMessage(bad)}); err == nil {
			t.Errorf("decide with preview %s: no error", bad)
		}
	}
	if calls.Load() != 0 {
		t.Errorf("%d requests sent", calls.Load())
	}
}

// A decide answer carries the opened approval too; it is checked the
// same way.
func TestDecideOpensApproval(t *testing.T) {
	f := newFake(t)
	e := request()
	e.Kind, e.Definition, e.PolicySet = entry.KindDecision, logtest.Digest("definition"), logtest.Digest("set")
	i, id := f.add(e)
	shown := renderDigest(t, doc)
	req := client.Request{Principal: e.Principal, Action: e.Action, Params: e.Params, Tiers: e.Tiers,
		Attributes: e.Attributes, Preview: json.RawMessage(doc)}
	answer := func(a string) func(*http.Request, []byte) (int, string) {
		return func(*http.Request, []byte) (int, string) {
			return http.StatusOK, fmt.Sprintf(`{%s"decision":"needs_approval","policies":["payments.review"],"policy_errors":[],"policy_set":"%s",%s`,
				a, logtest.Digest("set"), f.receipt(i)[1:])
		}
	}
	f.answer = answer(opened(id, now.Add(time.Hour), shown))
	d, err := f.client("").Decide(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if d.Approval == nil || d.Approval.ID != id || d.Decision != entry.NeedsApproval || !d.Replayed {
		t.Fatalf("%+v", d)
	}
	for name, a := range map[string]string{
		"another id":   opened(logtest.Digest("x"), now.Add(time.Hour), shown),
		"an early end": opened(id, now, shown),
		"no approval":  "",
	} {
		f.answer = answer(a)
		if _, err := f.client("").Decide(context.Background(), req); !errors.Is(err, client.ErrUnverified) {
			t.Errorf("%s: %v, want ErrUnverified", name, err)
		}
	}
}

// approvalLog is a log with an approved request: request at 0, verdict
// at 1.
func approvalLog(t *testing.T) (*fakeLedger, commit.Digest) {
	f := newFake(t)
	_, id := f.add(request())
	f.add(entry.Entry{Kind: entry.KindApproval, ApprovalID: id, Request: 0, Approver: "alice",
		Verdict: entry.Approve, PreviewDigest: renderDigest(t, doc)})
	return f, id
}

func terms() client.Terms {
	return client.Terms{Action: "make_payment", Principal: "agent:example-1", Params: payParams}
}

// consumption is a consumption entry of id on the request's terms.
func consumption(id commit.Digest) entry.Entry {
	return entry.Entry{Kind: entry.KindConsumption, ApprovalID: id, Request: 0, Mediator: "mediator-1",
		Principal: "agent:example-1", Action: "make_payment", Params: payParams}
}

// Consume sends the terms with an idempotency key held across retries
// and accepts only a signed consumption of the approval asked for, with
// exactly those terms; refusals carry their code and term.
func TestConsume(t *testing.T) {
	f, id := approvalLog(t)
	i, _ := f.add(consumption(id))
	var keys []string
	var calls atomic.Int32
	var sent map[string]any
	f.answer = func(r *http.Request, body []byte) (int, string) {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if r.Method != "POST" || r.URL.Path != "/v1/approvals/"+id.String()+"/consume" || r.Header.Get("Authorization") != "Bearer token-of-mediator-1" {
			return http.StatusNotFound, `{"error":{"code":"not_found","message":"wrong request"}}`
		}
		if calls.Add(1) == 1 {
			return http.StatusServiceUnavailable, `{"error":{"code":"busy","message":"retry"}}`
		}
		json.Unmarshal(body, &sent)
		return http.StatusOK, f.receipt(i)
	}
	c, err := f.client("").Consume(context.Background(), id, terms())
	if err != nil {
		t.Fatal(err)
	}
	if c.Index != i || c.Request != 0 || !c.Replayed || c.Entry.Kind != entry.KindConsumption || c.Approval != nil {
		t.Errorf("%+v", c)
	}
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Errorf("idempotency keys %q: want one key on both tries", keys)
	}
	want := map[string]any{"action": "make_payment", "principal": "agent:example-1",
		"params_digest": payParams.Digest.String(), "params_size": float64(payParams.Size)}
	if fmt.Sprint(sent) != fmt.Sprint(want) {
		t.Errorf("sent %v, want %v", sent, want)
	}
	keys = nil
	if _, err := f.client("").ConsumeIdempotent(context.Background(), "consume-payee-0042", id, terms()); err != nil || keys[0] != "consume-payee-0042" {
		t.Errorf("ConsumeIdempotent: %v, key %q", err, keys)
	}
	if _, err := f.client("").ConsumeIdempotent(context.Background(), "a key", id, terms()); !errors.Is(err, client.ErrIdempotencyKey) {
		t.Errorf("a key with a space: %v", err)
	}

	// Lies, each a signed entry of the log's key.
	other := consumption(logtest.Digest("another approval"))
	otherParams := consumption(id)
	otherParams.Params = otherParam
	otherAction := consumption(id)
	otherAction.Action = "send_email"
	otherPrincipal := consumption(id)
	otherPrincipal.Principal = "agent:example-2"
	outcome := entry.Entry{Kind: entry.KindOutcome, ApprovalID: id, Consumption: i, Mediator: "mediator-1", Result: entry.Succeeded}
	lies := map[string]string{}
	for name, e := range map[string]entry.Entry{
		"another approval": other, "other params": otherParams, "another action": otherAction,
		"another principal": otherPrincipal, "an outcome": outcome, "the request": request(),
	} {
		j, _ := f.add(e)
		lies[name] = f.receipt(j)
	}
	lies["another index"] = strings.Replace(f.receipt(i), fmt.Sprintf(`"index":%d`, i), fmt.Sprintf(`"index":%d`, i+1), 1)
	lies["a malformed receipt"] = strings.Replace(f.receipt(i), `{"index"`, `{"index":"two","index"`, 1)
	forged, _ := logtest.New("ledger.example.com/log") // the same name, another key
	for range i {
		if _, _, err := forged.Append(entry.Entry{Kind: entry.KindApprovalConfig, PendingTTL: time.Hour, ExecutionTTL: time.Hour, Time: now}); err != nil {
			t.Fatal(err)
		}
	}
	c2 := consumption(id)
	c2.Time = now
	if _, _, err := forged.Append(c2); err != nil {
		t.Fatal(err)
	}
	lies["another key"] = fmt.Sprintf(`{"index":%d,"entry":%s}`, i, forged.Entry(i))
	good := string(f.log.Entry(i))
	at := strings.Index(good, `"sig":"`) + len(`"sig":"`) + 10
	flip := "A"
	if good[at] == 'A' {
		flip = "B"
	}
	lies["a bad signature"] = fmt.Sprintf(`{"index":%d,"entry":%s}`, i, good[:at]+flip+good[at+1:])
	for name, lie := range lies {
		f.answer = func(*http.Request, []byte) (int, string) { return http.StatusCreated, lie }
		if _, err := f.client("").Consume(context.Background(), id, terms()); !errors.Is(err, client.ErrUnverified) {
			t.Errorf("%s: %v, want ErrUnverified", name, err)
		}
	}

	// Refusals.
	for _, r := range []struct {
		status     int
		code, term string
	}{
		{409, "approval_mismatch", "principal"},
		{409, "approval_digest_mismatch", "params_size"},
		{409, "approval_consumed", ""},
		{404, "approval_not_found", ""},
	} {
		f.answer = func(*http.Request, []byte) (int, string) {
			term := ""
			if r.term != "" {
				term = fmt.Sprintf(`,"term":%q`, r.term)
			}
			return r.status, fmt.Sprintf(`{"error":{"code":%q,"message":"refused"%s}}`, r.code, term)
		}
		var apiErr *client.Error
		_, err := f.client("").Consume(context.Background(), id, terms())
		if !errors.As(err, &apiErr) || apiErr.Status != r.status || apiErr.Code != r.code || apiErr.Term != r.term {
			t.Errorf("%d %s %s: %#v", r.status, r.code, r.term, err)
		}
		if r.term != "" && !strings.Contains(err.Error(), "("+r.term+")") {
			t.Errorf("the error %q does not name the term", err)
		}
	}
}

// Outcome accepts only a signed outcome of the approval and consumption
// named, recording the result and operation id sent.
func TestOutcome(t *testing.T) {
	f, id := approvalLog(t)
	ci, _ := f.add(consumption(id))
	ok := entry.Entry{Kind: entry.KindOutcome, ApprovalID: id, Consumption: ci, Mediator: "mediator-1",
		Result: entry.Succeeded, OperationID: "op-5f1c"}
	i, _ := f.add(ok)
	var sent map[string]any
	var path, key string
	f.answer = func(r *http.Request, body []byte) (int, string) {
		json.Unmarshal(body, &sent)
		path, key = r.URL.Path, r.Header.Get("Idempotency-Key")
		return http.StatusCreated, f.receipt(i)
	}
	r, err := f.client("").Outcome(context.Background(), id, ci, entry.Succeeded, "op-5f1c")
	if err != nil {
		t.Fatal(err)
	}
	if r.Index != i || r.Replayed || r.Entry.OperationID != "op-5f1c" || path != "/v1/approvals/"+id.String()+"/outcome" || key == "" {
		t.Errorf("%+v, path %s, key %q", r, path, key)
	}
	if fmt.Sprint(sent) != fmt.Sprint(map[string]any{"consumption": float64(ci), "result": "succeeded", "operation_id": "op-5f1c"}) {
		t.Errorf("sent %v", sent)
	}

	noOp := ok
	noOp.OperationID = ""
	j, _ := f.add(noOp)
	f.answer = func(r *http.Request, body []byte) (int, string) {
		sent = nil
		json.Unmarshal(body, &sent)
		return http.StatusCreated, f.receipt(j)
	}
	if _, err := f.client("").OutcomeIdempotent(context.Background(), "outcome-1", id, ci, entry.Succeeded, ""); err != nil {
		t.Fatal(err)
	}
	if _, has := sent["operation_id"]; has {
		t.Errorf("sent an empty operation id: %v", sent)
	}

	edits := map[string]func(*entry.Entry){
		"another approval":     func(e *entry.Entry) { e.ApprovalID = logtest.Digest("another approval") },
		"another consumption":  func(e *entry.Entry) { e.Consumption = 1 },
		"another result":       func(e *entry.Entry) { e.Result = entry.Failed },
		"another operation id": func(e *entry.Entry) { e.OperationID = "op-0000" },
		"no operation id":      func(e *entry.Entry) { e.OperationID = "" },
		"a consumption": func(e *entry.Entry) {
			*e = consumption(id)
		},
	}
	for name, edit := range edits {
		e := ok
		edit(&e)
		k, _ := f.add(e)
		f.answer = func(*http.Request, []byte) (int, string) { return http.StatusCreated, f.receipt(k) }
		if _, err := f.client("").Outcome(context.Background(), id, ci, entry.Succeeded, "op-5f1c"); !errors.Is(err, client.ErrUnverified) {
			t.Errorf("%s: %v, want ErrUnverified", name, err)
		}
	}
	f.answer = func(*http.Request, []byte) (int, string) { return http.StatusCreated, f.receipt(i) }
	if _, err := f.client(otherKey(t)).Outcome(context.Background(), id, ci, entry.Succeeded, "op-5f1c"); !errors.Is(err, client.ErrUnverified) {
		t.Errorf("under another key: %v, want ErrUnverified", err)
	}
}

func otherKey(t *testing.T) string {
	l, err := logtest.New("ledger.example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	return l.VerifierKey
}

// status is GET /v1/approvals/{id}'s answer for the log's approval.
func status(id commit.Digest, state string, extra string) string {
	return fmt.Sprintf(`{"id":"%s","request":0,"request_time":"%s","mediator":"mediator-1","principal":"agent:example-1",`+
		`"action":"make_payment","params_digest":"%s","params_size":%d,"state":"%s","pending_deadline":"%s"%s}`,
		id, now.Format(time.RFC3339Nano), payParams.Digest, payParams.Size, state, now.Add(24*time.Hour).Format(time.RFC3339Nano), extra)
}

// Approval reads the server's account; an answer about another approval,
// or in an unknown state, is refused.
func TestApprovalState(t *testing.T) {
	f, id := approvalLog(t)
	f.answer = func(r *http.Request, _ []byte) (int, string) {
		if r.URL.Path != "/v1/approvals/"+id.String() {
			return 404, `{"error":{"code":"approval_not_found","message":"no such approval"}}`
		}
		return 200, status(id, "approved", `,"verdict":"approve","verdict_index":1,"approver":"alice","execution_deadline":"2026-11-30T10:15:01.123456Z"`)
	}
	st, err := f.client("").Approval(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != client.StateApproved || st.Verdict != entry.Approve || st.VerdictIndex != 1 || st.Approver != "alice" ||
		!st.Params.Equal(payParams) || st.Principal != "agent:example-1" || !st.PendingDeadline.Equal(now.Add(24*time.Hour)) ||
		st.ExecutionDeadline.IsZero() || st.Consumption != 0 || st.VerdictEntry != nil {
		t.Errorf("%+v", st)
	}
	var apiErr *client.Error
	if _, err := f.client("").Approval(context.Background(), logtest.Digest("unknown")); !errors.As(err, &apiErr) || apiErr.Code != "approval_not_found" {
		t.Errorf("unknown id: %v", err)
	}
	for name, a := range map[string]string{
		"another id":         status(logtest.Digest("other"), "approved", ""),
		"an unknown state":   status(id, "approvedish", ""),
		"a malformed answer": strings.Replace(status(id, "approved", ""), `{"id"`, `{"state":5,"id"`, 1),
	} {
		f.answer = func(*http.Request, []byte) (int, string) { return 200, a }
		if _, err := f.client("").Approval(context.Background(), id); !errors.Is(err, client.ErrUnverified) {
			t.Errorf("%s: %v, want ErrUnverified", name, err)
		}
	}
}

// WaitApproval polls past pending and overload answers, then verifies the
// verdict by its entry: an approve or a deny the server claims without
// the matching signed entry is refused.
func TestWaitApproval(t *testing.T) {
	f, id := approvalLog(t)
	_, other := f.add(request()) // entry 2, another approval
	f.add(entry.Entry{Kind: entry.KindApproval, ApprovalID: other, Request: 2, Approver: "alice",
		Verdict: entry.Approve, PreviewDigest: logtest.Digest("p")}) // 3
	f.add(entry.Entry{Kind: entry.KindApproval, ApprovalID: id, Request: 0, Approver: "alice",
		Verdict: entry.Reject, PreviewDigest: logtest.Digest("p")}) // 4, a second verdict the ledger would refuse
	f.add(consumption(id)) // 5

	approved := status(id, "approved", `,"verdict":"approve","verdict_index":1,"approver":"alice"`)
	var polls atomic.Int32
	f.answer = func(*http.Request, []byte) (int, string) {
		switch polls.Add(1) {
		case 1, 2:
			return 200, status(id, "pending", "")
		case 3:
			return 503, `{"error":{"code":"busy","message":"retry"}}`
		}
		return 200, approved
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := f.client("").WaitApproval(ctx, id, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != client.StateApproved || st.VerdictEntry == nil || st.VerdictEntry.Index != 1 || st.VerdictEntry.Approver != "alice" || polls.Load() != 4 {
		t.Errorf("%+v after %d polls", st, polls.Load())
	}

	answers := func(a string) { f.answer = func(*http.Request, []byte) (int, string) { return 200, a } }

	// The account shows the verdict before its entry is served: the
	// wait goes on until it is.
	var fetches atomic.Int32
	f.hidden = func(i uint64) bool { return i == 1 && fetches.Add(1) <= 2 }
	answers(approved)
	if st, err := f.client("").WaitApproval(ctx, id, time.Millisecond); err != nil || st.VerdictEntry == nil || fetches.Load() != 3 {
		t.Errorf("a verdict served late: %+v %v after %d fetches", st, err, fetches.Load())
	}
	f.hidden = nil
	answers(status(id, "denied", `,"verdict":"deny","verdict_index":4,"approver":"alice"`))
	if st, err := f.client("").WaitApproval(ctx, id, time.Millisecond); err != nil || st.VerdictEntry == nil || st.VerdictEntry.Verdict != entry.Reject {
		t.Errorf("denied: %+v %v", st, err)
	}
	answers(status(id, "expired", ""))
	if st, err := f.client("").WaitApproval(ctx, id, time.Millisecond); err != nil || st.State != client.StateExpired || st.VerdictEntry != nil {
		t.Errorf("expired: %+v %v", st, err)
	}
	answers(status(id, "consumed", `,"verdict":"approve","verdict_index":1,"approver":"alice","consumption":5`))
	if st, err := f.client("").WaitApproval(ctx, id, time.Millisecond); err != nil || st.State != client.StateConsumed || st.VerdictEntry == nil {
		t.Errorf("consumed: %+v %v", st, err)
	}

	for name, a := range map[string]string{
		"the verdict of another approval": status(id, "approved", `,"verdict":"approve","verdict_index":3`),
		"a deny entry for an approve":     status(id, "approved", `,"verdict":"approve","verdict_index":4`),
		"an approve entry for a deny":     status(id, "denied", `,"verdict":"deny","verdict_index":1`),
		"a request as the verdict":        status(id, "approved", `,"verdict":"approve","verdict_index":0`),
		"a consumption as the verdict":    status(id, "approved", `,"verdict":"approve","verdict_index":5`),
		"approved with a deny":            status(id, "approved", `,"verdict":"deny","verdict_index":4`),
		"approved without a verdict":      status(id, "approved", ``),
		"consumed after a deny":           status(id, "consumed", `,"verdict":"deny","verdict_index":4`),
		"denied without a verdict":        status(id, "denied", ``),
		"denied with an approve":          status(id, "denied", `,"verdict":"approve","verdict_index":1`),
	} {
		answers(a)
		if _, err := f.client("").WaitApproval(ctx, id, time.Millisecond); !errors.Is(err, client.ErrUnverified) {
			t.Errorf("%s: %v, want ErrUnverified", name, err)
		}
	}
	answers(approved)
	if _, err := f.client(otherKey(t)).WaitApproval(ctx, id, time.Millisecond); !errors.Is(err, client.ErrUnverified) {
		t.Errorf("a verdict under another key: %v", err)
	}

	// A refusal ends the wait; so does ctx while pending.
	f.answer = func(*http.Request, []byte) (int, string) {
		return 404, `{"error":{"code":"approvals_off","message":"approvals are off"}}`
	}
	var apiErr *client.Error
	if _, err := f.client("").WaitApproval(ctx, id, time.Millisecond); !errors.As(err, &apiErr) || apiErr.Code != "approvals_off" {
		t.Errorf("approvals off: %v", err)
	}
	answers(status(id, "pending", ""))
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	if _, err := f.client("").WaitApproval(short, id, time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("pending until ctx ends: %v", err)
	}
}
