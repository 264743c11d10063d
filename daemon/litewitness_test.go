package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/server"
	"github.com/decisionledger/ledger/server/metrics"
	"github.com/decisionledger/ledger/server/policies"
	"github.com/decisionledger/ledger/storage/badger"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/decisionledger/ledger/witness"
	"golang.org/x/mod/sumdb/note"
)

// The litewitness tests run the daemon against real witnesses: litewitness
// from filippo.io/torchwood v0.6.1, whose key lives in an ssh-agent
// (Debian's openssh-client). They find litewitness and witnessctl in
// $LEDGER_LITEWITNESS and $LEDGER_WITNESSCTL, on $PATH or in
// $(go env GOPATH)/bin (apitest.NeedTool); .ci/run installs them.

// witnessedServer is a ledgerd served in-process: its data directory as
// a first start makes it (apitest.DataDir), its witnesses as Start sets
// them up (newWitnesses), submitting every 20 ms with a short backoff,
// its checkpoints signed when the test publishes them.
type witnessedServer struct {
	url, token string
	l          *ledger.Ledger
	key        *ledger.Key
	cfg        *config.Config
}

// startWitnessedServer starts a witnessedServer whose config change changes
// (it lists the witnesses).
func startWitnessedServer(t *testing.T, change func(*config.Config)) *witnessedServer {
	t.Helper()
	path, token := apitest.DataDir(t, t.TempDir())
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	change(cfg)
	key, err := ledger.LoadKey(cfg.KeyFile, ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	store, err := badger.Open(t.Context(), cfg.StoreDir, badger.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	l, err := ledger.Open(t.Context(), store, key, ledger.Options{CheckpointInterval: -1, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	wopts, err := witnessOptions(cfg, l, storedCosignatures(cfg, l), log)
	if err != nil {
		t.Fatal(err)
	}
	wopts.BackoffMin, wopts.BackoffMax, wopts.Interval = 20*time.Millisecond, 200*time.Millisecond, 20*time.Millisecond
	wit, err := witness.New(t.Context(), wopts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		wit.Run(ctx)
	}()
	// Before the ledger closes (cleanups run last first).
	t.Cleanup(func() { cancel(); <-done })
	m := metrics.New()
	opts := serverOptions(cfg, log, m, server.NewCredentials(cfg))
	opts.Ledger, opts.Witnesses, opts.Policies = l, wit, policies.New(cfg.PolicyDir, cfg.StoreDir, nil, l, log, m)
	api, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(nil)
	srv, limited, err := newHTTPServer(cfg, log, m, api.Handler(), hs.Listener)
	if err != nil {
		t.Fatal(err)
	}
	hs.Config, hs.Listener = srv, limited
	hs.Start()
	t.Cleanup(hs.Close)
	return &witnessedServer{url: hs.URL, token: token, l: l, key: key, cfg: cfg}
}

// TestLitewitness: two litewitness instances, threshold 2. Cosigned
// checkpoints verify with ledger-verify --witness ... --witnesses-needed
// 2; with one witness stopped appends go on, checkpoints carry one
// cosignature and ledger-verify refuses them naming the missing witness;
// the witness catches up when it returns; a forked history signed with
// the same key is refused by both witnesses.
func TestLitewitness(t *testing.T) {
	agent := apitest.StartSSHAgent(t)
	var a, b *apitest.LiteWitness
	var ledgerVerify string
	s := startWitnessedServer(t, func(c *config.Config) {
		key, err := ledger.LoadKey(c.KeyFile, ledger.KeyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a = apitest.NewLiteWitness(t, agent, "witness-a.example.com", key.Name(), key.VerifierKey())
		b = apitest.NewLiteWitness(t, agent, "witness-b.example.org", key.Name(), key.VerifierKey())
		c.Witnesses = []config.WitnessConfig{
			{Name: "a", URL: a.URL(), Key: a.VKey},
			{Name: "b", URL: b.URL(), Key: b.VKey},
		}
		c.WitnessesNeeded = 2
		if err := c.Check(); err != nil {
			t.Fatal(err)
		}
	})
	ledgerVerify = buildLedgerVerify(t)
	vkey := s.key.VerifierKey()
	verifyProof := func(index uint64, needed int) (string, error) {
		t.Helper()
		proof := apitest.Get(t, fmt.Sprintf("%s/v1/proofs/%d", s.url, index))
		f := filepath.Join(t.TempDir(), "entry.tlog-proof")
		if err := os.WriteFile(f, []byte(proof), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(ledgerVerify, "proof", "--key", vkey, "--witness", a.VKey, "--witness", b.VKey,
			"--witnesses-needed", strconv.Itoa(needed), f).CombinedOutput()
		return string(out), err
	}

	// Both witnesses cosign.
	size := apitest.AppendN(t, s.url, s.token, s.l, 0, 10)
	cp := apitest.WaitCosignatures(t, s.url, size, 2)
	if out, err := verifyProof(3, 2); err != nil {
		t.Fatalf("ledger-verify with both cosignatures: %v\n%s", err, out)
	}
	// Interop: x/mod/sumdb/note opens the cosigned checkpoint with the
	// log's key, the cosignature lines unverified.
	logv, _ := note.NewVerifier(vkey)
	if n, err := note.Open(cp, note.VerifierList(logv)); err != nil || len(n.UnverifiedSigs) != 2 {
		t.Fatalf("x/mod/sumdb/note: %v", err)
	}
	// ... and, given torchwood's cosignature verifiers, verifies
	// litewitness's cosignatures too.
	if n, err := note.Open(cp, note.VerifierList(logv, a.Torchwood, b.Torchwood)); err != nil || len(n.Sigs) != 3 {
		t.Fatalf("x/mod/sumdb/note with torchwood's cosignature verifiers: %v", err)
	}
	// An export carries them too.
	export := filepath.Join(t.TempDir(), "export.ledger")
	os.WriteFile(export, []byte(apitest.Get(t, fmt.Sprintf("%s/v1/export?start=0&end=%d", s.url, size))), 0o644)
	if out, err := exec.Command(ledgerVerify, "export", "--key", vkey, "--witness", a.VKey, "--witness", b.VKey, export).CombinedOutput(); err != nil {
		t.Fatalf("ledger-verify export: %v\n%s", err, out)
	}

	// b stops: appends go on, checkpoints carry a's cosignature only.
	b.Stop(t)
	start := time.Now()
	size = apitest.AppendN(t, s.url, s.token, s.l, 10, 10)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("10 appends took %v with a witness down", d)
	}
	apitest.WaitCosignatures(t, s.url, size, 1)
	out, err := verifyProof(12, 2)
	if err == nil || !strings.Contains(out, "1 valid witness cosignature(s), 2 needed; cosigned by witness-a.example.com+") ||
		!strings.Contains(out, "no cosignature from witness-b.example.org+") {
		t.Fatalf("ledger-verify with one cosignature of 2 needed: %v\n%s", err, out)
	}
	if out, err := verifyProof(12, 1); err != nil {
		t.Fatalf("ledger-verify with one cosignature of 1 needed: %v\n%s", err, out)
	}
	metrics := apitest.Get(t, s.url+"/metrics")
	for _, want := range []string{
		`ledgerd_witness_lag_entries{witness="a"} 0`,
		fmt.Sprintf(`ledgerd_witness_lag_entries{witness="b"} %d`, size-10),
		"ledgerd_checkpoint_cosignatures 1",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q:\n%s", want, metrics)
		}
	}
	if strings.Contains(metrics, `ledgerd_witness_failures_total{kind="unreachable",witness="b"} 0`) {
		t.Errorf("no unreachable failure counted for b:\n%s", metrics)
	}

	// b returns and catches up, with a proof from size 10.
	b.Start(t)
	apitest.WaitCosignatures(t, s.url, size, 2)
	if out, err := verifyProof(12, 2); err != nil {
		t.Fatalf("ledger-verify after b caught up: %v\n%s", err, out)
	}

	// A forked history: a second store signed with the same key, longer
	// than the witnessed one. Both witnesses refuse it: the proof from
	// the size they cosigned does not verify against their root.
	fork, err := ledger.Open(t.Context(), memory.New(), s.key, ledger.Options{CheckpointInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer fork.Close()
	for i := range 30 {
		if _, err := fork.Append(t.Context(), apitest.Record(t, apitest.AppendBody(1000+i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fork.Publish(t.Context()); err != nil {
		t.Fatal(err)
	}
	fw, err := newWitnesses(t.Context(), s.cfg, fork, nil, slog.New(slog.DiscardHandler)) // not the real log's file
	if err != nil {
		t.Fatal(err)
	}
	forkCP, forkSize := fork.Checkpoint()
	for _, w := range s.cfg.Witnesses {
		err := fw.Submit(context.Background(), w.Name, forkCP, forkSize)
		if kind := submitKind(err); kind != witness.FailConflict {
			t.Fatalf("witness %s: first fork submission: %s %v, want a conflict (it knows size %d)", w.Name, kind, err, size)
		}
		err = fw.Submit(context.Background(), w.Name, forkCP, forkSize)
		if kind := submitKind(err); kind != witness.FailBadProof {
			t.Fatalf("witness %s: fork submitted from size %d: %s %v, want refused (422)", w.Name, size, kind, err)
		}
		if _, n := fw.Cosignatures(context.Background(), forkSize); n != 0 {
			t.Fatalf("witness %s cosigned the fork", w.Name)
		}
	}
	// And the real log still gets cosigned.
	size = apitest.AppendN(t, s.url, s.token, s.l, 20, 5)
	apitest.WaitCosignatures(t, s.url, size, 2)
}

// submitKind is the kind of a witness.SubmitError, or "".
func submitKind(err error) string {
	var se *witness.SubmitError
	if errors.As(err, &se) {
		return se.Kind
	}
	return ""
}

func buildLedgerVerify(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ledger-verify")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/ledger-verify").CombinedOutput(); err != nil {
		t.Fatalf("go build ledger-verify: %v\n%s", err, out)
	}
	return bin
}
