package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/catalog"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/internal/referencecalls"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/policy"
	"github.com/decisionledger/ledger/server/approvals"
	"github.com/decisionledger/ledger/server/metrics"
	"github.com/decisionledger/ledger/server/policies"
	"github.com/decisionledger/ledger/storage/badger"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/decisionledger/ledger/storage/postgres"
)

// The mediators' side of approvals over HTTP (approvals_mediator.go), on
// a real ledger whose clock the test sets, so that every deadline is an
// exact microsecond.

// medClock is the ledger's and the approvals' clock in these tests.
type medClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *medClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *medClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// medT0 is the clock's start; the TTLs are those of medServer's config.
var medT0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

const (
	medPendingTTL   = time.Hour
	medExecutionTTL = 10 * time.Minute
)

// medServer is a ledgerd with approvals on (pending 1h, execution 10m),
// its ledger on clock, two mediators ("local" with token, "other" with
// otherToken), and its log lines in logs.
type medServer struct {
	*testServer
	clock      *medClock
	logs       *apitest.LockedBuffer
	otherToken string
}

// startMedServer starts a medServer; change, if set, changes its config
// (approvals off with c.Approvals = nil).
func startMedServer(t testing.TB, change func(*config.Config)) *medServer {
	t.Helper()
	return startMedServerOn(t, change, nil)
}

// startMedServerOn starts a medServer on store, or, if store is nil, on a
// new badger store in the config's store_dir. On a PostgreSQL store the
// previews are kept there, as a cluster's sequencer keeps them.
func startMedServerOn(t testing.TB, change func(*config.Config), store ledger.Store) *medServer {
	t.Helper()
	dir := t.TempDir()
	path, token := testDataDir(t, dir)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	otherToken, otherHash := newToken()
	cfg.Mediators = append(cfg.Mediators, config.Mediator{Name: "other", TokenSHA256: otherHash})
	cfg.Approvals = &config.ApprovalsConfig{PendingTTL: "1h", ExecutionTTL: "10m"}
	if change != nil {
		change(cfg)
	}
	key, err := ledger.LoadKey(cfg.KeyFile, ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	logs := &apitest.LockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
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
	clock := &medClock{t: medT0}
	l, err := ledger.Open(t.Context(), store, key, ledger.Options{CheckpointInterval: -1, Logger: logger, Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	opts := optionsOf(cfg, l, logger)
	opts.Catalog, opts.Metrics = cat, metrics.New()
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
	if cfg.Approvals != nil {
		// On PostgreSQL the previews are kept there, as a cluster's
		// sequencer keeps them (its sessions too, through package daemon's
		// adapter: here they are in memory).
		var db approvals.DB
		if pg, ok := store.(*postgres.Store); ok {
			db = pg
		}
		if opts.Approvals, err = approvals.New(cfg.Approvals, cfg.StoreDir, db, nil); err != nil {
			t.Fatal(err)
		}
		opts.Approvals.Now = clock.now
		if err := opts.Approvals.PublishConfig(t.Context(), l, logger); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := serveHTTP(t, cfg, srv)
	ts := &testServer{url: hs.URL, token: token, l: l, key: key, cfg: cfg, srv: srv}
	return &medServer{testServer: ts, clock: clock, logs: logs, otherToken: otherToken}
}

// medAnswer is an answer: status, headers and body.
type medAnswer struct {
	status int
	header http.Header
	body   []byte
}

// errorCode, errorTerm and errorMessage read an error answer.
func (a medAnswer) errorCode() string { return a.errorMember("code") }

func (a medAnswer) errorTerm() string { return a.errorMember("term") }

func (a medAnswer) errorMessage() string { return a.errorMember("message") }

func (a medAnswer) errorMember(name string) string {
	var e struct {
		Error map[string]string `json:"error"`
	}
	json.Unmarshal(a.body, &e)
	return e.Error[name]
}

// do sends a request with token (none if empty) and headers.
func (s *medServer) do(t testing.TB, token, method, path, body string, headers ...string) medAnswer {
	t.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if body == "" {
		req.Body, req.ContentLength = nil, 0
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return medAnswer{resp.StatusCode, resp.Header, b}
}

// open appends q as a needs_approval decision (with preview, if not
// empty) and returns the approval's id, checking the answer's approval
// member against the entry it carries.
func (s *medServer) open(t testing.TB, q apitest.MedRequest, preview string) commit.Digest {
	t.Helper()
	a := s.do(t, s.token, "POST", "/v1/entries", q.AppendBody("needs_approval", preview))
	if a.status != http.StatusCreated {
		t.Fatalf("needs_approval append: %d %s", a.status, a.body)
	}
	return checkOpened(t, a.body, medPendingTTL)
}

// checkOpened checks the approval member of a needs_approval answer: the
// id is the entry's hash, the deadline its time plus pendingTTL.
func checkOpened(t testing.TB, body []byte, pendingTTL time.Duration) commit.Digest {
	t.Helper()
	var o apitest.Opened
	if err := json.Unmarshal(body, &o); err != nil {
		t.Fatal(err)
	}
	e, err := entry.Parse(o.Entry)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := e.Hash()
	if o.Approval.ID != h.String() {
		t.Fatalf("approval id %q, want the entry hash %s: %s", o.Approval.ID, h, body)
	}
	if want := e.Time.Add(pendingTTL).Format(entry.TimeLayout); o.Approval.PendingDeadline != want {
		t.Errorf("pending_deadline %q, want %q", o.Approval.PendingDeadline, want)
	}
	if !bytes.HasPrefix(body, []byte(`{`)) || bytes.Index(body, []byte(`"approval"`)) > bytes.Index(body, []byte(`"index"`)) {
		t.Errorf("the approval member does not come before the receipt's: %s", body)
	}
	return h
}

// verdict appends a person's verdict on id directly (the approver's page
// is another file's), failing the test if the ledger refuses it.
func (s *medServer) verdict(t testing.TB, id commit.Digest, v entry.Verdict) {
	t.Helper()
	st, _ := s.l.Approval(id)
	shown, err := s.srv.appr.Preview(context.Background(), s.l, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.l.Append(context.Background(), ledger.Record{Kind: entry.KindApproval, ApprovalID: id, Approver: "alice", Verdict: v, PreviewDigest: shown.Digest}); err != nil {
		t.Fatalf("verdict %s: %v", v, err)
	}
}

func (s *medServer) consume(t testing.TB, token string, id commit.Digest, body string, headers ...string) medAnswer {
	t.Helper()
	return s.do(t, token, "POST", "/v1/approvals/"+id.String()+"/consume", body, headers...)
}

func (s *medServer) outcome(t testing.TB, token string, id commit.Digest, consumption uint64, result string, headers ...string) medAnswer {
	t.Helper()
	return s.do(t, token, "POST", "/v1/approvals/"+id.String()+"/outcome", fmt.Sprintf(`{"consumption":%d,"result":%q}`, consumption, result), headers...)
}

// status GETs the state of approval id.
func (s *medServer) status(t testing.TB, id commit.Digest) approvals.StatusView {
	t.Helper()
	a := s.do(t, "", "GET", "/v1/approvals/"+id.String(), "")
	if a.status != http.StatusOK {
		t.Fatalf("GET approval: %d %s", a.status, a.body)
	}
	var v approvals.StatusView
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// wantRefusal checks a refusal's status, code and term.
func wantRefusal(t testing.TB, what string, a medAnswer, status int, code, term string) {
	t.Helper()
	if a.status != status || a.errorCode() != code || a.errorTerm() != term {
		t.Errorf("%s: %d %s, want %d %s (term %q)", what, a.status, a.body, status, code, term)
	}
}

// receiptIndex reads a receipt's index.
func receiptIndex(t testing.TB, a medAnswer) uint64 {
	t.Helper()
	var r struct {
		Index uint64 `json:"index"`
	}
	if err := json.Unmarshal(a.body, &r); err != nil {
		t.Fatalf("receipt: %v: %s", err, a.body)
	}
	return r.Index
}

// At start ledgerd appends an approval_config entry with its TTLs, and
// again only when they change.
func TestApprovalConfigPublished(t *testing.T) {
	s := startMedServer(t, nil)
	b, err := s.l.Entry(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	e, err := entry.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != entry.KindApprovalConfig || e.PendingTTL != medPendingTTL || e.ExecutionTTL != medExecutionTTL {
		t.Fatalf("entry 0 is %s, want the approval_config of 1h and 10m", b)
	}
	appr := s.srv.appr
	if err := appr.PublishConfig(t.Context(), s.l, s.srv.log); err != nil || s.l.Size() != 1 {
		t.Errorf("the same TTLs again: %v, size %d, want nothing appended", err, s.l.Size())
	}
	appr.ExecutionTTL = 20 * time.Minute
	if err := appr.PublishConfig(t.Context(), s.l, s.srv.log); err != nil || s.l.Size() != 2 {
		t.Fatalf("other TTLs: %v, size %d, want a second approval_config", err, s.l.Size())
	}
	if p, x, ok := s.l.ApprovalConfig(); !ok || p != medPendingTTL || x != 20*time.Minute {
		t.Errorf("in force: %v %v %v", p, x, ok)
	}
}

// The deadlines, over HTTP, at the microsecond: a consumption one
// millisecond before the execution deadline is appended, one at it is
// refused approval_expired; without a verdict a consumption is
// approval_pending before the pending deadline and approval_expired at
// it; the status says the same at the same instants.
func TestConsumeDeadlines(t *testing.T) {
	s := startMedServer(t, nil)
	q := apitest.PayRequest(250000)
	s.clock.set(medT0.Add(time.Second))
	early, late, pending := s.open(t, q, ""), s.open(t, q, ""), s.open(t, q, "")
	opened := medT0.Add(time.Second)
	if v := s.status(t, pending); v.State != "pending" || v.PendingDeadline != opened.Add(medPendingTTL).Format(entry.TimeLayout) {
		t.Errorf("status after the request: %+v", v)
	}
	verdictAt := medT0.Add(time.Minute)
	s.clock.set(verdictAt)
	s.verdict(t, early, entry.Approve)
	s.verdict(t, late, entry.Approve)
	deadline := verdictAt.Add(medExecutionTTL)
	if v := s.status(t, early); v.State != "approved" || v.Verdict != "approve" || v.Approver != "alice" || v.ExecutionDeadline != deadline.Format(entry.TimeLayout) {
		t.Errorf("status after approve: %+v", v)
	}

	wantRefusal(t, "consume before a verdict", s.consume(t, s.token, pending, q.ConsumeBody()), 409, "approval_pending", "")

	s.clock.set(deadline.Add(-time.Millisecond))
	if v := s.status(t, late); v.State != "approved" {
		t.Errorf("one millisecond before the execution deadline: state %s", v.State)
	}
	a := s.consume(t, s.token, early, q.ConsumeBody())
	if a.status != http.StatusCreated {
		t.Fatalf("consume one millisecond before the deadline: %d %s", a.status, a.body)
	}
	s.clock.set(deadline)
	if v := s.status(t, late); v.State != "expired" {
		t.Errorf("at the execution deadline: state %s, want expired", v.State)
	}
	wantRefusal(t, "consume at the execution deadline", s.consume(t, s.token, late, q.ConsumeBody()), 409, "approval_expired", "")

	pendingDeadline := opened.Add(medPendingTTL)
	s.clock.set(pendingDeadline.Add(-time.Millisecond))
	if v := s.status(t, pending); v.State != "pending" {
		t.Errorf("one millisecond before the pending deadline: state %s", v.State)
	}
	wantRefusal(t, "consume before the pending deadline", s.consume(t, s.token, pending, q.ConsumeBody()), 409, "approval_pending", "")
	s.clock.set(pendingDeadline)
	if v := s.status(t, pending); v.State != "expired" {
		t.Errorf("at the pending deadline: state %s, want expired", v.State)
	}
	wantRefusal(t, "consume at the pending deadline", s.consume(t, s.token, pending, q.ConsumeBody()), 409, "approval_expired", "")
	if _, err := s.l.Append(t.Context(), ledger.Record{Kind: entry.KindApproval, ApprovalID: pending, Approver: "alice", Verdict: entry.Approve, PreviewDigest: pending}); err == nil {
		t.Error("a verdict at the pending deadline was appended")
	}
	wantRefusal(t, "consume after a failed late verdict", s.consume(t, s.token, pending, q.ConsumeBody()), 409, "approval_expired", "")
}

// A consumption is refused unless it names this approval, approved, not
// consumed, with the request's terms and mediator; a refusal names the
// differing member and never a value.
func TestConsumeRefusals(t *testing.T) {
	s := startMedServer(t, nil)
	q := apitest.PayRequest(250000)
	s.clock.set(medT0.Add(time.Second))
	approved, twin, denied := s.open(t, q, ""), s.open(t, q, ""), s.open(t, q, "")
	s.verdict(t, approved, entry.Approve)
	s.verdict(t, denied, entry.Reject)

	oneParam := apitest.MedRequest{Principal: q.Principal, Action: q.Action, Params: `{"amount_minor":250001,"payee":"billing@example.com"}`}
	longer := apitest.MedRequest{Principal: q.Principal, Action: q.Action, Params: q.Params}
	longerSize := q.Commitment().Size + 1
	unknown := commit.Digest(sha256.Sum256([]byte("no such request")))
	for _, c := range []struct {
		what        string
		token       string
		id          commit.Digest
		body        string
		status      int
		code, term  string
		mustNotHave []string
	}{
		{"an id the ledger does not know, with matching terms", s.token, unknown, q.ConsumeBody(), 404, "approval_not_found", "", nil},
		{"another approval (awaiting a verdict) with the same terms", s.token, twin, q.ConsumeBody(), 409, "approval_pending", "", nil},
		{"a denied approval", s.token, denied, q.ConsumeBody(), 409, "approval_denied", "", nil},
		{"another action", s.token, approved, apitest.MedRequest{Principal: q.Principal, Action: "make_refund", Params: q.Params}.ConsumeBody(), 409, "approval_mismatch", "action", []string{"make_refund"}},
		{"another principal", s.token, approved, apitest.MedRequest{Principal: "agent-2", Action: q.Action, Params: q.Params}.ConsumeBody(), 409, "approval_mismatch", "principal", []string{"agent-2", "agent-1"}},
		{"another mediator", s.otherToken, approved, q.ConsumeBody(), 409, "approval_mismatch", "mediator", []string{"other", "local"}},
		{"one parameter changed", s.token, approved, oneParam.ConsumeBody(), 409, "approval_digest_mismatch", "params_digest", []string{oneParam.Commitment().Digest.String()[7:]}},
		{"another size", s.token, approved, strings.Replace(longer.ConsumeBody(), fmt.Sprintf(`"params_size":%d`, q.Commitment().Size), fmt.Sprintf(`"params_size":%d`, longerSize), 1), 409, "approval_digest_mismatch", "params_size", nil},
	} {
		a := s.consume(t, c.token, c.id, c.body)
		wantRefusal(t, c.what, a, c.status, c.code, c.term)
		for _, v := range c.mustNotHave {
			if bytes.Contains(a.body, []byte(v)) {
				t.Errorf("%s: the refusal repeats a value: %s", c.what, a.body)
			}
		}
	}
	if v := s.status(t, approved); v.State != "approved" || v.Consumption != nil {
		t.Fatalf("after the refusals: %+v, want approved, not consumed", v)
	}

	first := s.consume(t, s.token, approved, q.ConsumeBody(), "Idempotency-Key", "consume-1")
	if first.status != http.StatusCreated {
		t.Fatalf("consume: %d %s", first.status, first.body)
	}
	index := receiptIndex(t, first)
	e, err := entry.Parse(bytes.TrimSuffix(first.body[bytes.Index(first.body, []byte(`"entry":`))+8:], []byte("}\n")))
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != entry.KindConsumption || e.ApprovalID != approved || e.Mediator != "local" || e.Principal != q.Principal || e.Params != q.Commitment() {
		t.Errorf("the consumption entry: %+v", e)
	}
	again := s.consume(t, s.token, approved, q.ConsumeBody(), "Idempotency-Key", "consume-1")
	if again.status != http.StatusOK || again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, first.body) {
		t.Errorf("the retry: %d %s, want 200 replayed with the first receipt %s", again.status, again.body, first.body)
	}
	wantRefusal(t, "a second consumption", s.consume(t, s.token, approved, q.ConsumeBody()), 409, "approval_consumed", "")
	wantRefusal(t, "a second consumption by another key", s.consume(t, s.token, approved, q.ConsumeBody(), "Idempotency-Key", "consume-2"), 409, "approval_consumed", "")
	if v := s.status(t, approved); v.State != "consumed" || v.Consumption == nil || *v.Consumption != index {
		t.Errorf("after the consumption: %+v", v)
	}
	// Closed, the approval is reduced in the ledger; its status still
	// shows its request's terms and approver, read from its entries.
	if st, _ := s.l.Approval(approved); !st.Reduced {
		t.Errorf("the consumed approval is kept whole: %+v", st)
	}
	c := q.Commitment()
	for _, id := range []commit.Digest{approved, denied} {
		v := s.status(t, id)
		if v.Mediator != "local" || v.Principal != q.Principal || v.Action != q.Action || v.ParamsDigest != c.Digest.String() ||
			v.ParamsSize != c.Size || v.RequestTime != medT0.Add(time.Second).Format(entry.TimeLayout) || v.Approver != "alice" {
			t.Errorf("the status of a closed approval: %+v", v)
		}
	}
	if s.l.Size() != index+1 {
		t.Errorf("size %d: a refusal appended something", s.l.Size())
	}
}

// Malformed consume and outcome requests, and the approval endpoints'
// other refusals.
func TestApprovalRequestRefusals(t *testing.T) {
	s := startMedServer(t, nil)
	q := apitest.PayRequest(250000)
	id := s.open(t, q, "")
	p := "/v1/approvals/" + id.String()
	for _, c := range []struct {
		what, token, method, path, body string
		status                          int
		code                            string
	}{
		{"no token", "", "POST", p + "/consume", q.ConsumeBody(), 401, "unauthenticated"},
		{"an id that is no digest", s.token, "POST", "/v1/approvals/12/consume", q.ConsumeBody(), 400, "invalid_request"},
		{"a GET of an id that is no digest", "", "GET", "/v1/approvals/sha256:ABC", "", 400, "invalid_request"},
		{"a GET of an unknown id", "", "GET", "/v1/approvals/sha256:" + strings.Repeat("0", 64), "", 404, "approval_not_found"},
		{"a member missing", s.token, "POST", p + "/consume", `{"action":"make_payment","principal":"agent-1","params_size":2}`, 400, "invalid_request"},
		{"an unknown member", s.token, "POST", p + "/consume", strings.Replace(q.ConsumeBody(), "{", `{"secret_member":1,`, 1), 400, "invalid_request"},
		{"a wrong type", s.token, "POST", p + "/consume", strings.Replace(q.ConsumeBody(), `"params_size":`, `"params_size":"`, 1) + `"`, 400, "invalid_request"},
		{"not JSON", s.token, "POST", p + "/consume", `{"action":`, 400, "invalid_request"},
		{"an outcome result not known", s.token, "POST", p + "/outcome", `{"consumption":3,"result":"done"}`, 400, "invalid_request"},
		{"an outcome without result", s.token, "POST", p + "/outcome", `{"consumption":3}`, 400, "invalid_request"},
		{"an outcome with a negative index", s.token, "POST", p + "/outcome", `{"consumption":-1,"result":"unknown"}`, 400, "invalid_request"},
		{"an outcome of no consumption", s.token, "POST", p + "/outcome", `{"consumption":1,"result":"unknown"}`, 404, "consumption_not_found"},
		{"an outcome of a consumption beyond the log", s.token, "POST", p + "/outcome", `{"consumption":99,"result":"unknown"}`, 404, "consumption_not_found"},
	} {
		a := s.do(t, c.token, c.method, c.path, c.body)
		wantRefusal(t, c.what, a, c.status, c.code, "")
		if bytes.Contains(a.body, []byte("secret_member")) || bytes.Contains(a.body, []byte("done")) {
			t.Errorf("%s: the refusal repeats what the client sent: %s", c.what, a.body)
		}
	}
	metrics := s.do(t, "", "GET", "/metrics", "")
	for _, code := range []string{"approval_not_found", "consumption_not_found", "invalid_request"} {
		if !bytes.Contains(metrics.body, []byte(`code="`+code+`"`)) {
			t.Errorf("/metrics does not count the refusal %s", code)
		}
	}
}

// Of 64 simultaneous consumptions over HTTP of one approved approval,
// exactly one is appended and 63 are refused approval_consumed; 100
// times, on one server (10 under -short).
func TestConsumeRace(t *testing.T) {
	s := startMedServer(t, nil)
	const clients = 64
	rounds := 100
	if testing.Short() {
		rounds = 10
	}
	q := apitest.PayRequest(250000)
	ids := make([]commit.Digest, rounds)
	for i := range ids {
		ids[i] = s.open(t, q, "")
	}
	for _, id := range ids {
		s.verdict(t, id, entry.Approve)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	body := q.ConsumeBody()
	for round, id := range ids {
		var wg sync.WaitGroup
		start := make(chan struct{})
		statuses := make([]int, clients)
		codes := make([]string, clients)
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest("POST", s.url+"/v1/approvals/"+id.String()+"/consume", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+s.token)
				<-start
				resp, err := client.Do(req)
				if err != nil {
					codes[c] = err.Error()
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				statuses[c] = resp.StatusCode
				codes[c] = medAnswer{body: b}.errorCode()
			}()
		}
		close(start)
		wg.Wait()
		created, consumed := 0, 0
		for c := range clients {
			switch {
			case statuses[c] == http.StatusCreated:
				created++
			case statuses[c] == http.StatusConflict && codes[c] == "approval_consumed":
				consumed++
			default:
				t.Errorf("round %d: %d %s", round, statuses[c], codes[c])
			}
		}
		if created != 1 || consumed != clients-1 {
			t.Fatalf("round %d: %d consumptions appended, %d refused approval_consumed; want 1 and %d", round, created, consumed, clients-1)
		}
	}
	if want := uint64(1 + 3*rounds); s.l.Size() != want {
		t.Errorf("size %d, want %d (config, then per round a request, a verdict and one consumption)", s.l.Size(), want)
	}
}

// Outcomes: unknown, then succeeded, then any further one is refused
// outcome_final; only the consuming mediator reports, on the approval
// that was consumed.
func TestApprovalOutcome(t *testing.T) {
	s := startMedServer(t, nil)
	q := apitest.PayRequest(250000)
	id, other := s.open(t, q, ""), s.open(t, q, "")
	s.verdict(t, id, entry.Approve)
	s.verdict(t, other, entry.Approve)
	c := s.consume(t, s.token, id, q.ConsumeBody())
	if c.status != http.StatusCreated {
		t.Fatalf("consume: %d %s", c.status, c.body)
	}
	consumption := receiptIndex(t, c)

	wantRefusal(t, "the outcome on another approval", s.outcome(t, s.token, other, consumption, "unknown"), 409, "approval_mismatch", "approval")
	wantRefusal(t, "the outcome by another mediator", s.outcome(t, s.otherToken, id, consumption, "unknown"), 409, "approval_mismatch", "mediator")
	wantRefusal(t, "the outcome of the request's index", s.outcome(t, s.token, id, consumption-3, "unknown"), 404, "consumption_not_found", "")

	unknown := s.do(t, s.token, "POST", "/v1/approvals/"+id.String()+"/outcome", fmt.Sprintf(`{"consumption":%d,"result":"unknown","operation_id":"op-17"}`, consumption), "Idempotency-Key", "outcome-1")
	if unknown.status != http.StatusCreated {
		t.Fatalf("outcome unknown: %d %s", unknown.status, unknown.body)
	}
	if v := s.status(t, id); v.Outcome != "unknown" || v.OutcomeIndex == nil || *v.OutcomeIndex != receiptIndex(t, unknown) {
		t.Errorf("after unknown: %+v", v)
	}
	succeeded := s.outcome(t, s.token, id, consumption, "succeeded")
	if succeeded.status != http.StatusCreated {
		t.Fatalf("outcome succeeded after unknown: %d %s", succeeded.status, succeeded.body)
	}
	e, err := entry.Parse(mustEntryOf(t, succeeded))
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != entry.KindOutcome || e.ApprovalID != id || e.Consumption != consumption || e.Result != entry.Succeeded || e.Mediator != "local" {
		t.Errorf("the outcome entry: %+v", e)
	}
	for _, result := range []string{"failed", "unknown", "succeeded"} {
		wantRefusal(t, "an outcome after succeeded", s.outcome(t, s.token, id, consumption, result), 409, "outcome_final", "")
	}
	replay := s.do(t, s.token, "POST", "/v1/approvals/"+id.String()+"/outcome", fmt.Sprintf(`{"consumption":%d,"result":"unknown","operation_id":"op-17"}`, consumption), "Idempotency-Key", "outcome-1")
	if replay.status != http.StatusOK || !bytes.Equal(replay.body, unknown.body) {
		t.Errorf("retry of the first outcome: %d %s", replay.status, replay.body)
	}
	v := s.status(t, id)
	if v.State != "consumed" || v.Outcome != "succeeded" || *v.OutcomeIndex != receiptIndex(t, succeeded) || v.VerdictIndex == nil {
		t.Errorf("final status: %+v", v)
	}
}

// mustEntryOf returns the entry of a receipt.
func mustEntryOf(t testing.TB, a medAnswer) []byte {
	t.Helper()
	var r struct {
		Entry json.RawMessage `json:"entry"`
	}
	if err := json.Unmarshal(a.body, &r); err != nil {
		t.Fatal(err)
	}
	return r.Entry
}

// Without an approvals member every approval endpoint answers 404
// approvals_off, and a preview is refused 422 approvals_off; a
// needs_approval answer has no approval member.
func TestApprovalsOff(t *testing.T) {
	s := startMedServer(t, func(c *config.Config) { c.Approvals = nil })
	q := apitest.PayRequest(250000)
	id := commit.Digest(sha256.Sum256([]byte("x")))
	for _, c := range []struct{ token, method, path, body string }{
		{"", "GET", "/v1/approvals/" + id.String(), ""},
		{s.token, "POST", "/v1/approvals/" + id.String() + "/consume", q.ConsumeBody()},
		{s.token, "POST", "/v1/approvals/" + id.String() + "/outcome", `{"consumption":1,"result":"unknown"}`},
	} {
		wantRefusal(t, c.method+" "+c.path, s.do(t, c.token, c.method, c.path, c.body), 404, "approvals_off", "")
	}
	wantRefusal(t, "an append with a preview", s.do(t, s.token, "POST", "/v1/entries", q.AppendBody("needs_approval", `{"to":"a@example.com"}`)), 422, "approvals_off", "")
	a := s.do(t, s.token, "POST", "/v1/entries", q.AppendBody("needs_approval", ""))
	if a.status != http.StatusCreated || bytes.Contains(a.body, []byte(`"approval"`)) {
		t.Errorf("needs_approval without approvals: %d %s", a.status, a.body)
	}
	d := startMedServer(t, func(c *config.Config) {
		c.Approvals, c.CatalogDir, c.PolicyDir = nil, apitest.CorpusDir, apitest.ReferencePolicies
	})
	wantRefusal(t, "a decide with a preview", d.do(t, d.token, "POST", "/v1/decide", strings.TrimSuffix(largePayment(t), "}")+`,"preview":{"a":1}}`), 422, "approvals_off", "")
}

// largePayment is a decide request the reference policies answer
// needs_approval.
func largePayment(t testing.TB) string {
	return apitest.DecideBody(t, referencecalls.Call{Principal: "agent-1", Action: "make_payment", Params: referencecalls.Pay(250000, "EUR", "payee-0001")})
}

// previewFiles lists the files of the preview store of s.
func previewFiles(t testing.TB, s *medServer) []string {
	t.Helper()
	names, err := os.ReadDir(filepath.Join(s.cfg.StoreDir, approvals.PreviewDirName))
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	for _, n := range names {
		list = append(list, n.Name())
	}
	return list
}

func hasPreview(s *medServer, id commit.Digest) bool {
	_, _, ok := storedPreview(s.srv, id)
	return ok
}

// A decide's preview is kept, redacted, under the approval's id when the
// decision is needs_approval, and its digest is in the answer, on a
// retry too; with another decision it is dropped.
func TestDecidePreview(t *testing.T) {
	s := startMedServer(t, func(c *config.Config) { c.CatalogDir, c.PolicyDir = apitest.CorpusDir, apitest.ReferencePolicies })
	doc := `{"to":"billing@example.com","amount_minor":250000,"api_key":"abcdefabcdefabcdef"}`
	want, err := preview.Render([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	body := strings.TrimSuffix(largePayment(t), "}") + `,"preview":` + doc + `}`
	a := s.do(t, s.token, "POST", "/v1/decide", body, "Idempotency-Key", "d-1")
	if a.status != http.StatusCreated {
		t.Fatalf("decide: %d %s", a.status, a.body)
	}
	id := checkOpened(t, a.body, medPendingTTL)
	var o apitest.Opened
	json.Unmarshal(a.body, &o)
	if o.Decision != "needs_approval" || o.Approval.PreviewDigest != want.Digest.String() {
		t.Errorf("decide answer %s: want needs_approval and preview digest %s", a.body, want.Digest)
	}
	st, _ := s.l.Approval(id)
	shown, err := s.srv.appr.Preview(t.Context(), s.l, st)
	if err != nil || !shown.Sent || shown.Digest != want.Digest || !bytes.Equal(shown.JSON, want.JSON) || bytes.Contains(shown.JSON, []byte("abcdefabcdef")) {
		t.Errorf("the preview kept: %s %s %v %v", shown.JSON, shown.Digest, shown.Sent, err)
	}
	again := s.do(t, s.token, "POST", "/v1/decide", strings.Replace(body, "billing@", "other@", 1), "Idempotency-Key", "d-1")
	if again.status != http.StatusOK || checkOpened(t, again.body, medPendingTTL) != id || !bytes.Contains(again.body, []byte(want.Digest.String())) {
		t.Errorf("the retry: %d %s, want the first approval and its preview", again.status, again.body)
	}
	if files := previewFiles(t, s); len(files) != 1 {
		t.Errorf("preview files %v, want the first preview alone", files)
	}

	allow := strings.TrimSuffix(apitest.Payment(t), "}") + `,"preview":` + doc + `}`
	a = s.do(t, s.token, "POST", "/v1/decide", allow)
	if a.status != http.StatusCreated || bytes.Contains(a.body, []byte(`"approval"`)) {
		t.Errorf("an allowed decide with a preview: %d %s", a.status, a.body)
	}
	if files := previewFiles(t, s); len(files) != 1 {
		t.Errorf("preview files %v after an allow: its preview was kept", files)
	}

	noPreview := s.do(t, s.token, "POST", "/v1/decide", largePayment(t))
	id2 := checkOpened(t, noPreview.body, medPendingTTL)
	st2, _ := s.l.Approval(id2)
	shown2, err := s.srv.appr.Preview(t.Context(), s.l, st2)
	if err != nil || shown2.Sent || !bytes.Contains(noPreview.body, []byte(shown2.Digest.String())) {
		t.Errorf("without a preview: the answer %s should carry the default preview's digest %s (%v %v)", noPreview.body, shown2.Digest, shown2.Sent, err)
	}
}

// An append's preview: only with needs_approval; one that is not in the
// strict domain is refused naming the member, never a value.
func TestAppendPreviewRefusals(t *testing.T) {
	s := startMedServer(t, nil)
	q := apitest.PayRequest(250000)
	wantRefusal(t, "a preview with allow", s.do(t, s.token, "POST", "/v1/entries", q.AppendBody("allow", `{"to":"a@example.com"}`)), 400, "invalid_request", "")
	bad := s.do(t, s.token, "POST", "/v1/entries", q.AppendBody("needs_approval", `{"amount":1.5,"hunter2":"x"}`))
	wantRefusal(t, "a non-integer in the preview", bad, 400, "invalid_request", "")
	if !strings.Contains(bad.errorMessage(), "preview") || bytes.Contains(bad.body, []byte("hunter2")) || bytes.Contains(bad.body, []byte("1.5")) {
		t.Errorf("the refusal should name the preview and no member or value: %s", bad.body)
	}
	if s.l.Size() != 1 || len(previewFiles(t, s)) != 0 {
		t.Errorf("refusals left size %d, previews %v", s.l.Size(), previewFiles(t, s))
	}
	// A preview staged for an append the ledger refuses goes with it.
	s.open(t, q, "")
	first := s.do(t, s.token, "POST", "/v1/entries", q.AppendBody("needs_approval", ""), "Idempotency-Key", "k-1")
	conflict := s.do(t, s.token, "POST", "/v1/entries", apitest.PayRequest(1).AppendBody("needs_approval", `{"to":"a@example.com"}`), "Idempotency-Key", "k-1")
	if first.status != http.StatusCreated || conflict.status != http.StatusConflict {
		t.Fatalf("an append, then another with its key: %d, %d %s", first.status, conflict.status, conflict.body)
	}
	if files := previewFiles(t, s); len(files) != 0 {
		t.Errorf("a refused append left previews %v", files)
	}
}

// A preview holding raw secrets — a 10,000-character password and a
// token — reaches neither the log's export, nor ledgerd's log, nor
// /metrics, nor the preview an approver is shown, which keeps the
// secrets' sibling fields.
func TestPreviewSecretsStayOut(t *testing.T) {
	s := startMedServer(t, nil)
	// Distinctive text, no run of which repeats: hex of a hash chain.
	var sb strings.Builder
	for h := sha256.Sum256([]byte("password")); sb.Len() < 10000; h = sha256.Sum256(h[:]) {
		fmt.Fprintf(&sb, "%x", h)
	}
	password := sb.String()[:10000]
	token := "tok-" + fmt.Sprintf("%x", sha256.Sum256([]byte("token")))[:40]
	doc := fmt.Sprintf(`{"to":"alice@example.com","amount_minor":125000,"password":%q,"token":%q,"memo":"Invoice 4711"}`, password, token)
	q := apitest.PayRequest(125000)
	id := s.open(t, q, doc)
	// The same secrets in requests that are refused.
	s.do(t, s.token, "POST", "/v1/entries", q.AppendBody("allow", doc))
	s.do(t, s.token, "POST", "/v1/entries", q.AppendBody("needs_approval", strings.Replace(doc, `"memo"`, `"password"`, 1)))
	s.do(t, s.token, "POST", "/v1/entries", q.AppendBody("needs_approval", doc)[:5000])

	st, _ := s.l.Approval(id)
	kept, err := s.srv.appr.Preview(t.Context(), s.l, st)
	if err != nil || !kept.Sent {
		t.Fatalf("previewOf: %v %v", err, kept.Sent)
	}
	shown := kept.JSON
	for _, keep := range []string{`"to":"alice@example.com"`, `"amount_minor":125000`, `"memo":"Invoice 4711"`, `"password":"[REDACTED]"`, `"token":"[REDACTED]"`} {
		if !bytes.Contains(shown, []byte(keep)) {
			// Not the preview itself: with a bug it holds the secrets.
			t.Errorf("the approver's preview (%d bytes) lacks %s", len(shown), keep)
		}
	}
	if _, err := s.l.Publish(t.Context()); err != nil {
		t.Fatal(err)
	}
	export := s.do(t, "", "GET", fmt.Sprintf("/v1/export?start=0&end=%d", s.l.Size()), "")
	if export.status != http.StatusOK {
		t.Fatalf("export: %d", export.status)
	}
	metrics := s.do(t, "", "GET", "/metrics", "")
	var stored []byte
	for _, name := range previewFiles(t, s) {
		b, _ := os.ReadFile(filepath.Join(s.cfg.StoreDir, approvals.PreviewDirName, name))
		stored = append(stored, b...)
	}
	places := map[string][]byte{"the export": export.body, "ledgerd's log": []byte(s.logs.String()), "/metrics": metrics.body, "the approver's preview": shown, "the preview store": stored}
	if len(places["ledgerd's log"]) == 0 {
		t.Fatal("no log lines to check")
	}
	for where, b := range places {
		for _, secret := range []string{password, token} {
			// Every 24-byte run of the secret, one every 8 bytes.
			for i := 0; i+24 <= len(secret); i += 8 {
				if bytes.Contains(b, []byte(secret[i:i+24])) {
					t.Errorf("%s holds bytes %d to %d of a secret", where, i, i+24)
					break
				}
			}
		}
	}
}

// The sweep removes the previews of denied, consumed and expired
// approvals and of ids the ledger does not know, and keeps those of
// approvals awaiting a verdict or a consumption; a consumption removes
// its approval's preview at once. Preview files are 0600.
func TestPreviewSweep(t *testing.T) {
	s := startMedServer(t, nil)
	q := apitest.PayRequest(250000)
	doc := `{"to":"alice@example.com"}`
	s.clock.set(medT0.Add(time.Second))
	pending, approved, denied, consumed, stale := s.open(t, q, doc), s.open(t, q, doc), s.open(t, q, doc), s.open(t, q, doc), s.open(t, q, doc)
	verdictAt := medT0.Add(time.Minute)
	s.clock.set(verdictAt)
	s.verdict(t, approved, entry.Approve)
	s.verdict(t, consumed, entry.Approve)
	s.verdict(t, stale, entry.Approve)
	s.verdict(t, denied, entry.Reject)
	for _, name := range previewFiles(t, s) {
		fi, err := os.Stat(filepath.Join(s.cfg.StoreDir, approvals.PreviewDirName, name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("preview %s: mode %v %v, want 0600", name, fi.Mode().Perm(), err)
		}
	}
	if a := s.consume(t, s.token, consumed, q.ConsumeBody()); a.status != http.StatusCreated {
		t.Fatalf("consume: %d %s", a.status, a.body)
	}
	if hasPreview(s, consumed) {
		t.Error("a consumption left its approval's preview")
	}
	// A preview the ledger knows no approval of (a file left by hand).
	ghost := commit.Digest(sha256.Sum256([]byte("ghost")))
	if err := os.WriteFile(s.srv.appr.Previews.(*approvals.DiskPreviews).Path(ghost), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// consumed's preview again, as a crash between the append and the
	// removal would leave it.
	os.WriteFile(s.srv.appr.Previews.(*approvals.DiskPreviews).Path(consumed), []byte(`{}`), 0o600)

	check := func(at time.Time, keep, gone []commit.Digest) {
		t.Helper()
		if _, err := s.srv.appr.Sweep(t.Context(), s.l, at); err != nil {
			t.Fatal(err)
		}
		for _, id := range keep {
			if !hasPreview(s, id) {
				t.Errorf("at %v: the sweep removed the preview of %s (%s)", at, id, approvals.StateAt(mustStatus(s, id), at))
			}
		}
		for _, id := range gone {
			if hasPreview(s, id) {
				t.Errorf("at %v: the sweep kept the preview of %s", at, id)
			}
		}
	}
	check(verdictAt, []commit.Digest{pending, approved, stale}, []commit.Digest{denied, consumed, ghost})
	executionDeadline := verdictAt.Add(medExecutionTTL)
	check(executionDeadline.Add(-time.Microsecond), []commit.Digest{pending, approved, stale}, nil)
	check(executionDeadline, []commit.Digest{pending}, []commit.Digest{approved, stale})
	pendingDeadline := medT0.Add(time.Second + medPendingTTL)
	check(pendingDeadline.Add(-time.Microsecond), []commit.Digest{pending}, nil)
	check(pendingDeadline, nil, []commit.Digest{pending})
	if files := previewFiles(t, s); len(files) != 0 {
		t.Errorf("left: %v", files)
	}
}

func mustStatus(s *medServer, id commit.Digest) ledger.ApprovalStatus {
	st, _ := s.l.Approval(id)
	return st
}

// sweepPreviewsEvery sweeps at once and stops with its context.
func TestPreviewSweepLoop(t *testing.T) {
	s := startMedServer(t, nil)
	ghost := commit.Digest(sha256.Sum256([]byte("ghost")))
	os.WriteFile(s.srv.appr.Previews.(*approvals.DiskPreviews).Path(ghost), []byte(`{}`), 0o600)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.srv.SweepPreviewsEvery(ctx, time.Hour)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for hasPreview(s, ghost) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if hasPreview(s, ghost) {
		t.Error("the first sweep did not run at once")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the sweep did not stop with its context")
	}
}

// openAPIApprovalAnswers brings about, for TestOpenAPIAnswers, every
// answer docs/openapi.json describes of the mediators' approval endpoints
// and of the approval members of decide and append.
func openAPIApprovalAnswers(t *testing.T, a *apitest.AnswerChecker) {
	s := startMedServer(t, func(c *config.Config) { c.CatalogDir, c.PolicyDir = apitest.CorpusDir, apitest.ReferencePolicies })
	auth := []string{"Authorization", "Bearer " + s.token}
	withKey := func(key string) []string { return append(slices.Clone(auth), "Idempotency-Key", key) }
	decide := strings.TrimSuffix(largePayment(t), "}") + `,"preview":{"to":"alice@example.com"}}`
	id := checkOpened(t, checkedBody(t, a, s.testServer, 201, "POST", "/v1/decide", decide, withKey("d-1")...), medPendingTTL)
	a.Do(s.testServer.url, 200, "POST", "/v1/decide", decide, withKey("d-1")...)
	other := apitest.DecideBody(t, referencecalls.Call{Principal: "agent-1", Action: "make_payment", Params: referencecalls.Pay(300000, "EUR", "payee-0001")})
	opened := checkOpened(t, checkedBody(t, a, s.testServer, 201, "POST", "/v1/decide", other, auth...), medPendingTTL)
	q := apitest.PayRequest(250000)
	plain := startMedServer(t, nil)
	plainAuth := []string{"Authorization", "Bearer " + plain.token, "Idempotency-Key", "e-1"}
	checkOpened(t, checkedBody(t, a, plain.testServer, 201, "POST", "/v1/entries", q.AppendBody("needs_approval", `{"to":"alice@example.com"}`), plainAuth...), medPendingTTL)
	a.Do(plain.testServer.url, 200, "POST", "/v1/entries", q.AppendBody("needs_approval", `{"to":"alice@example.com"}`), plainAuth...)

	path := "/v1/approvals/" + id.String()
	zeros := "/v1/approvals/sha256:" + strings.Repeat("0", 64)
	a.Do(s.testServer.url, 200, "GET", path, "")
	a.Do(s.testServer.url, 400, "GET", "/v1/approvals/x", "")
	a.Do(s.testServer.url, 404, "GET", zeros, "")

	terms := q.ConsumeBody()
	dec, _ := s.l.Approval(id)
	decTerms := fmt.Sprintf(`{"action":%q,"principal":%q,"params_digest":"%s","params_size":%d}`, dec.Action, dec.Principal, dec.Params.Digest, dec.Params.Size)
	a.Do(s.testServer.url, 409, "POST", path+"/consume", decTerms, auth...)
	a.Do(s.testServer.url, 404, "POST", zeros+"/consume", terms, auth...)
	a.Do(s.testServer.url, 400, "POST", path+"/consume", `{}`, auth...)
	a.Do(s.testServer.url, 401, "POST", path+"/consume", decTerms)
	a.Do(s.testServer.url, 413, "POST", path+"/consume", decTerms+strings.Repeat(" ", 300<<10), auth...)
	s.verdict(t, id, entry.Approve)
	s.verdict(t, opened, entry.Approve)
	c := checkedBody(t, a, s.testServer, 201, "POST", path+"/consume", decTerms, withKey("c-1")...)
	a.Do(s.testServer.url, 200, "POST", path+"/consume", decTerms, withKey("c-1")...)
	a.Do(s.testServer.url, 409, "POST", "/v1/approvals/"+opened.String()+"/consume", decTerms, auth...) // the terms of another request
	a.Do(s.testServer.url, 200, "GET", path, "")
	consumption := receiptIndex(t, medAnswer{body: c})

	outcome := fmt.Sprintf(`{"consumption":%d,"result":"succeeded","operation_id":"op-1"}`, consumption)
	a.Do(s.testServer.url, 201, "POST", path+"/outcome", outcome, withKey("o-1")...)
	a.Do(s.testServer.url, 200, "POST", path+"/outcome", outcome, withKey("o-1")...)
	a.Do(s.testServer.url, 409, "POST", path+"/outcome", outcome, auth...)
	a.Do(s.testServer.url, 404, "POST", path+"/outcome", `{"consumption":1,"result":"unknown"}`, auth...)
	a.Do(s.testServer.url, 400, "POST", path+"/outcome", `{"result":"unknown"}`, auth...)
	a.Do(s.testServer.url, 401, "POST", path+"/outcome", outcome)
	a.Do(s.testServer.url, 413, "POST", path+"/outcome", outcome+strings.Repeat(" ", 300<<10), auth...)
	a.Do(s.testServer.url, 200, "GET", path, "")

	limited := startMedServer(t, func(c *config.Config) { c.Mediators[0].RatePerSecond, c.Mediators[0].Burst = 0.001, 1 })
	limitedAuth := []string{"Authorization", "Bearer " + limited.token}
	a.Do(limited.testServer.url, 404, "POST", path+"/consume", terms, limitedAuth...) // unknown there
	a.Do(limited.testServer.url, 429, "POST", path+"/consume", terms, limitedAuth...)
	a.Do(limited.testServer.url, 429, "POST", path+"/outcome", `{"consumption":1,"result":"unknown"}`, limitedAuth...)

	slow := startMedServer(t, func(c *config.Config) { c.BodyTimeout = "200ms" })
	for _, endpoint := range []string{"/consume", "/outcome"} {
		conn := dialRaw(t, slow.url)
		conn.send(t, apitest.PartialPost(path+endpoint, "Bearer "+slow.token))
		resp, body, err := conn.response(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", slow.url+path+endpoint, nil)
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("a partial body: %d %s, want 408", resp.StatusCode, body)
		}
		a.Check(req, resp, []byte(body))
	}

	// A store that fails after an approval was approved.
	store := memory.New()
	broken := startMedServerOn(t, nil, store)
	brokenID := broken.open(t, q, "")
	broken.verdict(t, brokenID, entry.Approve)
	store.Close()
	brokenPath := "/v1/approvals/" + brokenID.String()
	brokenAuth := []string{"Authorization", "Bearer " + broken.token}
	a.Do(broken.testServer.url, 503, "POST", brokenPath+"/consume", q.ConsumeBody(), brokenAuth...)
	a.Do(broken.testServer.url, 503, "POST", brokenPath+"/outcome", `{"consumption":3,"result":"unknown"}`, brokenAuth...)

	off := startMedServer(t, func(c *config.Config) { c.Approvals = nil })
	offAuth := []string{"Authorization", "Bearer " + off.token}
	a.Do(off.testServer.url, 404, "GET", path, "")
	a.Do(off.testServer.url, 404, "POST", path+"/consume", terms, offAuth...)
	a.Do(off.testServer.url, 404, "POST", path+"/outcome", outcome, offAuth...)
	a.Do(off.testServer.url, 422, "POST", "/v1/entries", q.AppendBody("needs_approval", `{"to":"alice@example.com"}`), offAuth...)
	offDecide := startMedServer(t, func(c *config.Config) {
		c.Approvals, c.CatalogDir, c.PolicyDir = nil, apitest.CorpusDir, apitest.ReferencePolicies
	})
	a.Do(offDecide.testServer.url, 422, "POST", "/v1/decide", decide, "Authorization", "Bearer "+offDecide.token)
}

// checkedBody is answerChecker.do, returning the answer's body.
func checkedBody(t *testing.T, a *apitest.AnswerChecker, s *testServer, want int, method, path, body string, header ...string) []byte {
	t.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	a.Check(req, resp, b)
	return b
}

// An approval opened on a hiding (version 2) commitment binds to it: the
// consumption must present the same commitment, which a mediator gets by
// committing again with the first call's openings. Fresh openings, the
// version 1 digest of the same parameters, or the same hex spelled as
// version 1 are each refused as a digest mismatch; the receipts and the
// status carry the v2: spelling.
func TestConsumeHidingCommitment(t *testing.T) {
	s := startMedServer(t, nil)
	params := `{"amount_minor":250000,"payee":"billing@example.com"}`
	_, first, err := commit.Hide([]byte(params), commit.RandomOpenings())
	if err != nil {
		t.Fatal(err)
	}
	q := apitest.MedRequest{Principal: "agent-1", Action: "make_payment", Params: params, Openings: first}
	s.clock.set(medT0.Add(time.Second))
	id := s.open(t, q, "")
	s.verdict(t, id, entry.Approve)
	c := q.Commitment()
	if v := s.status(t, id); v.ParamsDigest != c.DigestText() || !strings.HasPrefix(v.ParamsDigest, "v2:sha256:") || v.ParamsSize != c.Size {
		t.Fatalf("the status of a hiding approval: %+v, want %s", v, c.DigestText())
	}
	fresh := apitest.MedRequest{Principal: q.Principal, Action: q.Action, Params: params, Openings: commit.RandomOpenings()}
	bare := apitest.MedRequest{Principal: q.Principal, Action: q.Action, Params: params}
	for _, tc := range []struct{ what, body string }{
		{"the same parameters under fresh openings", fresh.ConsumeBody()},
		{"the version 1 digest of the same parameters", bare.ConsumeBody()},
		{"the same hex spelled as version 1", strings.Replace(q.ConsumeBody(), `"v2:sha256:`, `"sha256:`, 1)},
	} {
		wantRefusal(t, tc.what, s.consume(t, s.token, id, tc.body), 409, "approval_digest_mismatch", "params_digest")
	}
	a := s.consume(t, s.token, id, q.ConsumeBody())
	if a.status != http.StatusCreated || !bytes.Contains(a.body, []byte(`"params_digest":"`+c.DigestText()+`"`)) {
		t.Fatalf("consume with the first call's openings: %d %s", a.status, a.body)
	}
}
