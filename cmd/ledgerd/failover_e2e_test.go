//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/storage/postgres"
)

// The acceptance tests of several ledgerd instances on one PostgreSQL
// database (docs/operations.md), with real processes: failover after
// SIGKILL, fencing of a frozen sequencer, PostgreSQL restarting under
// load. The harness is in failover_harness_test.go. The moments of the
// kills, freezes and shutdowns come from a seed each test logs;
// LEDGER_CLUSTER_SEED sets it.

// takeoverBound is the bound on a takeover with the default
// lease_ttl (3 s: expired at most 3 s after the last renewal, followers
// trying every 0.5 s).
const takeoverBound = 5 * time.Second

func clusterSeed(t *testing.T) uint64 {
	t.Helper()
	if v := os.Getenv("LEDGER_CLUSTER_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("LEDGER_CLUSTER_SEED: %v", err)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// TestClusterFailover: three instances (default lease_ttl) on one
// database, 64 closed-loop appenders spread over all three, each append
// with its own idempotency key, retried on the next instance after any
// failure; four times (ten with LEDGER_SOAK=1: soakRounds) the sequencer
// is killed with SIGKILL at a random
// moment, another takes over, and the killed one is started again. Every
// checkpoint any instance serves meanwhile is kept. At the end
// (checkLog): the export verifies with the key; every acknowledged entry
// is in the log at its index; no index is acknowledged for two keys, no
// key at two indexes nor twice in the log, and each key sent again to any
// instance is answered with its index; every checkpoint observed is
// signed and consistent with the final tree. Each takeover takes at most
// takeoverBound.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three ledgerd instances on PostgreSQL")
	}
	srv := pgtest.NewServer(t)
	seed := clusterSeed(t)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	c := newCluster(t, srv.NewDatabase(t), seed, nil, nil, "a", "b", "c")
	for _, n := range c.nodes {
		c.start(n)
	}
	for _, n := range c.nodes {
		c.waitReady(n)
	}
	cps := c.pollCheckpoints()
	l := c.newLoad(64, func(g, attempt int) *proc { return c.nodes[(g+attempt)%len(c.nodes)] }, nil)

	var takeovers, resumed []time.Duration
	_, epoch := c.sequencer(c.nodes, 0, 30*time.Second)
	for round := range soakRounds(t, 4, 10) {
		seq, e := c.sequencer(c.nodes, epoch-1, 30*time.Second)
		epoch = e
		l.waitAcks(fmt.Sprintf("before kill %d", round+1), 100, 30*time.Second)
		delay := time.Duration(rng.IntN(1000)) * time.Millisecond
		time.Sleep(delay) // a random moment, not a wait for a condition
		killed := time.Now()
		seq.kill()
		next, e := c.sequencer(c.others(seq), epoch, 30*time.Second)
		took := time.Since(killed)
		var first time.Time
		c.waitFor("an acknowledgement of an append sent after the kill", 30*time.Second, func() bool {
			var ok bool
			first, ok = l.firstAckSentAfter(killed)
			return ok
		})
		back := first.Sub(killed)
		t.Logf("kill %d: instance %s (epoch %d) %v after the previous round's appends; instance %s sequencer (epoch %d) %v after the kill, the first append sent after it acknowledged %v after it",
			round+1, seq.name, epoch, delay, next.name, e, took.Round(time.Millisecond), back.Round(time.Millisecond))
		takeovers, resumed = append(takeovers, took), append(resumed, back)
		epoch = e
		c.start(seq)
		c.waitReady(seq)
	}
	c.checkLog(l, cps, c.nodes[rng.IntN(len(c.nodes))])
	t.Logf("takeovers: %v (%s); the first append sent after the kill acknowledged: %v (%s)",
		roundAll(takeovers), spread(takeovers), roundAll(resumed), spread(resumed))
	for i, d := range takeovers {
		if d > takeoverBound {
			t.Errorf("takeover %d took %v, more than %v", i+1, d, takeoverBound)
		}
	}
}

// spread is the minimum, median and maximum of ds.
func spread(ds []time.Duration) string {
	s := slices.Sorted(slices.Values(ds))
	if len(s) == 0 {
		return "none"
	}
	return fmt.Sprintf("min %v, median %v, max %v", s[0].Round(time.Millisecond), s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}

func roundAll(ds []time.Duration) []time.Duration {
	r := make([]time.Duration, len(ds))
	for i, d := range ds {
		r[i] = d.Round(time.Millisecond)
	}
	return r
}

// TestClusterFencing: two instances, lease_ttl 6 s; appends spread
// over both. Twice, the sequencer is frozen with SIGSTOP while appends are
// in flight to it, and more are sent to it once frozen; the other takes
// over. The first time appends continue through the new sequencer; the
// second time none reaches it, so the log's size stays what the frozen
// sequencer last read and only the epoch fences its commits. Then the new
// sequencer, once idle, is frozen too, so that nothing can legitimately
// be committed, and the old one resumed with SIGCONT: it steps down (its
// log says so, /readyz?role=sequencer is not 200), the log's size in the
// database has not moved, and nothing it answers is acknowledged beyond
// it. After both resume, appends continue; the appends sent to the frozen
// sequencer are each answered (an error or an acknowledgement), those
// refused are retried with their keys, and checkLog's checks hold.
func TestClusterFencing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two ledgerd instances on PostgreSQL")
	}
	srv := pgtest.NewServer(t)
	seed := clusterSeed(t)
	t.Logf("seed %d", seed)
	dbURL := srv.NewDatabase(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	// lease_ttl 6 s rather than the default 3 s: the check below must come
	// before the frozen new sequencer's lease expires (at least 4 s after
	// it is frozen, as it renews every 2 s). min_commit_interval 100 ms
	// rather than 2: a commit then takes a small part of each interval,
	// so the freeze most likely finds the sequencer between commits with
	// appends queued, not inside a transaction (which the database aborts
	// after lease_ttl): the case where only the epoch keeps its next
	// commit out once it resumes.
	c := newCluster(t, dbURL, seed, map[string]any{"min_commit_interval": "100ms"}, map[string]any{"lease_ttl": "6s"}, "a", "b")
	for _, n := range c.nodes {
		c.start(n)
	}
	for _, n := range c.nodes {
		c.waitReady(n)
	}
	db, err := postgres.Open(t.Context(), dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	size := func() uint64 {
		t.Helper()
		st, err := db.State(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return st.Size
	}

	// only, when set, is the instance every append goes to.
	var only atomic.Pointer[proc]
	var window struct {
		sync.Mutex
		node     string
		from, to time.Time
		size     uint64
		acked    []string // acknowledgements by node in the window beyond size
	}
	observe := func(a appendAnswer) {
		window.Lock()
		defer window.Unlock()
		if a.node == window.node && a.receipt != nil && !a.end.Before(window.from) && (window.to.IsZero() || a.end.Before(window.to)) &&
			a.receipt.Index >= window.size {
			window.acked = append(window.acked, fmt.Sprintf("%s acknowledged (%d) at index %d", a.key, a.status, a.receipt.Index))
		}
	}
	cps := c.pollCheckpoints()
	l := c.newLoad(32, func(g, attempt int) *proc {
		if n := only.Load(); n != nil {
			return n
		}
		return c.nodes[(g+attempt)%2]
	}, observe)
	_, epoch := c.sequencer(c.nodes, 0, 30*time.Second)

	var retry []string
	for round, quiet := range []bool{false, true} {
		old, cur := c.sequencer(c.nodes, epoch-1, 30*time.Second)
		next := c.others(old)[0]
		epoch = cur
		l.waitAcks(fmt.Sprintf("round %d, before the freeze", round+1), 200, 30*time.Second)
		if quiet {
			only.Store(old)
			l.waitAcks(fmt.Sprintf("round %d, by the sequencer alone", round+1), 50, 30*time.Second)
		}
		time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond) // a random moment, not a wait for a condition
		logged, _ := os.Stat(old.logPath)
		frozen := time.Now()
		old.signal(t, syscall.SIGSTOP)
		const probes = 8
		answers := make(chan appendAnswer, probes)
		for i := range probes {
			key := fmt.Sprintf("probe-%d-%d", round+1, i)
			go func() {
				a := c.postPatient(old, key, clusterBody(key))
				observe(a)
				answers <- a
			}()
		}
		_, e := c.sequencer([]*proc{next}, epoch, 30*time.Second)
		took := time.Since(frozen)
		if !quiet {
			l.waitAcks(fmt.Sprintf("round %d, by the new sequencer while the old one is frozen", round+1), 200, 30*time.Second)
		}
		// The new sequencer, idle (no append in flight to it, its
		// checkpoint covering the log), is frozen too: from now on
		// nothing may be committed.
		only.Store(old)
		c.waitFor(fmt.Sprintf("instance %s to have no append in flight", next.name), 30*time.Second, func() bool {
			return l.inflight[next.name].Load() == 0
		})
		c.waitFor(fmt.Sprintf("instance %s's checkpoint to cover the log", next.name), 30*time.Second, func() bool {
			cp, err := c.key.Checkpoint([]byte(apitest.Get(t, next.url()+"/v1/checkpoint")))
			return err == nil && cp.Size == size()
		})
		next.signal(t, syscall.SIGSTOP)
		n := size()
		t.Logf("round %d: instance %s frozen at epoch %d; instance %s sequencer (epoch %d) %v later; frozen too at size %d",
			round+1, old.name, epoch, next.name, e, took.Round(time.Millisecond), n)
		window.Lock()
		window.node, window.from, window.to, window.size = old.name, time.Now(), time.Time{}, n
		window.Unlock()
		old.signal(t, syscall.SIGCONT)
		c.waitFor(fmt.Sprintf("instance %s to step down", old.name), 10*time.Second, func() bool {
			b, _ := os.ReadFile(old.logPath)
			return strings.Contains(string(b[logged.Size():]), `"msg":"stepped down; following"`) &&
				c.readyz(old, true).status == http.StatusServiceUnavailable
		})
		if got := size(); got != n {
			t.Errorf("round %d: the log grew from %d to %d entries after instance %s, fenced, resumed, while the new sequencer was frozen",
				round+1, n, got, old.name)
		}
		if lease, err := db.CurrentLease(t.Context()); err != nil || lease.Epoch != e || lease.Holder != next.name || !lease.Held {
			t.Fatalf("round %d: the lease moved before the check (%v, %v): the check is void; is lease_ttl too short for this machine?", round+1, lease, err)
		}
		window.Lock()
		window.to = time.Now()
		window.Unlock()
		next.signal(t, syscall.SIGCONT)
		only.Store(nil)

		var errs, acked int
		deadline := time.After(30 * time.Second)
		for range probes {
			select {
			case a := <-answers:
				if ak, ok := a.ack(); ok {
					l.mu.Lock()
					l.keep(ak)
					l.mu.Unlock()
					acked++
					continue
				}
				errs++
				retry = append(retry, a.key)
				t.Logf("round %d: %s, sent to the frozen sequencer: %d %s %v", round+1, a.key, a.status, a.code, a.err)
			case <-deadline:
				t.Fatalf("round %d: appends sent to the frozen sequencer not answered 30 s after it resumed", round+1)
			}
		}
		c.waitFor(fmt.Sprintf("instance %s to follow %s", old.name, next.name), 10*time.Second, func() bool {
			r := c.readyz(old, false)
			return r.status == http.StatusOK && r.Role == "follower" && r.Sequencer == next.url()
		})
		t.Logf("round %d: of %d appends sent to the frozen sequencer, %d answered with errors, %d acknowledged", round+1, probes, errs, acked)
		l.waitAcks(fmt.Sprintf("round %d, after both resumed", round+1), 200, 30*time.Second)
		epoch = e
	}
	for _, key := range retry {
		for attempt := 0; ; attempt++ {
			a := c.post(c.nodes[attempt%2], key, clusterBody(key))
			if ak, ok := a.ack(); ok {
				l.mu.Lock()
				l.keep(ak)
				l.mu.Unlock()
				break
			}
			if attempt == 50 {
				t.Fatalf("%s, retried: %d %s %v", key, a.status, a.code, a.err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	c.checkLog(l, cps, c.nodes[0])
	window.Lock()
	defer window.Unlock()
	for i, a := range window.acked {
		if i == 10 {
			t.Errorf("... %d such answers in all", len(window.acked))
			break
		}
		t.Errorf("answered by the fenced sequencer after it resumed, beyond the log's size then: %s", a)
	}
}

// TestClusterPostgresRestart: two instances on a PostgreSQL server of the
// test's own, 16 appenders over both; the server is shut down (fast, then
// immediate as in a crash) while they append. Every append sent once it is
// down and answered before it is back is 503 with Retry-After, never
// acknowledged (apart from a replay of a key already committed), and both
// instances' /readyz answer 503. After the restart both instances take
// appends again without being restarted; checkLog's checks hold.
func TestClusterPostgresRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two ledgerd instances on PostgreSQL")
	}
	srv := pgtest.NewServer(t)
	seed := clusterSeed(t)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	c := newCluster(t, srv.NewDatabase(t), seed, nil, nil, "a", "b")
	for _, n := range c.nodes {
		c.start(n)
	}
	for _, n := range c.nodes {
		c.waitReady(n)
	}
	cps := c.pollCheckpoints()

	w := struct {
		sync.Mutex
		down, up    time.Time
		unavailable map[string]int // 503s with Retry-After while down, by instance
		replays     int
		bad         map[string][]string // keys, by the kind of wrong answer
		after       map[string]int      // acknowledgements of appends sent after the restart, by instance
	}{bad: map[string][]string{}}
	observe := func(a appendAnswer) {
		w.Lock()
		defer w.Unlock()
		switch {
		case w.down.IsZero() || a.start.Before(w.down):
		case !w.up.IsZero() && a.start.After(w.up):
			if a.receipt != nil {
				w.after[a.node]++
			}
		case !w.up.IsZero() && a.end.After(w.up):
		case a.status == http.StatusServiceUnavailable && retryAfterOK(a.retryAfter):
			w.unavailable[a.node]++
		case a.status == http.StatusOK && a.replayed:
			w.replays++ // a key committed before; checkLog checks it
		default:
			kind := fmt.Sprintf("instance %s answered %d %s (Retry-After %q) %v", a.node, a.status, a.code, a.retryAfter, a.err)
			w.bad[kind] = append(w.bad[kind], a.key+" at "+a.end.UTC().Format("15:04:05.000000"))
		}
	}
	l := c.newLoad(16, func(g, attempt int) *proc { return c.nodes[(g+attempt)%2] }, observe)
	for _, mode := range []pgtest.ShutdownMode{pgtest.Fast, pgtest.Immediate} {
		name := map[pgtest.ShutdownMode]string{pgtest.Fast: "fast", pgtest.Immediate: "immediate"}[mode]
		l.waitAcks("before the "+name+" shutdown", 200, 30*time.Second)
		time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond) // a random moment, not a wait for a condition
		if err := srv.Shutdown(mode); err != nil {
			t.Fatal(err)
		}
		w.Lock()
		w.down, w.up, w.unavailable, w.after = time.Now(), time.Time{}, map[string]int{}, map[string]int{}
		w.Unlock()
		c.waitFor("503 answers from both instances while the database is down", 30*time.Second, func() bool {
			w.Lock()
			defer w.Unlock()
			return w.unavailable["a"] >= 20 && w.unavailable["b"] >= 20
		})
		for _, n := range c.nodes {
			c.waitFor(fmt.Sprintf("instance %s's /readyz to answer 503 while the database is down", n.name), 20*time.Second, func() bool {
				return c.readyz(n, false).status == http.StatusServiceUnavailable
			})
		}
		w.Lock()
		w.up = time.Now()
		down := w.up.Sub(w.down)
		counted := fmt.Sprint(w.unavailable)
		w.Unlock()
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		restarted := time.Now()
		c.waitFor("appends acknowledged by both instances after the restart", 60*time.Second, func() bool {
			w.Lock()
			defer w.Unlock()
			return w.after["a"] > 0 && w.after["b"] > 0
		})
		t.Logf("%s shutdown: down %v, 503 with Retry-After by instance %s; appends acknowledged again by both %v after the restart",
			name, down.Round(time.Millisecond), counted, time.Since(restarted).Round(time.Millisecond))
		for _, n := range c.nodes {
			if !n.running() || n.starts != 1 {
				t.Fatalf("instance %s exited or was restarted (%d starts)", n.name, n.starts)
			}
		}
	}
	l.waitAcks("after the restarts", 200, 30*time.Second)
	c.checkLog(l, cps, c.nodes[0])
	w.Lock()
	defer w.Unlock()
	for _, kind := range slices.Sorted(maps.Keys(w.bad)) {
		keys := w.bad[kind]
		t.Errorf("while the database was down, %s to %d appends (the first: %s)", kind, len(keys), strings.Join(keys[:min(3, len(keys))], ", "))
	}
	t.Logf("%d replays answered while the database was down", w.replays)
}

// retryAfterOK reports whether v is a Retry-After of whole seconds, at
// least 1.
func retryAfterOK(v string) bool {
	n, err := strconv.Atoi(v)
	return err == nil && n >= 1
}

// forwardBound is the bound on acknowledging, through a follower, an
// append sent while the sequencer was frozen, counted from the takeover:
// the follower learns the lease moved within a sixth of lease_ttl
// (0.5 s by default), abandons the forward, and the retry reaches the new
// sequencer.
const forwardBound = 5 * time.Second

// TestClusterFrozenSequencer: three instances (default lease_ttl). The
// sequencer is frozen with SIGSTOP, and appends are sent through both
// followers by a patient client (it waits 60 s for an answer) that
// retries a 503 with the same Idempotency-Key: each is acknowledged
// within forwardBound of the takeover, the followers abandoning their
// forwards to the frozen instance once the lease moved (503
// outcome_unknown with Retry-After) rather than waiting for it. Then
// GET /readyz?role=sequencer requests reach the frozen instance and it is
// resumed with SIGCONT: none is answered 200 or with the role sequencer,
// as its lease expired by its own clock. checkLog's checks hold (each key
// once in the log: the retries appended nothing twice).
func TestClusterFrozenSequencer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three ledgerd instances on PostgreSQL")
	}
	srv := pgtest.NewServer(t)
	seed := clusterSeed(t)
	t.Logf("seed %d", seed)
	c := newCluster(t, srv.NewDatabase(t), seed, nil, nil, "a", "b", "c")
	for _, n := range c.nodes {
		c.start(n)
	}
	for _, n := range c.nodes {
		c.waitReady(n)
	}
	cps := c.pollCheckpoints()
	l := c.newLoad(0, nil, nil) // no appenders: the record of the acknowledgements
	keep := func(a appendAnswer) bool {
		ak, ok := a.ack()
		if ok {
			l.mu.Lock()
			l.keep(ak)
			l.mu.Unlock()
		}
		return ok
	}
	seq, epoch := c.sequencer(c.nodes, 0, 30*time.Second)
	followers := c.others(seq)
	for i, f := range followers {
		key := fmt.Sprintf("before-%d", i)
		if a := c.postPatient(f, key, clusterBody(key)); !keep(a) {
			t.Fatalf("append through instance %s: %d %s %v", f.name, a.status, a.code, a.err)
		}
	}

	// probe is the story of one append sent while the sequencer is
	// frozen.
	type probe struct {
		key, node string
		answers   []appendAnswer // the refusals, then the acknowledgement
		acked     bool
	}
	const perFollower = 4
	probes := make(chan probe, perFollower*len(followers))
	stopProbes := make(chan struct{})
	defer close(stopProbes)
	seq.signal(t, syscall.SIGSTOP)
	frozen := time.Now()
	for _, f := range followers {
		for i := range perFollower {
			p := probe{key: fmt.Sprintf("frozen-%s-%d", f.name, i), node: f.name}
			go func() {
				defer func() { probes <- p }()
				for {
					a := c.postPatient(f, p.key, clusterBody(p.key))
					p.answers = append(p.answers, a)
					if p.acked = a.receipt != nil; p.acked || (a.status != 0 && a.status != http.StatusServiceUnavailable) {
						return
					}
					select {
					case <-stopProbes:
						return
					case <-time.After(50 * time.Millisecond): // paced, not timed
					}
				}
			}()
		}
	}
	next, e := c.sequencer(followers, epoch, 30*time.Second)
	tookOver := time.Now()
	t.Logf("instance %s frozen at epoch %d; instance %s sequencer (epoch %d) %v later",
		seq.name, epoch, next.name, e, tookOver.Sub(frozen).Round(time.Millisecond))
	deadline := time.After(time.Until(tookOver.Add(forwardBound)))
	var outcomeUnknown int
	for range cap(probes) {
		var p probe
		select {
		case p = <-probes:
		case <-deadline:
			t.Fatalf("appends through the followers, sent when instance %s was frozen, not all acknowledged %v after the takeover", seq.name, forwardBound)
		}
		last := p.answers[len(p.answers)-1]
		if !p.acked || !keep(last) {
			t.Fatalf("%s through instance %s: %d %s %v", p.key, p.node, last.status, last.code, last.err)
		}
		for _, a := range p.answers[:len(p.answers)-1] {
			switch {
			case a.status == http.StatusServiceUnavailable && a.code == "outcome_unknown" && a.retryAfter == "1":
				outcomeUnknown++
			case a.status == http.StatusServiceUnavailable && a.code == "no_sequencer" && a.retryAfter == "1":
			default:
				t.Errorf("%s through instance %s: %d %s Retry-After %q %v at %v after the takeover, want 503 outcome_unknown or no_sequencer with Retry-After: 1",
					p.key, p.node, a.status, a.code, a.retryAfter, a.err, a.end.Sub(tookOver).Round(time.Millisecond))
			}
		}
		t.Logf("%s through instance %s: first answered %v after the takeover (%d %s), acknowledged %v after it, after %d attempts",
			p.key, p.node, p.answers[0].end.Sub(tookOver).Round(time.Millisecond), p.answers[0].status, p.answers[0].code,
			last.end.Sub(tookOver).Round(time.Millisecond), len(p.answers))
	}
	if outcomeUnknown == 0 {
		t.Errorf("no forward to the frozen instance %s was abandoned with 503 outcome_unknown", seq.name)
	}

	// /readyz requests wait in the frozen instance's sockets, then it
	// resumes: it answers them before its loop has learnt that the lease
	// moved, by its own clock.
	const readies = 4
	sent := make(chan struct{}, readies)
	answers := make(chan string, readies)
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	for range readies {
		go func() {
			trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { sent <- struct{}{} }}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "GET", seq.url()+"/readyz?role=sequencer", nil)
			resp, err := hc.Do(req)
			if err != nil {
				answers <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers <- fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(b))
		}()
	}
	for range readies {
		select {
		case <-sent:
		case <-time.After(10 * time.Second):
			t.Fatal("the /readyz requests to the frozen instance were not sent")
		}
	}
	seq.signal(t, syscall.SIGCONT)
	for range readies {
		a := <-answers
		if !strings.HasPrefix(a, "503 ") || !strings.Contains(a, `"role":"follower"`) {
			t.Errorf("GET /readyz?role=sequencer at instance %s, deposed, as it resumed: %s, want 503 and the role follower", seq.name, a)
		}
	}
	c.waitFor(fmt.Sprintf("instance %s to follow %s", seq.name, next.name), 10*time.Second, func() bool {
		r := c.readyz(seq, false)
		return r.status == http.StatusOK && r.Role == "follower" && r.Sequencer == next.url()
	})
	c.checkLog(l, cps, next)
}
