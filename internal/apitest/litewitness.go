package apitest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"filippo.io/torchwood"
	"golang.org/x/crypto/ssh"
	"golang.org/x/mod/sumdb/note"
)

// Real witnesses for tests: litewitness from filippo.io/torchwood
// v0.6.1, whose key lives in an ssh-agent (Debian's openssh-client).
// They are found in $LEDGER_LITEWITNESS and $LEDGER_WITNESSCTL, on $PATH
// or in $(go env GOPATH)/bin; .ci/run installs them.

// LitewitnessInstall says how to install what the real witnesses need.
const LitewitnessInstall = "go install filippo.io/torchwood/cmd/litewitness@v0.6.1 filippo.io/torchwood/cmd/witnessctl@v0.6.1 (and apt-get install openssh-client for ssh-agent), or run bash .ci/run"

// NeedTool finds a program the test needs, or skips the test (fails it
// under LEDGER_CI=1, where .ci/run installed everything).
func NeedTool(t testing.TB, env, name string) string {
	t.Helper()
	if p := FindTool(env, name); p != "" {
		return p
	}
	msg := fmt.Sprintf("%s not found (set %s, or put it on PATH): %s", name, env, LitewitnessInstall)
	if os.Getenv("LEDGER_CI") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// FindTool returns the program named by $env, on PATH or in
// $(go env GOPATH)/bin; "" if there is none.
func FindTool(env, name string) string {
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

// SSHAgent is a dedicated ssh-agent holding the witnesses' keys.
type SSHAgent struct {
	sock string
	add  string // ssh-add
}

// StartSSHAgent starts an ssh-agent, stopped at the test's end.
func StartSSHAgent(t testing.TB) *SSHAgent {
	t.Helper()
	agentBin := NeedTool(t, "LEDGER_SSH_AGENT", "ssh-agent")
	add := NeedTool(t, "LEDGER_SSH_ADD", "ssh-add")
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
	WaitUntil(t, "ssh-agent's socket", func() bool { _, err := os.Stat(sock); return err == nil })
	return &SSHAgent{sock: sock, add: add}
}

// LiteWitness is one litewitness process and its key.
type LiteWitness struct {
	Name string
	// VKey is the witness's cosignature/v1 verifier key.
	VKey string
	// Torchwood is torchwood's cosignature/v1 verifier for the key.
	Torchwood note.Verifier
	db, addr  string
	args      []string
	bin       string
	cmd       *exec.Cmd
	logs      *LockedBuffer
}

// NewLiteWitness makes a witness key, loads it into the agent, creates
// the witness's database knowing the log (origin and verifier key) with
// witnessctl, and starts litewitness.
func NewLiteWitness(t testing.TB, agent *SSHAgent, name, origin, logVKey string) *LiteWitness {
	t.Helper()
	bin := NeedTool(t, "LEDGER_LITEWITNESS", "litewitness")
	ctl := NeedTool(t, "LEDGER_WITNESSCTL", "witnessctl")
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
	w := &LiteWitness{Name: name, VKey: cosigner.Verifier().String(), Torchwood: cosigner.Verifier(), db: filepath.Join(dir, "witness.db"), bin: bin}
	for _, args := range [][]string{
		{"add-log", "-db", w.db, "-origin", origin},
		{"add-key", "-db", w.db, "-origin", origin, "-key", logVKey},
	} {
		if out, err := exec.Command(ctl, args...).CombinedOutput(); err != nil {
			t.Fatalf("witnessctl %s: %v\n%s", args[0], err, out)
		}
	}
	w.addr = FreeAddr(t)
	w.args = []string{"-db", w.db, "-name", name, "-key", ssh.FingerprintSHA256(sshPub), "-ssh-agent", agent.sock, "-listen", w.addr}
	w.Start(t)
	t.Cleanup(func() { w.Stop(t) })
	if !strings.Contains(w.logs.String(), w.VKey) {
		t.Fatalf("litewitness's verifier key is not %s:\n%s", w.VKey, w.logs)
	}
	return w
}

// FreeAddr is a loopback address free now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// URL is the witness's.
func (w *LiteWitness) URL() string { return "http://" + w.addr }

// Start starts the witness's process (again, after Stop).
func (w *LiteWitness) Start(t testing.TB) {
	t.Helper()
	w.logs = &LockedBuffer{}
	w.cmd = exec.Command(w.bin, w.args...)
	w.cmd.Stdout, w.cmd.Stderr = w.logs, w.logs
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	WaitUntil(t, "litewitness "+w.Name+" to listen", func() bool {
		c, err := net.Dial("tcp", w.addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// Stop stops the witness's process.
func (w *LiteWitness) Stop(t testing.TB) {
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
