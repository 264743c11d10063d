package main

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/torchwood"
	"github.com/decisionledger/ledger/ledger"
	tlog "github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// fakeWitness is an in-process C2SP tlog-witness add-checkpoint endpoint
// that checks as the spec says (log signature, old size, consistency
// proof) and cosigns with torchwood's cosignature/v1 signer. The real
// witness tests use litewitness (litewitness_test.go); this one runs
// everywhere, and can misbehave.
type fakeWitness struct {
	signer *torchwood.CosignatureSigner
	vkey   string
	logv   note.Verifier
	srv    *httptest.Server

	mu   sync.Mutex
	size uint64
	root []byte
	// wrongKey, if set, cosigns with another key than vkey's.
	wrongKey *torchwood.CosignatureSigner
	// down, if set, answers every submission 503.
	down bool
	// flip, if set, changes a byte of the signature it returns.
	flip      bool
	requests  int
	accepted  int // checkpoints cosigned
	conflicts int // 409 answers
}

func newFakeWitness(t testing.TB, name, logVKey string) *fakeWitness {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, err := torchwood.NewCosignatureSigner(name, priv)
	if err != nil {
		t.Fatal(err)
	}
	logv, err := note.NewVerifier(logVKey)
	if err != nil {
		t.Fatal(err)
	}
	w := &fakeWitness{signer: s, vkey: s.Verifier().String(), logv: logv, root: rfc6962.DefaultHasher.EmptyRoot()}
	w.srv = httptest.NewServer(http.HandlerFunc(w.addCheckpoint))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *fakeWitness) addCheckpoint(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/add-checkpoint" {
		http.NotFound(rw, r)
		return
	}
	br := bufio.NewReader(io.LimitReader(r.Body, 64<<10))
	first, _ := br.ReadString('\n')
	old, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(first, "old "), "\n"), 10, 64)
	if err != nil {
		http.Error(rw, "bad old line", http.StatusBadRequest)
		return
	}
	var p [][]byte
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			http.Error(rw, "no blank line", http.StatusBadRequest)
			return
		}
		if line == "\n" {
			break
		}
		h, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(line, "\n"))
		if err != nil {
			http.Error(rw, "bad proof line", http.StatusBadRequest)
			return
		}
		p = append(p, h)
	}
	signed, _ := io.ReadAll(br)
	n, err := note.Open(signed, note.VerifierList(w.logv))
	if err != nil {
		http.Error(rw, "bad signature", http.StatusForbidden)
		return
	}
	cp := &tlog.Checkpoint{}
	if _, err := cp.Unmarshal([]byte(n.Text)); err != nil {
		http.Error(rw, "bad checkpoint", http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.down {
		http.Error(rw, "down", http.StatusServiceUnavailable)
		return
	}
	w.requests++
	if old != w.size {
		w.conflicts++
		rw.Header().Set("Content-Type", "text/x.tlog.size")
		rw.WriteHeader(http.StatusConflict)
		fmt.Fprintf(rw, "%d\n", w.size)
		return
	}
	if old > cp.Size || (old == 0 && len(p) != 0) {
		http.Error(rw, "bad old size", http.StatusBadRequest)
		return
	}
	if old > 0 {
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, old, cp.Size, p, w.root, cp.Hash); err != nil {
			http.Error(rw, "bad proof", http.StatusUnprocessableEntity)
			return
		}
	}
	signer := w.signer
	if w.wrongKey != nil {
		signer = w.wrongKey
	}
	cosigned, err := note.Sign(&note.Note{Text: n.Text}, signer)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	w.size, w.root = cp.Size, cp.Hash
	w.accepted++
	line := cosigned[len(n.Text)+1:]
	if w.flip {
		name, b64, _ := strings.Cut(strings.TrimSuffix(string(line), "\n"), " "+w.signer.Name()+" ")
		sig, _ := base64.StdEncoding.DecodeString(b64)
		sig[len(sig)-1] ^= 1
		line = []byte(name + " " + w.signer.Name() + " " + base64.StdEncoding.EncodeToString(sig) + "\n")
	}
	rw.Write(line)
}

// addFakeWitnesses starts n fake witnesses for the log of c's key and
// lists them in c's witnesses, named w0, w1, ...
func addFakeWitnesses(t testing.TB, c *Config, n int) []*fakeWitness {
	t.Helper()
	key, err := ledger.LoadKey(c.KeyFile, ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ws []*fakeWitness
	for i := range n {
		w := newFakeWitness(t, fmt.Sprintf("witness-%d.example.org", i), key.VerifierKey())
		ws = append(ws, w)
		c.Witnesses = append(c.Witnesses, WitnessConfig{Name: fmt.Sprintf("w%d", i), URL: w.srv.URL, Key: w.vkey})
	}
	return ws
}

// witnessServer starts a server with n fake witnesses, all needed.
func witnessServer(t testing.TB, n int) (*testServer, []*fakeWitness) {
	t.Helper()
	var ws []*fakeWitness
	s := startServerWith(t, func(c *Config) {
		ws = addFakeWitnesses(t, c, n)
		if err := c.check(); err != nil {
			t.Fatal(err)
		}
	})
	return s, ws
}

// TestWitnessBadCosignature: a witness answering with a cosignature by
// another key than its configured one, or with an invalid signature, gets
// no line in the served checkpoint, and the failure is counted as
// bad_answer.
func TestWitnessBadCosignature(t *testing.T) {
	t.Run("wrong key", func(t *testing.T) {
		_, other, _ := ed25519.GenerateKey(rand.Reader)
		testBadCosignature(t, func(w *fakeWitness) { w.wrongKey, _ = torchwood.NewCosignatureSigner("witness-1.example.org", other) })
	})
	t.Run("invalid signature", func(t *testing.T) {
		testBadCosignature(t, func(w *fakeWitness) { w.flip = true })
	})
}

func testBadCosignature(t *testing.T, spoil func(*fakeWitness)) {
	s, ws := witnessServer(t, 2)
	bad := ws[1]
	bad.mu.Lock()
	spoil(bad)
	bad.mu.Unlock()
	size := appendN(t, s, 0, 5)
	cp := waitCosignatures(t, s, size, 1)
	if !bytes.Contains(cp, []byte("— witness-0.example.org ")) || bytes.Contains(cp, []byte("— witness-1.example.org ")) {
		t.Fatalf("served checkpoint:\n%s", cp)
	}
	waitUntil(t, "a bad_answer failure", func() bool {
		return strings.Contains(get(t, s.url+"/metrics"), `ledgerd_witness_failures_total{kind="bad_answer",witness="w1"} `) &&
			!strings.Contains(get(t, s.url+"/metrics"), `ledgerd_witness_failures_total{kind="bad_answer",witness="w1"} 0`)
	})
}

// TestWitnessCosignaturesKept: the latest checkpoint's cosignatures are
// kept in store_dir, and a restart serves them before any witness
// answers; they are ignored once the checkpoint is not the latest.
func TestWitnessCosignaturesKept(t *testing.T) {
	s, _ := witnessServer(t, 2)
	size := appendN(t, s, 0, 5)
	cp := waitCosignatures(t, s, size, 2)
	// A second witnesses set over the same ledger and store_dir, whose
	// witnesses are unreachable: it holds both cosignatures at once.
	cfg := *s.cfg
	cfg.Witnesses = append([]WitnessConfig(nil), s.cfg.Witnesses...)
	for i := range cfg.Witnesses {
		cfg.Witnesses[i].URL = "http://127.0.0.1:1"
	}
	var ws *witnesses
	var got []byte
	waitUntil(t, "the kept file to hold both cosignatures", func() bool {
		var err error
		if ws, err = newWitnesses(t.Context(), &cfg, s.l, storedCosignatures(&cfg, s.l), slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		c, _ := s.l.Checkpoint()
		got = ws.Cosigned(t.Context(), c, size)
		return bytes.Equal(got, cp)
	})
	// A later checkpoint: the kept cosignatures are not for it.
	appendN(t, s, 5, 1)
	ws, _ = newWitnesses(t.Context(), &cfg, s.l, storedCosignatures(&cfg, s.l), slog.New(slog.DiscardHandler))
	if _, n := ws.Cosignatures(t.Context(), size+1); n != 0 {
		t.Fatalf("%d cosignatures for a checkpoint nobody cosigned", n)
	}
}

// TestWitnessUnreachable: appends are not slowed by a witness that does
// not answer, and its failures are counted.
func TestWitnessUnreachable(t *testing.T) {
	s, ws := witnessServer(t, 2)
	ws[1].srv.Close()
	start := time.Now()
	size := appendN(t, s, 0, 20)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("20 appends took %v with a witness down", d)
	}
	waitCosignatures(t, s, size, 1)
	waitUntil(t, "unreachable failures for w1", func() bool {
		return !strings.Contains(get(t, s.url+"/metrics"), `ledgerd_witness_failures_total{kind="unreachable",witness="w1"} 0`)
	})
}

func TestConfigWitnesses(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, _ := torchwood.NewCosignatureSigner("witness.example.org", priv)
	_, priv2, _ := ed25519.GenerateKey(rand.Reader)
	s2, _ := torchwood.NewCosignatureSigner("witness-2.example.org", priv2)
	good := WitnessConfig{Name: "w", URL: "https://witness.example.org", Key: s.Verifier().String()}
	good2 := WitnessConfig{Name: "w2", URL: "http://witness-2.example.org/prefix", Key: s2.Verifier().String()}
	sameKey := good2
	sameKey.Key = good.Key
	for _, tc := range []struct {
		ws     []WitnessConfig
		needed int
		want   string // "" accepted
	}{
		{[]WitnessConfig{good, good2}, 0, ""},
		{[]WitnessConfig{good, good2}, 1, ""},
		{[]WitnessConfig{good, good2}, 3, "witnesses_needed 3 is out of range"},
		{nil, 1, "witnesses_needed 1 is out of range"},
		{[]WitnessConfig{good, good2}, -1, "out of range"},
		{[]WitnessConfig{good, good}, 0, `name "w" repeated`},
		{[]WitnessConfig{good, sameKey}, 0, "the same public key"},
		{[]WitnessConfig{{Name: "w", URL: "ftp://witness.example.org", Key: good.Key}}, 0, "is not an http or https URL"},
		{[]WitnessConfig{{Name: "w", URL: "witness.example.org", Key: good.Key}}, 0, "is not an http or https URL"},
		{[]WitnessConfig{{Name: "w", URL: good.URL, Key: "witness.example.org+00000000+AAAA"}}, 0, "key"},
		{[]WitnessConfig{{Name: "", URL: good.URL, Key: good.Key}}, 0, "name is required"},
	} {
		s := startServerWith(t, nil)
		c := *s.cfg
		c.Witnesses, c.WitnessesNeeded = tc.ws, tc.needed
		err := c.check()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("witnesses %v, needed %d: got %v, want %q", tc.ws, tc.needed, err, tc.want)
		}
	}
}

// TestWitnessInterval: however often the log signs, a witness is sent at
// most one checkpoint per witness_interval, the latest, and it is
// cosigned in the end. Every cosigned submission started after start and
// before the count is read, at least the interval apart, so there are at
// most (that time / interval) + 1 of them, on a machine however loaded.
func TestWitnessInterval(t *testing.T) {
	const interval = 300 * time.Millisecond
	start := time.Now()
	var w *fakeWitness
	s := startServerWith(t, func(c *Config) {
		key, err := ledger.LoadKey(c.KeyFile, ledger.KeyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w = newFakeWitness(t, "witness-0.example.org", key.VerifierKey())
		c.Witnesses = []WitnessConfig{{Name: "w0", URL: w.srv.URL, Key: w.vkey}}
		c.WitnessInterval = interval.String()
		if err := c.check(); err != nil {
			t.Fatal(err)
		}
	})
	// Sign a checkpoint after every append, for at least a second and
	// three times as many checkpoints as the witness may cosign.
	var size uint64
	for i := 0; ; i++ {
		size = appendN(t, s, i, 1)
		elapsed := time.Since(start)
		if elapsed >= time.Second && size >= 3*uint64(elapsed/interval+1) {
			break
		}
		if elapsed > 20*time.Second {
			t.Fatalf("only %d checkpoints signed in %v", size, elapsed)
		}
	}
	w.mu.Lock()
	accepted := w.accepted
	w.mu.Unlock()
	elapsed := time.Since(start)
	if most := int(elapsed/interval) + 1; accepted > most {
		t.Errorf("the witness cosigned %d of %d checkpoints in %v; at most %d with witness_interval %v", accepted, size+1, elapsed, most, interval)
	}
	waitCosignatures(t, s, size, 1)
	t.Logf("%d checkpoints, %d cosigned in %v", size+1, accepted, elapsed)
}

// TestWitnessForkedMetrics: a witness that cosigned another history of
// the log's origin (a forked store, the same key) answers 409 with its
// size, and then refuses the proof from that size: the witness's
// cosigned-size metric reports only sizes cosigned for this log's
// history, none here, and the lag the whole log, not the other
// history's size.
func TestWitnessForkedMetrics(t *testing.T) {
	var w *fakeWitness
	s := startServerWith(t, func(c *Config) {
		w = addFakeWitnesses(t, c, 1)[0]
		// The other history: size 3, another root.
		w.size, w.root = 3, bytes.Repeat([]byte{0x42}, 32)
		if err := c.check(); err != nil {
			t.Fatal(err)
		}
	})
	size := appendN(t, s, 0, 5)
	waitUntil(t, "a bad_proof failure", func() bool {
		m := get(t, s.url+"/metrics")
		return strings.Contains(m, `ledgerd_witness_failures_total{kind="bad_proof",witness="w0"} `) &&
			!strings.Contains(m, `ledgerd_witness_failures_total{kind="bad_proof",witness="w0"} 0`)
	})
	m := get(t, s.url+"/metrics")
	for _, want := range []string{`ledgerd_witness_cosigned_size{witness="w0"} 0`, fmt.Sprintf(`ledgerd_witness_lag_entries{witness="w0"} %d`, size)} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("the metrics lack %q:\n%s", want, m)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.accepted != 0 || w.conflicts == 0 {
		t.Errorf("the witness cosigned %d checkpoints and answered %d conflicts, want none and some", w.accepted, w.conflicts)
	}
}
