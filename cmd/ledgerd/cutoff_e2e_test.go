//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/pgtest"
)

// cutOffBound is what a takeover after a cut-off may take beyond the
// lease's expiry and the store's StallTimeout (both lease_ttl): the
// followers' tries every sixth of the TTL, opening the ledger, on a
// loaded machine.
const cutOffBound = 5 * time.Second

// TestClusterSequencerCutOff is issue 23's reproduction, with real
// instances: the sequencer a reaches PostgreSQL through a TCP proxy,
// which stops forwarding a's connection half-way through the commit of
// one append (both ways, keeping the sockets open, as a hung proxy or a
// dropped network path would).
//
// First a is killed with SIGKILL: b takes over within lease_ttl +
// StallTimeout (lease_ttl) + cutOffBound, and takes the append again
// under the same idempotency key as a new entry (a's commit left
// nothing). Before the fix, the server kept a's session "active,
// ClientRead" holding tree_head's row lock, and no instance took over
// until the proxy was stopped.
//
// Then, a sequencing again (b killed), the proxy cuts a's commit off
// once more, and a stays up: its Commit gives up by itself (each round
// trip within twice StallTimeout), a steps down, and the lease is taken
// again (by a: b is down) with appends acknowledged within
// 4 × lease_ttl + cutOffBound. Before the fix a's Commit waited for ever:
// no acknowledgement, and /readyz 200 throughout.
func TestClusterSequencerCutOff(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two ledgerd instances on PostgreSQL")
	}
	const ttl = time.Second
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	proxy := srv.NewProxy(t)
	c := newCluster(t, db, clusterSeed(t), nil, map[string]any{"lease_ttl": ttl.String()}, "a", "b")
	a, b := c.nodes[0], c.nodes[1]
	setStore(t, a, proxy.URL(db))
	c.start(a)
	c.waitReady(a)
	_, epoch := c.sequencer([]*proc{a}, 0, 30*time.Second)
	c.start(b)
	c.waitReady(b)
	if r := c.postPatient(a, "before", clusterBody("before")); r.status != http.StatusCreated {
		t.Fatalf("the first append: %d %s %v", r.status, r.code, r.err)
	}

	// cut arms the proxy to cut a's connection half-way through the
	// message carrying the entry with marker (the one commit's: the
	// idempotency key, which a reads before, is another string), and
	// appends it through n; it returns once the proxy has cut it.
	cut := func(n *proc, marker string) <-chan appendAnswer {
		t.Helper()
		proxy.Stall(func(_, _ int, m pgtest.Message) int {
			if bytes.Contains(m.Data, []byte(marker)) {
				return len(m.Data) / 2
			}
			return -1
		})
		done := make(chan appendAnswer, 1)
		go func() { done <- c.postPatient(n, "idem-"+marker[len(marker)-1:], clusterBody(marker)) }()
		select {
		case <-proxy.Stalled():
		case r := <-done:
			t.Fatalf("the append of %s returned (%d %s %v) before the proxy cut it off", marker, r.status, r.code, r.err)
		case <-time.After(30 * time.Second):
			t.Fatalf("the append of %s did not reach the database through the proxy in 30 s", marker)
		}
		return done
	}

	// A sequencer cut off, then killed.
	cut(a, "cut-off-1")
	a.kill()
	killed := time.Now()
	_, epoch = c.sequencer([]*proc{b}, epoch, ttl+ttl+cutOffBound)
	took := time.Since(killed)
	r := c.postPatient(b, "idem-1", clusterBody("cut-off-1"))
	if r.status != http.StatusCreated {
		t.Fatalf("the cut-off append again, through b: %d %s %v; want 201 (a's commit left nothing)", r.status, r.code, r.err)
	}
	t.Logf("killed after the cut-off: b sequencer %v after the kill", took.Round(time.Millisecond))
	proxy.Release()

	// A sequencer cut off, and left running.
	c.start(a)
	c.waitReady(a)
	b.kill()
	_, epoch = c.sequencer([]*proc{a}, epoch, 30*time.Second)
	done := cut(a, "cut-off-2")
	stalled := time.Now()
	c.waitFor("an append acknowledged after the cut-off", 4*ttl+cutOffBound, func() bool {
		r := c.post(a, "after-2", clusterBody("after-2"))
		return r.status == http.StatusCreated || r.status == http.StatusOK
	})
	t.Logf("left running after the cut-off: appends acknowledged again %v after it", time.Since(stalled).Round(time.Millisecond))
	if r := <-done; r.status == http.StatusCreated || r.status == http.StatusOK {
		t.Errorf("the cut-off append was acknowledged (%d)", r.status)
	}
	if _, e := c.sequencer([]*proc{a}, epoch, 30*time.Second); e <= epoch {
		t.Errorf("a sequences at epoch %d, want a new term after %d", e, epoch)
	}
}

// setStore makes n's config use the database at url.
func setStore(t *testing.T, n *proc, url string) {
	t.Helper()
	b, err := os.ReadFile(n.config)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["store"] = url
	if b, err = json.MarshalIndent(cfg, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.config, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
