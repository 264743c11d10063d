//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/internal/witnesstest"
	"github.com/decisionledger/ledger/verify"
	"github.com/jackc/pgx/v5"
)

// TestClusterCosignatures: two ledgerd processes on one database, two
// in-process witnesses, witnesses_needed 2. The follower serves the
// checkpoint with both cosignatures from the database, without forwarding,
// and it verifies with both witness keys and threshold 2. The sequencer is
// killed (SIGKILL) while the witnesses refuse everything; the follower
// takes over and serves the cosigned checkpoint at once, from the
// database. When the witnesses answer again, the next checkpoint is sent
// with a proof from the size each cosigned (no 409). A byte flipped in a
// row is not served by an instance that reads it (the killed one,
// restarted as a follower).
func TestClusterCosignatures(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two ledgerd instances on PostgreSQL")
	}
	db := pgtest.Shared(t).NewDatabase(t)
	c := newCluster(t, db, 0, map[string]any{"checkpoint_interval": "50ms", "witness_interval": "50ms"},
		map[string]any{"lease_ttl": "1s"}, "a", "b")
	fws := []*witnesstest.Witness{witnesstest.New(t, "witness-0.example.org", c.vkey), witnesstest.New(t, "witness-1.example.org", c.vkey)}
	var keys []*verify.WitnessKey
	var witnesses []map[string]any
	for i, w := range fws {
		k, err := verify.ParseWitnessKey(w.VKey)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
		witnesses = append(witnesses, map[string]any{"name": fmt.Sprintf("w%d", i), "url": w.URL, "key": w.VKey})
	}
	for _, n := range c.nodes {
		setConfigFile(t, n.config, map[string]any{"witnesses": witnesses, "witnesses_needed": 2})
	}
	policy, err := verify.NewWitnessPolicy(keys, 2)
	if err != nil {
		t.Fatal(err)
	}
	auditor := c.key.WithWitnesses(policy)

	c.start(c.nodes[0])
	seq, epoch := c.sequencer(c.nodes, 0, 30*time.Second)
	follower := c.others(seq)[0]
	c.start(follower)
	c.waitReady(follower)
	for i := range 5 {
		if a := c.postPatient(follower, fmt.Sprintf("cosig-%d", i), clusterBody(fmt.Sprintf("cosig-%d", i))); a.receipt == nil {
			t.Fatalf("append %d through %s: %d %s %v", i, follower.name, a.status, a.code, a.err)
		}
	}

	// The follower serves the latest checkpoint (the sequencer's, size 5)
	// with both cosignatures, itself.
	var cp []byte
	c.waitFor("the follower to serve the checkpoint of size 5 with 2 cosignatures", 30*time.Second, func() bool {
		var n int
		cp, n = servedCheckpoint(t, follower)
		return n == 2 && bytes.Contains(cp, []byte("\n5\n"))
	})
	forwarded := metric(t, follower, "ledgerd_forwarded_requests_total")
	for _, path := range []string{"/v1/checkpoint", "/v1/checkpoints/5", "/checkpoint"} {
		b, n := get2(t, follower.url()+path)
		if n != "2" || !bytes.Equal(b, cp) {
			t.Errorf("the follower's GET %s: Ledger-Cosignatures %q\n%s", path, n, b)
		}
	}
	if proof, _ := get2(t, follower.url()+"/v1/proofs/3"); !bytes.HasSuffix(proof, cp) {
		t.Errorf("the follower's tlog-proof does not end with the cosigned checkpoint:\n%s", proof)
	}
	if after := metric(t, follower, "ledgerd_forwarded_requests_total"); after != forwarded {
		t.Errorf("the follower forwarded %d reads that carry cosignatures", after-forwarded)
	}
	// Its metrics say what it serves; the submissions are the sequencer's.
	if m := metricsText(t, follower); !bytes.Contains(m, []byte("\nledgerd_checkpoint_cosignatures 2\n")) ||
		!bytes.Contains(m, []byte(`ledgerd_witness_cosigned_size{witness="w1"} 5`)) || bytes.Contains(m, []byte("ledgerd_witness_failures_total")) {
		t.Errorf("the follower's witness metrics:\n%s", m)
	}
	if _, err := auditor.Checkpoint(cp); err != nil {
		t.Fatalf("the follower's checkpoint does not verify with 2 witnesses needed: %v\n%s", err, cp)
	}
	if _, err := c.key.WithWitnesses(mustPolicy(t, keys, 2)).Checkpoint(withoutLine(cp, 2)); err == nil {
		t.Fatal("a checkpoint with one cosignature verified with 2 needed: the check above proves nothing")
	}

	// The witnesses refuse everything; the sequencer is killed, and the
	// follower takes over with the cosignatures of the database alone.
	setDown(fws, true)
	seq.kill()
	next, _ := c.sequencer([]*proc{follower}, epoch, 30*time.Second)
	got, n := servedCheckpoint(t, next)
	if n != 2 || !bytes.Equal(got, cp) {
		t.Fatalf("the new sequencer serves %d cosignatures at once:\n%s\nwant\n%s", n, got, cp)
	}
	if _, err := auditor.Checkpoint(got); err != nil {
		t.Errorf("the new sequencer's checkpoint: %v", err)
	}
	if m := metricsText(t, next); !bytes.Contains(m, []byte(`ledgerd_witness_cosigned_size{witness="w1"} 5`)) ||
		!bytes.Contains(m, []byte(`ledgerd_witness_failures_total{kind="unreachable",witness="w1"}`)) {
		t.Errorf("the new sequencer's witness metrics:\n%s", m)
	}

	// The witnesses answer again: the next checkpoint is cosigned, each
	// witness sent a proof from the size it cosigned under the former
	// sequencer.
	before := witnesstest.Conflicts(fws)
	setDown(fws, false)
	for i := 5; i < 8; i++ {
		if a := c.postPatient(next, fmt.Sprintf("cosig-%d", i), clusterBody(fmt.Sprintf("cosig-%d", i))); a.receipt == nil {
			t.Fatalf("append %d: %d %s %v", i, a.status, a.code, a.err)
		}
	}
	c.waitFor("the checkpoint of size 8 with 2 cosignatures", 30*time.Second, func() bool {
		cp, n = servedCheckpoint(t, next)
		return n == 2 && bytes.Contains(cp, []byte("\n8\n"))
	})
	if d := witnesstest.Conflicts(fws) - before; d != 0 {
		t.Errorf("the witnesses answered 409 %d times to the new sequencer", d)
	}
	if _, err := auditor.Checkpoint(cp); err != nil {
		t.Errorf("the new sequencer's next checkpoint: %v", err)
	}

	// A byte flipped in w1's row for size 8: the killed instance, started
	// again as a follower, reads the database and serves w0's line only.
	conn := pgConn(t, db)
	var line []byte
	c.waitFor("w1's row for size 8", 30*time.Second, func() bool {
		err := conn.QueryRow(t.Context(), "SELECT line FROM cosignatures WHERE size = 8 AND witness = $1", keys[1].ID()).Scan(&line)
		return err == nil
	})
	tampered := witnesstest.FlipSignatureByte(t, line)
	if _, err := conn.Exec(t.Context(), "UPDATE cosignatures SET line = $1 WHERE size = 8 AND witness = $2", tampered, keys[1].ID()); err != nil {
		t.Fatal(err)
	}
	c.start(seq)
	c.waitReady(seq)
	c.waitFor("the restarted follower's view at size 8", 30*time.Second, func() bool {
		got, n = servedCheckpoint(t, seq)
		return bytes.Contains(got, []byte("\n8\n"))
	})
	if n != 1 || bytes.Contains(got, tampered) || bytes.Contains(got, []byte("— witness-1.example.org ")) ||
		!bytes.Contains(got, []byte("— witness-0.example.org ")) {
		t.Errorf("with w1's row tampered with, the follower serves %d cosignatures:\n%s", n, got)
	}
	var we *verify.WitnessError
	if _, err := auditor.Checkpoint(got); !errors.As(err, &we) {
		t.Errorf("with one valid cosignature: %v, want a WitnessError", err)
	}
}

// setConfigFile sets members of the config file at path.
func setConfigFile(t *testing.T, path string, members map[string]any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, v := range members {
		cfg[k] = v
	}
	if b, err = json.MarshalIndent(cfg, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// setDown makes the witnesses refuse every submission (503), or answer
// again.
func setDown(fws []*witnesstest.Witness, down bool) {
	for _, w := range fws {
		w.SetDown(down)
	}
}

func mustPolicy(t *testing.T, keys []*verify.WitnessKey, needed int) *verify.WitnessPolicy {
	t.Helper()
	p, err := verify.NewWitnessPolicy(keys, needed)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// withoutLine is the signed note cp without its signature line i (0: the
// log's).
func withoutLine(cp []byte, i int) []byte {
	text, sigs, _ := bytes.Cut(cp, []byte("\n\n"))
	lines := bytes.SplitAfter(sigs, []byte("\n"))
	out := append(append([]byte(nil), text...), "\n\n"...)
	for j, l := range lines {
		if j != i {
			out = append(out, l...)
		}
	}
	return out
}

// servedCheckpoint is n's GET /v1/checkpoint and its Ledger-Cosignatures;
// nil when n does not answer 200.
func servedCheckpoint(t *testing.T, n *proc) ([]byte, int) {
	t.Helper()
	b, h := get2(t, n.url()+"/v1/checkpoint")
	c, err := strconv.Atoi(h)
	if err != nil {
		return nil, 0
	}
	return b, c
}

// get2 is GET url's body and Ledger-Cosignatures header (the body nil
// unless 200).
func get2(t *testing.T, url string) ([]byte, string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return nil, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, ""
	}
	return b, resp.Header.Get("Ledger-Cosignatures")
}

// metricsText is n's /metrics.
func metricsText(t *testing.T, n *proc) []byte {
	t.Helper()
	resp, err := http.Get(n.url() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

// metric is the value of the unlabelled series name on n's /metrics.
func metric(t *testing.T, n *proc, name string) int {
	t.Helper()
	b := metricsText(t, n)
	m := regexp.MustCompile(`(?m)^` + name + ` ([0-9]+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s on instance %s's /metrics", name, n.name)
	}
	v, _ := strconv.Atoi(string(m[1]))
	return v
}

// pgConn is a connection to the database at url, closed with the test.
func pgConn(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
