package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"filippo.io/torchwood"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/decisionledger/ledger/witness"
	"golang.org/x/crypto/ssh"
	"golang.org/x/mod/sumdb/note"
)

// The litewitness tests run ledgerd against real witnesses: litewitness
// from filippo.io/torchwood v0.6.1, whose key lives in an ssh-agent
// (Debian's openssh-client). They find litewitness and witnessctl in
// $LEDGER_LITEWITNESS and $LEDGER_WITNESSCTL, on $PATH or in
// $(go env GOPATH)/bin; .ci/run installs them.

const litewitnessInstall = "go install filippo.io/torchwood/cmd/litewitness@v0.6.1 filippo.io/torchwood/cmd/witnessctl@v0.6.1 (and apt-get install openssh-client for ssh-agent), or run bash .ci/run"

// needTool finds a program the test needs, or skips the test (fails it
// under LEDGER_CI=1, where .ci/run installed everything).
func needTool(t testing.TB, env, name string) string {
	t.Helper()
	if p := findTool(env, name); p != "" {
		return p
	}
	msg := fmt.Sprintf("%s not found (set %s, or put it on PATH): %s", name, env, litewitnessInstall)
	if os.Getenv("LEDGER_CI") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// findTool returns the program named by $env, on PATH or in
// $(go env GOPATH)/bin; "" if there is none.
func findTool(env, name string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if gopath, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(gopath)), "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// sshAgent is a dedicated ssh-agent holding the witnesses' keys.
type sshAgent struct {
	sock string
	add  string // ssh-add
}

func startSSHAgent(t testing.TB) *sshAgent {
	t.Helper()
	agentBin := needTool(t, "LEDGER_SSH_AGENT", "ssh-agent")
	add := needTool(t, "LEDGER_SSH_ADD", "ssh-add")
	// A short path: unix socket paths are limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "lw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "agent.sock")
	cmd := exec.Command(agentBin, "-D", "-a", sock)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitUntil(t, "ssh-agent's socket", func() bool { _, err := os.Stat(sock); return err == nil })
	return &sshAgent{sock: sock, add: add}
}

// liteWitness is one litewitness process and its key.
type liteWitness struct {
	name, vkey string
	// torchwood is torchwood's cosignature/v1 verifier for the key.
	torchwood note.Verifier
	db, addr  string
	args      []string
	bin       string
	cmd       *exec.Cmd
	logs      *lockedBuffer
}

// newLiteWitness makes a witness key, loads it into the agent, creates
// the witness's database knowing the log (origin and verifier key) with
// witnessctl, and starts litewitness.
func newLiteWitness(t testing.TB, agent *sshAgent, name, origin, logVKey string) *liteWitness {
	t.Helper()
	bin := needTool(t, "LEDGER_LITEWITNESS", "litewitness")
	ctl := needTool(t, "LEDGER_WITNESSCTL", "witnessctl")
	dir := t.TempDir()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, name)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "witness.key")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	add := exec.Command(agent.add, keyFile)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+agent.sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v\n%s", err, out)
	}
	sshPub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	// The witness's cosignature/v1 verifier key, as litewitness logs it.
	cosigner, err := torchwood.NewCosignatureSigner(name, priv)
	if err != nil {
		t.Fatal(err)
	}
	w := &liteWitness{name: name, vkey: cosigner.Verifier().String(), torchwood: cosigner.Verifier(), db: filepath.Join(dir, "witness.db"), bin: bin}
	for _, args := range [][]string{
		{"add-log", "-db", w.db, "-origin", origin},
		{"add-key", "-db", w.db, "-origin", origin, "-key", logVKey},
	} {
		if out, err := exec.Command(ctl, args...).CombinedOutput(); err != nil {
			t.Fatalf("witnessctl %s: %v\n%s", args[0], err, out)
		}
	}
	w.addr = freeAddr(t)
	w.args = []string{"-db", w.db, "-name", name, "-key", ssh.FingerprintSHA256(sshPub), "-ssh-agent", agent.sock, "-listen", w.addr}
	w.start(t)
	t.Cleanup(func() { w.stop(t) })
	if !strings.Contains(w.logs.String(), w.vkey) {
		t.Fatalf("litewitness's verifier key is not %s:\n%s", w.vkey, w.logs)
	}
	return w
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func (w *liteWitness) url() string { return "http://" + w.addr }

func (w *liteWitness) start(t testing.TB) {
	t.Helper()
	w.logs = &lockedBuffer{}
	w.cmd = exec.Command(w.bin, w.args...)
	w.cmd.Stdout, w.cmd.Stderr = w.logs, w.logs
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "litewitness "+w.name+" to listen", func() bool {
		c, err := net.Dial("tcp", w.addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func (w *liteWitness) stop(t testing.TB) {
	if w.cmd == nil {
		return
	}
	w.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { w.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		w.cmd.Process.Kill()
		<-done
	}
	w.cmd = nil
}

func waitUntil(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cosignedCheckpoint fetches /v1/checkpoint and its Ledger-Cosignatures.
func cosignedCheckpoint(t *testing.T, url string) ([]byte, int) {
	t.Helper()
	resp, err := http.Get(url + "/v1/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n, err := strconv.Atoi(resp.Header.Get("Ledger-Cosignatures"))
	if resp.StatusCode != 200 || err != nil {
		t.Fatalf("GET /v1/checkpoint: %s, Ledger-Cosignatures %q", resp.Status, resp.Header.Get("Ledger-Cosignatures"))
	}
	return b, n
}

// waitCosignatures waits until the latest checkpoint, of size, is served
// with n cosignatures, and returns it.
func waitCosignatures(t *testing.T, s *testServer, size uint64, n int) []byte {
	t.Helper()
	var cp []byte
	waitUntil(t, fmt.Sprintf("%d cosignatures on the checkpoint of size %d", n, size), func() bool {
		var got int
		cp, got = cosignedCheckpoint(t, s.url)
		return got == n && bytes.Contains(cp, []byte(fmt.Sprintf("\n%d\n", size)))
	})
	return cp
}

func appendN(t *testing.T, s *testServer, from, n int) uint64 {
	t.Helper()
	for i := from; i < from+n; i++ {
		if resp, b := s.post(t, s.token, appendBody(i)); resp.StatusCode != http.StatusCreated {
			t.Fatalf("append %d: %s %s", i, resp.Status, b)
		}
	}
	cp, err := s.l.Publish(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, size := s.l.Checkpoint()
	_ = cp
	return size
}

// TestLitewitness: two litewitness instances, threshold 2. Cosigned
// checkpoints verify with ledger-verify --witness ... --witnesses-needed
// 2; with one witness stopped appends go on, checkpoints carry one
// cosignature and ledger-verify refuses them naming the missing witness;
// the witness catches up when it returns; a forked history signed with
// the same key is refused by both witnesses.
func TestLitewitness(t *testing.T) {
	agent := startSSHAgent(t)
	var a, b *liteWitness
	var ledgerVerify string
	s := startServerWith(t, func(c *config.Config) {
		key, err := ledger.LoadKey(c.KeyFile, ledger.KeyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a = newLiteWitness(t, agent, "witness-a.example.com", key.Name(), key.VerifierKey())
		b = newLiteWitness(t, agent, "witness-b.example.org", key.Name(), key.VerifierKey())
		c.Witnesses = []config.WitnessConfig{
			{Name: "a", URL: a.url(), Key: a.vkey},
			{Name: "b", URL: b.url(), Key: b.vkey},
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
		proof := get(t, fmt.Sprintf("%s/v1/proofs/%d", s.url, index))
		f := filepath.Join(t.TempDir(), "entry.tlog-proof")
		if err := os.WriteFile(f, []byte(proof), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(ledgerVerify, "proof", "--key", vkey, "--witness", a.vkey, "--witness", b.vkey,
			"--witnesses-needed", strconv.Itoa(needed), f).CombinedOutput()
		return string(out), err
	}

	// Both witnesses cosign.
	size := appendN(t, s, 0, 10)
	cp := waitCosignatures(t, s, size, 2)
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
	if n, err := note.Open(cp, note.VerifierList(logv, a.torchwood, b.torchwood)); err != nil || len(n.Sigs) != 3 {
		t.Fatalf("x/mod/sumdb/note with torchwood's cosignature verifiers: %v", err)
	}
	// An export carries them too.
	export := filepath.Join(t.TempDir(), "export.ledger")
	os.WriteFile(export, []byte(get(t, fmt.Sprintf("%s/v1/export?start=0&end=%d", s.url, size))), 0o644)
	if out, err := exec.Command(ledgerVerify, "export", "--key", vkey, "--witness", a.vkey, "--witness", b.vkey, export).CombinedOutput(); err != nil {
		t.Fatalf("ledger-verify export: %v\n%s", err, out)
	}

	// b stops: appends go on, checkpoints carry a's cosignature only.
	b.stop(t)
	start := time.Now()
	size = appendN(t, s, 10, 10)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("10 appends took %v with a witness down", d)
	}
	waitCosignatures(t, s, size, 1)
	out, err := verifyProof(12, 2)
	if err == nil || !strings.Contains(out, "1 valid witness cosignature(s), 2 needed; cosigned by witness-a.example.com+") ||
		!strings.Contains(out, "no cosignature from witness-b.example.org+") {
		t.Fatalf("ledger-verify with one cosignature of 2 needed: %v\n%s", err, out)
	}
	if out, err := verifyProof(12, 1); err != nil {
		t.Fatalf("ledger-verify with one cosignature of 1 needed: %v\n%s", err, out)
	}
	metrics := get(t, s.url+"/metrics")
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
	b.start(t)
	waitCosignatures(t, s, size, 2)
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
		if _, err := fork.Append(t.Context(), mustRecord(t, appendBody(1000+i))); err != nil {
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
	size = appendN(t, s, 20, 5)
	waitCosignatures(t, s, size, 2)
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
	if out, err := exec.Command("go", "build", "-o", bin, "../ledger-verify").CombinedOutput(); err != nil {
		t.Fatalf("go build ledger-verify: %v\n%s", err, out)
	}
	return bin
}
