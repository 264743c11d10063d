package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/server"
	"github.com/decisionledger/ledger/storage/postgres"
)

// Two instances: the first sequences; the second serves reads, forwards
// appends (with the mediator's token) and relays the answers, honours
// idempotency keys across instances, refuses a request forwarded to it,
// and takes over at once when the first stops.
func TestClusterForwarding(t *testing.T) {
	f := apitest.NewClusterFixture(t)
	a := startInstance(t, f.Config(t, "a", "1s"))
	apitest.WaitFor(t, "a to sequence", func() bool { code, _ := apitest.Readyz(t, a.url+"/readyz?role=sequencer"); return code == 200 })
	b := startInstance(t, f.Config(t, "b", "1s"))
	apitest.WaitFor(t, "b to follow a", func() bool { code, _ := apitest.Readyz(t, b.url+"/readyz"); return code == 200 })
	code, rd := apitest.Readyz(t, b.url+"/readyz")
	if rd != (apitest.Readiness{Ready: true, Role: roleFollower, Instance: "b", Sequencer: a.url, Epoch: rd.Epoch}) || rd.Epoch == 0 {
		t.Errorf("b's /readyz %d %+v", code, rd)
	}
	if code, rd := apitest.Readyz(t, b.url+"/readyz?role=sequencer"); code != 503 || rd.Ready || rd.Role != roleFollower {
		t.Errorf("b's /readyz?role=sequencer %d %+v, want 503", code, rd)
	}
	if code, rd := apitest.Readyz(t, a.url+"/readyz"); code != 200 || rd.Role != roleSequencer || rd.Instance != "a" || rd.Sequencer != a.url {
		t.Errorf("a's /readyz %d %+v", code, rd)
	}

	status, _, body := f.Post(t, b.url, 1, map[string]string{"Idempotency-Key": "k-1"})
	if status != http.StatusCreated {
		t.Fatalf("append through b: %d %s", status, body)
	}
	var receipt struct {
		Index uint64          `json:"index"`
		Entry json.RawMessage `json:"entry"`
	}
	json.Unmarshal([]byte(body), &receipt)
	// a authenticated the mediator from the token b relayed.
	if !strings.Contains(string(receipt.Entry), `"mediator":"local"`) {
		t.Errorf("the entry appended through b: %s", receipt.Entry)
	}
	status, h, body2 := f.Post(t, a.url, 1, map[string]string{"Idempotency-Key": "k-1"})
	if status != http.StatusOK || h.Get("Idempotent-Replayed") != "true" || !strings.Contains(body2, fmt.Sprintf(`"index":%d`, receipt.Index)) {
		t.Errorf("the same key at a: %d %s, want 200 replaying index %d", status, body2, receipt.Index)
	}
	// b serves the entry from the database once its view has it.
	apitest.WaitFor(t, "b to read the entry", func() bool {
		resp, err := http.Get(fmt.Sprintf("%s/v1/entries/%d", b.url, receipt.Index))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})

	status, h, body = f.Post(t, b.url, 2, map[string]string{forwardedByHeader: "c"})
	apitest.WantUnavailable(t, "a request forwarded to a follower", status, h, body, "no_sequencer")

	metrics := func(s *instance) string {
		resp, err := http.Get(s.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		m, _ := io.ReadAll(resp.Body)
		return string(m)
	}
	for _, want := range []string{`ledgerd_cluster_role{instance="b",role="follower"} 1`, "ledgerd_forwarded_requests_total 1", "ledgerd_forwarding_failures_total 1"} {
		if m := metrics(b); !strings.Contains(m, want) {
			t.Errorf("b's metrics lack %q:\n%s", want, m)
		}
	}
	for _, want := range []string{`ledgerd_cluster_role{instance="a",role="sequencer"} 1`, "ledgerd_takeovers_total 1"} {
		if m := metrics(a); !strings.Contains(m, want) {
			t.Errorf("a's metrics lack %q", want)
		}
	}

	// a stops, releasing the lease: b takes over.
	if err := a.stop(); err != nil {
		t.Fatalf("a's shutdown: %v: %s", err, a.logs)
	}
	apitest.WaitFor(t, "b to sequence", func() bool { code, _ := apitest.Readyz(t, b.url+"/readyz?role=sequencer"); return code == 200 })
	rec := apitest.LogRecord(t, b.logs, "became the sequencer")
	if rec["instance"] != "b" || rec["epoch"].(float64) <= float64(rd.Epoch) {
		t.Errorf("b's log: %v", rec)
	}
	if status, _, body := f.Post(t, b.url, 3, nil); status != http.StatusCreated {
		t.Errorf("append at b, sequencing: %d %s", status, body)
	}
	if out := a.logs.String() + b.logs.String(); strings.Contains(out, apitest.DBPassword) {
		t.Errorf("the output shows the database's password:\n%s", out)
	}
}

// With no sequencer (the lease held by a command, which has no address),
// a follower answers appends 503 no_sequencer with Retry-After, serves
// reads, and is not ready; once the lease is free it takes over.
func TestClusterNoSequencer(t *testing.T) {
	f := apitest.NewClusterFixture(t)
	holder := f.Store(t)
	// A log with a checkpoint (a follower of an empty one answers 404
	// no_checkpoint until a sequencer signs the empty tree's).
	key, err := ledger.LoadKey(f.Base["key_file"].(string), ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(t.Context(), holder, key, ledger.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.AcquireLease(t.Context(), "ledgerd-check", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	b := startInstance(t, f.Config(t, "b", "600ms"))
	for _, q := range []string{"", "?role=sequencer"} {
		if code, rd := apitest.Readyz(t, b.url+"/readyz"+q); code != 503 || rd.Ready || rd.Role != roleFollower || rd.Sequencer != "" {
			t.Errorf("/readyz%s with no sequencer: %d %+v", q, code, rd)
		}
	}
	status, h, body := f.Post(t, b.url, 1, nil)
	apitest.WantUnavailable(t, "an append with no sequencer", status, h, body, "no_sequencer")
	if resp, err := http.Get(b.url + "/v1/checkpoint"); err != nil || resp.StatusCode != 200 {
		t.Errorf("a read with no sequencer: %v %v", resp, err)
	}
	// The answers are as docs/openapi.json describes them.
	a := apitest.NewAnswerChecker(t, apitest.LoadOpenAPI(t), server.RoutePatterns(""))
	a.Do(b.url, 503, "GET", "/readyz", "")
	a.Do(b.url, 503, "POST", "/v1/entries", apitest.AppendBody(1), "Authorization", "Bearer "+f.Token)
	a.Do(b.url, 503, "GET", "/v1/policies", "")
	a.Do(b.url, 503, "GET", "/v1/approvals/"+strings.Repeat("0", 64), "", "Authorization", "Bearer "+f.Token)
	a.Do(b.url, 200, "GET", "/v1/checkpoint", "")
	if err := holder.ReleaseLease(t.Context()); err != nil {
		t.Fatal(err)
	}
	apitest.WaitFor(t, "b to sequence", func() bool { code, _ := apitest.Readyz(t, b.url+"/readyz?role=sequencer"); return code == 200 })
	a.Do(b.url, 200, "GET", "/readyz", "")
	if status, _, body := f.Post(t, b.url, 3, nil); status != http.StatusCreated {
		t.Errorf("append at b, sequencing: %d %s", status, body)
	}
}

// A sequencer that renews its lease but cannot be reached: a follower
// answers appends 503 no_sequencer with Retry-After.
func TestClusterUnreachableSequencer(t *testing.T) {
	f := apitest.NewClusterFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	holder := f.Store(t)
	if _, err := holder.AcquireLease(t.Context(), "gone", dead, time.Minute); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		for ctx.Err() == nil {
			holder.RenewLease(ctx, time.Minute)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	defer func() { cancel(); <-renewed }()
	b := startInstance(t, f.Config(t, "b", "600ms"))
	apitest.WaitFor(t, "b to see the holder", func() bool { code, _ := apitest.Readyz(t, b.url+"/readyz"); return code == 200 })
	status, h, body := f.Post(t, b.url, 1, nil)
	apitest.WantUnavailable(t, "an append with an unreachable sequencer", status, h, body, "no_sequencer")
}

// silentSequencer is a stand-in sequencer that takes requests and
// answers none until the client goes away or the test ends; arrived
// receives the Idempotency-Key of each request as it arrives.
func silentSequencer(t *testing.T) (url string, arrived chan string) {
	t.Helper()
	arrived = make(chan string, 16)
	ended := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get("Idempotency-Key")
		select {
		case <-r.Context().Done():
		case <-ended:
		}
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(ended) }) // before ts.Close, which waits for the handlers
	return ts.URL, arrived
}

// A sequencer that holds its lease but does not answer a forwarded
// append: the follower answers 503 outcome_unknown with Retry-After once
// forwardTimeout has passed since it sent it.
func TestClusterForwardTimeout(t *testing.T) {
	f := apitest.NewClusterFixture(t)
	silent, arrived := silentSequencer(t)
	if _, err := f.Store(t).AcquireLease(t.Context(), "silent", silent, time.Minute); err != nil {
		t.Fatal(err)
	}
	n, url, logs := testNode(t, f, "b", "300ms")
	n.observe(t.Context())
	timeout := forwardTimeout(300*time.Millisecond, 50*time.Millisecond) // the fixture's checkpoint_interval
	start := time.Now()
	status, h, body := f.Post(t, url, 1, map[string]string{"Idempotency-Key": "k-1"})
	took := time.Since(start)
	if got := <-arrived; got != "k-1" {
		t.Errorf("the sequencer got the key %q", got)
	}
	apitest.WantUnavailable(t, "an append the sequencer does not answer", status, h, body, "outcome_unknown")
	if !strings.Contains(body, "did not answer within "+timeout.String()) || !strings.Contains(body, "may or may not have been carried out") {
		t.Errorf("the answer's message: %s", body)
	}
	if took < timeout || took > timeout+10*time.Second {
		t.Errorf("answered %v after the append was sent, want %v (and a little more)", took, timeout)
	}
	if r := apitest.LogRecord(t, logs, "forward abandoned: the sequencer did not answer in time"); r["timeout"] != timeout.String() {
		t.Errorf("the log line: %v", r)
	}
}

// A forward in flight when the follower learns that the lease moved is
// abandoned at once, answered 503 outcome_unknown with Retry-After: when
// another instance took the lease, and when this one did. The append
// retried with its key reaches the new holder.
func TestClusterForwardAbandoned(t *testing.T) {
	f := apitest.NewClusterFixture(t)
	frozen, arrivedFrozen := silentSequencer(t)
	next, arrivedNext := silentSequencer(t)
	if _, err := f.Store(t).AcquireLease(t.Context(), "frozen", frozen, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// lease_ttl 3 s: forwardTimeout (7 s) is not what ends the forwards.
	n, url, logs := testNode(t, f, "b", "3s")
	n.observe(t.Context())
	type answer struct {
		status int
		h      http.Header
		body   string
		err    error
		at     time.Time
	}
	send := func() chan answer {
		c := make(chan answer, 1)
		go func() {
			var a answer
			a.status, a.h, a.body, a.err = f.TryPost(url, 1, map[string]string{"Idempotency-Key": "k-1"})
			a.at = time.Now()
			c <- a
		}()
		return c
	}
	wait := func(what string, c chan answer, moved time.Time) {
		t.Helper()
		select {
		case a := <-c:
			if a.err != nil {
				t.Fatalf("%s: %v", what, a.err)
			}
			apitest.WantUnavailable(t, what, a.status, a.h, a.body, "outcome_unknown")
			if !strings.Contains(a.body, "another instance took over before the sequencer answered") || !strings.Contains(a.body, "may or may not have been carried out") {
				t.Errorf("%s: %s", what, a.body)
			}
			if a.at.Before(moved) {
				t.Errorf("%s: answered before the lease moved", what)
			}
		case <-time.After(forwardTimeout(3*time.Second, 50*time.Millisecond) - time.Second):
			t.Fatalf("%s: not answered", what)
		}
	}

	// The lease moves to another instance.
	first := send()
	if got := <-arrivedFrozen; got != "k-1" {
		t.Fatalf("the sequencer got the key %q", got)
	}
	holder := f.Store(t)
	takeWhenExpired(t, holder, "c", next)
	moved := time.Now()
	n.observe(t.Context())
	wait("an append forwarded to the former holder", first, moved)
	apitest.LogRecord(t, logs, "forward abandoned: the lease moved before the sequencer answered")

	// The retry goes to the new holder; then this instance takes the
	// lease.
	second := send()
	if got := <-arrivedNext; got != "k-1" {
		t.Fatalf("the new holder got the key %q", got)
	}
	if err := holder.ReleaseLease(t.Context()); err != nil {
		t.Fatal(err)
	}
	moved = time.Now()
	n.tryTakeOver(t.Context())
	if n.term.Load() == nil {
		t.Fatalf("b did not take the free lease: %s", logs)
	}
	wait("an append forwarded as this instance took the lease", second, moved)
	if status, _, body := f.Post(t, url, 1, map[string]string{"Idempotency-Key": "k-1"}); status != http.StatusCreated {
		t.Errorf("the append again, at b sequencing: %d %s", status, body)
	}
}

// testNode is an instance run by the test step by step: its loop does not
// run, so that the test decides when it takes the lease and renews.
func testNode(t *testing.T, f *apitest.ClusterFixture, name, ttl string) (*node, string, *apitest.LockedBuffer) {
	t.Helper()
	cfg, err := config.Load(f.Config(t, name, ttl))
	if err != nil {
		t.Fatal(err)
	}
	key, err := ledger.LoadKey(cfg.KeyFile, ledger.KeyOptions{Name: cfg.KeyName})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = ln.Addr().String()
	logs := &apitest.LockedBuffer{}
	n, err := newNode(t.Context(), cfg, key, nil, nil, ln, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(n.serveHTTP))
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(func() {
		ts.Close()
		if tm := n.term.Load(); tm != nil {
			n.endTerm(context.Background(), tm, true)
		}
		n.closing.Wait()
		n.stopFollowing()
		if n.candidate != nil {
			n.candidate.Close()
		}
		n.followL.Close()
		n.followStore.Close()
	})
	return n, ts.URL, logs
}

// forwardRecorder is a stand-in sequencer that records what reaches it.
type forwardRecorder struct {
	mu  sync.Mutex
	got []http.Header
	url string
}

func newForwardRecorder(t *testing.T) *forwardRecorder {
	fr := &forwardRecorder{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fr.mu.Lock()
		fr.got = append(fr.got, r.Header.Clone())
		fr.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"recorded":true}`)
	}))
	t.Cleanup(ts.Close)
	fr.url = ts.URL
	return fr
}

// takeWhenExpired takes the lease as holder once it has expired (the
// instance holding it does not renew: its loop does not run).
func takeWhenExpired(t *testing.T, s *postgres.Store, holder, address string) postgres.Lease {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		lease, err := s.AcquireLease(t.Context(), holder, address, time.Minute)
		if err == nil {
			return lease
		}
		if !errors.Is(err, postgres.ErrLeaseHeld) || time.Now().After(deadline) {
			t.Fatalf("taking the lease: %v", err)
		}
	}
}

// A sequencer whose lease another instance took is fenced: an append it
// takes then is answered with an error, never 201, and is not in the
// log; the instance then steps down (its ledger reports the failure)
// and forwards the next append, with the mediator's token and its name in
// Ledger-Forwarded-By, to the new holder, relaying its answer.
func TestClusterStepDownWhenFenced(t *testing.T) {
	f := apitest.NewClusterFixture(t)
	n, url, logs := testNode(t, f, "a", "300ms")
	n.tryTakeOver(t.Context())
	if n.term.Load() == nil {
		t.Fatalf("a did not take the free lease: %s", logs)
	}
	if status, _, body := f.Post(t, url, 1, nil); status != http.StatusCreated {
		t.Fatalf("append at the sequencer: %d %s", status, body)
	}
	thief := f.Store(t)
	rec := newForwardRecorder(t)
	lease := takeWhenExpired(t, thief, "b", rec.url)
	before, err := thief.State(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	status, h, body := f.Post(t, url, 2, nil)
	if status/100 != 5 {
		t.Errorf("append at a fenced sequencer: %d %s, want 5xx", status, body)
	}
	apitest.WantUnavailable(t, "append at a fenced sequencer", status, h, body, "unavailable")
	after, err := thief.State(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if after.Size != before.Size {
		t.Errorf("the fenced sequencer's append reached the log: size %d, then %d", before.Size, after.Size)
	}

	n.sequence(t.Context())
	if n.term.Load() != nil {
		t.Fatalf("a still sequences after its ledger failed: %s", logs)
	}
	if r := apitest.LogRecord(t, logs, "stepped down; following"); r["reason"] != reasonStorageFailure || r["instance"] != "a" {
		t.Errorf("the step-down's log line: %v", r)
	}
	n.observe(t.Context())
	status, _, body = f.Post(t, url, 3, nil)
	if status != http.StatusCreated || body != `{"recorded":true}` {
		t.Errorf("append at a, following %d: %d %s, want the holder's answer relayed", lease.Epoch, status, body)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) != 1 || rec.got[0].Get(forwardedByHeader) != "a" || rec.got[0].Get("Authorization") != "Bearer "+f.Token {
		t.Errorf("the holder got %v, want one request with %s: a and the mediator's token", rec.got, forwardedByHeader)
	}
	if code, rd := apitest.Readyz(t, url+"/readyz"); code != 200 || rd.Role != roleFollower || rd.Sequencer != rec.url || rd.Epoch != lease.Epoch {
		t.Errorf("/readyz after stepping down: %d %+v", code, rd)
	}
}

// A sequencer that finds at its renewal that its lease was taken steps
// down with the reason lease_lost, and answers appends by forwarding.
func TestClusterStepDownOnLeaseLoss(t *testing.T) {
	f := apitest.NewClusterFixture(t)
	n, url, logs := testNode(t, f, "a", "300ms")
	n.tryTakeOver(t.Context())
	t0 := n.term.Load()
	if t0 == nil {
		t.Fatalf("a did not take the free lease: %s", logs)
	}
	takeWhenExpired(t, f.Store(t), "b", "")
	t0.setRenewed(time.Time{}) // the renewal is due
	n.sequence(t.Context())
	if n.term.Load() != nil {
		t.Fatalf("a still sequences after losing its lease: %s", logs)
	}
	if r := apitest.LogRecord(t, logs, "stepped down; following"); r["reason"] != reasonLeaseLost {
		t.Errorf("the step-down's log line: %v", r)
	}
	n.observe(t.Context())
	status, h, body := f.Post(t, url, 1, nil)
	apitest.WantUnavailable(t, "append with the lease held by a command", status, h, body, "no_sequencer")
	if code, rd := apitest.Readyz(t, url+"/readyz?role=sequencer"); code != 503 || rd.Role != roleFollower {
		t.Errorf("/readyz?role=sequencer after stepping down: %d %+v", code, rd)
	}
}

// A sequencer whose renewals fail (the database unreachable: here its
// store is closed) steps down once a whole TTL passed since the last one,
// not before; a follower that cannot read the lease for a TTL answers
// forwarded requests 503 unavailable.
func TestClusterDatabaseUnreachable(t *testing.T) {
	f := apitest.NewClusterFixture(t)
	n, url, logs := testNode(t, f, "a", "300ms")
	n.tryTakeOver(t.Context())
	tm := n.term.Load()
	if tm == nil {
		t.Fatalf("a did not take the free lease: %s", logs)
	}
	tm.store.Close()
	tm.setRenewed(time.Now().Add(-n.ttl / 2)) // due, but within the TTL
	n.sequence(t.Context())
	if n.term.Load() == nil {
		t.Fatalf("a stepped down before its lease could have expired: %s", logs)
	}
	tm.setRenewed(time.Now().Add(-n.ttl))
	n.sequence(t.Context())
	if n.term.Load() != nil {
		t.Fatalf("a still sequences after a TTL without renewal: %s", logs)
	}
	if r := apitest.LogRecord(t, logs, "stepped down; following"); r["reason"] != reasonNotRenewed {
		t.Errorf("the step-down's log line: %v", r)
	}

	// Following: the lease is read once, then the database goes away.
	rec := newForwardRecorder(t)
	takeWhenExpired(t, f.Store(t), "b", rec.url)
	n.observe(t.Context())
	if status, _, body := f.Post(t, url, 1, nil); status != http.StatusCreated {
		t.Fatalf("append forwarded to b: %d %s", status, body)
	}
	n.followStore.Close()
	n.observe(t.Context())
	if status, _, body := f.Post(t, url, 2, nil); status != http.StatusCreated {
		t.Errorf("append within a TTL of the last reading of the lease: %d %s, want it forwarded", status, body)
	}
	n.mu.Lock()
	n.view.read = time.Now().Add(-n.ttl)
	n.mu.Unlock()
	n.observe(t.Context())
	status, h, body := f.Post(t, url, 3, nil)
	apitest.WantUnavailable(t, "append with the database unreachable", status, h, body, "unavailable")
	if code, rd := apitest.Readyz(t, url+"/readyz"); code != 503 || rd.Ready {
		t.Errorf("/readyz with the database unreachable: %d %+v", code, rd)
	}
}

// A follower serves the log's reads itself and forwards the rest.
func TestFollowerRoutes(t *testing.T) {
	// With witnesses too: a follower serves the reads that carry
	// cosignatures, with those the database holds (TestClusterCosignatures).
	for _, cfg := range []*config.Config{{}, {Witnesses: []config.WitnessConfig{{Name: "w"}}}} {
		local := map[string]bool{}
		for _, p := range server.RoutePatterns(cfg.TilesPrefix) {
			if slices.Contains(followerLocal(cfg.TilesPrefix), p) {
				local[p] = true
			}
		}
		want := []string{"GET /v1/checkpoint", "GET /v1/checkpoints/{size}", "GET /v1/entries/{index}", "GET /v1/export",
			"GET /v1/proofs/{index}", "GET /v1/inclusion", "GET /v1/consistency", "GET /v1/actions", "GET /v1/actions/{action}",
			"GET /healthz", "GET /readyz", "GET /metrics", "GET /checkpoint", "GET /tile/{path...}"}
		for _, p := range want {
			if !local[p] {
				t.Errorf("%d witnesses: a follower forwards %s", len(cfg.Witnesses), p)
			}
			delete(local, p)
		}
		for p := range local {
			t.Errorf("%d witnesses: a follower serves %s itself", len(cfg.Witnesses), p)
		}
	}
}

// An instance with a term counts itself the sequencer only while its
// lease holds by its own clock: less than five sixths of the TTL since
// the start of its last successful renewal. Past that (a freeze, say,
// before its loop has learnt that another took over) its /readyz is 503
// with the role follower and no sequencer, and its metrics say follower.
func TestSequencerRoleByLocalClock(t *testing.T) {
	n := &node{ttl: 3 * time.Second, instance: "a", advertise: "http://127.0.0.1:8081"}
	now := time.Now()
	if role, tm := n.role(now); role != roleFollower || tm != nil {
		t.Errorf("without a term: %s %v", role, tm)
	}
	tm := &term{epoch: 7}
	tm.setRenewed(now)
	n.term.Store(tm)
	for _, c := range []struct {
		since time.Duration
		want  string
	}{
		{0, roleSequencer}, {time.Second, roleSequencer}, {2499 * time.Millisecond, roleSequencer},
		{2500 * time.Millisecond, roleFollower}, {3 * time.Second, roleFollower}, {time.Hour, roleFollower},
	} {
		if role, got := n.role(now.Add(c.since)); role != c.want || got != tm {
			t.Errorf("%v after the last renewal began: %s %v, want %s and the term", c.since, role, got, c.want)
		}
	}

	tm.setRenewed(time.Now().Add(-n.ttl + n.ttl/6))
	for _, q := range []string{"", "?role=sequencer"} {
		w := httptest.NewRecorder()
		n.ready(w, httptest.NewRequest("GET", "/readyz"+q, nil))
		var rd readiness
		if err := json.Unmarshal(w.Body.Bytes(), &rd); err != nil {
			t.Fatal(err)
		}
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" ||
			rd != (readiness{Role: roleFollower, Instance: "a", Epoch: 7}) {
			t.Errorf("/readyz%s with the lease expired by the local clock: %d %+v", q, w.Code, rd)
		}
	}
	m := apitest.Exposition(t, n.collectMetrics)
	for _, want := range []string{`ledgerd_cluster_role{instance="a",role="sequencer"} 0`, `ledgerd_cluster_role{instance="a",role="follower"} 1`, "ledgerd_lease_epoch 7"} {
		if !strings.Contains(m, want) {
			t.Errorf("the metrics lack %q:\n%s", want, m)
		}
	}
}
