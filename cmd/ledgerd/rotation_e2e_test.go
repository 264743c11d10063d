package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/apitest"
)

// TestDaemonKeyRotationDrill is the rotation drill of docs/operations.md
// with the real binaries: 1,000 entries under key A, ledgerd stopped,
// "ledgerd key rotate" to key B, 1,000 entries under B, a restart; then an
// export across the rotation verifies with ledger-verify given both keys
// (repeated --key, or a trust file), and fails with one key naming the
// other's id. A store opened with B but without A listed fails saying to
// list the previous key, not that the store is corrupt; a new key with
// another name is refused; a key with a changed byte is refused.
func TestDaemonKeyRotationDrill(t *testing.T) {
	t.Parallel() // a process of its own on its own directory and port
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	ledgerd, ledgerVerify := buildBinaries(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	config := filepath.Join(data, configName)

	d := startDaemon(t, ledgerd, dir)
	vkeyA := d.vkey
	token, _ := os.ReadFile(filepath.Join(dir, "token"))
	appendMany(t, "http://"+d.addr, string(token), 0, 1000)
	stopDaemon(t, d)

	origin := strings.SplitN(vkeyA, "+", 2)[0]
	run := func(wantOK bool, bin string, args ...string) (stdout, stderr string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		if (err == nil) != wantOK {
			t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), strings.Join(args, " "), err, o.String(), e.String())
		}
		return o.String(), e.String()
	}
	// A new key with another name cannot follow A.
	run(true, ledgerd, "keygen", "--name", "ledger.example.org/other", "--out", filepath.Join(dir, "other.key"))
	_, stderr := run(false, ledgerd, "key", "rotate", "--new-key", filepath.Join(dir, "other.key"), "--data", data)
	if !strings.Contains(stderr, "must have the log's name, "+origin) {
		t.Errorf("rotation to a key of another name:\n%s", stderr)
	}
	// The rotation.
	out, _ := run(true, ledgerd, "keygen", "--name", origin, "--out", filepath.Join(dir, "b.key"))
	vkeyB := strings.TrimSpace(out)
	pre, _ := os.ReadFile(config)
	out, stderr = run(true, ledgerd, "key", "rotate", "--new-key", filepath.Join(dir, "b.key"), "--data", data)
	if !strings.Contains(out, fmt.Sprintf("rotated the key of %s at tree size 1000", origin)) || !strings.Contains(out, "new key: "+vkeyB) ||
		!strings.Contains(stderr, "destroy the old private key") {
		t.Errorf("key rotate:\n%s\n%s", out, stderr)
	}
	var cfg struct {
		KeyFile      string   `json:"key_file"`
		PreviousKeys []string `json:"previous_keys"`
	}
	after, _ := os.ReadFile(config)
	if err := json.Unmarshal(after, &cfg); err != nil || cfg.KeyFile != filepath.Join(dir, "b.key") || len(cfg.PreviousKeys) != 1 || cfg.PreviousKeys[0] != vkeyA {
		t.Errorf("config after the rotation: %+v, %v\n%s", cfg, err, after)
	}
	// Run again, it changes nothing.
	run(true, ledgerd, "key", "rotate", "--new-key", filepath.Join(dir, "b.key"), "--data", data)
	if again, _ := os.ReadFile(config); string(again) != string(after) {
		t.Errorf("a second rotate changed the config:\n%s", again)
	}
	// Interrupted before the config changed: the old key is refused (it
	// must never sign again), and the command run again completes the
	// config.
	os.WriteFile(config, pre, 0o600)
	if _, stderr := run(false, ledgerd, "check", "--data", data); !strings.Contains(stderr, "was rotated out") {
		t.Errorf("the old key after the rotation:\n%s", stderr)
	}
	run(true, ledgerd, "key", "rotate", "--new-key", filepath.Join(dir, "b.key"), "--data", data)
	if again, _ := os.ReadFile(config); string(again) != string(after) {
		t.Errorf("the rotation run again made another config:\n%s", again)
	}

	d = startDaemon(t, ledgerd, dir)
	if d.vkey != vkeyB {
		t.Fatalf("ledgerd serves with %s after the rotation, want %s", d.vkey, vkeyB)
	}
	appendMany(t, "http://"+d.addr, string(token), 1000, 1000)
	stopDaemon(t, d)
	d = startDaemon(t, ledgerd, dir) // the restart
	url := "http://" + d.addr
	export := filepath.Join(dir, "all.ledger")
	download(t, url+"/v1/export?start=0&end=2000", export)
	entry := func(i int) string { return apitest.Get(t, fmt.Sprintf("%s/v1/entries/%d", url, i)) }
	idA, idB := keyIDOf(vkeyA), keyIDOf(vkeyB)
	if !strings.Contains(entry(999), `"key_id":"`+idA+`"`) || !strings.Contains(entry(1000), `"key_id":"`+idB+`"`) {
		t.Errorf("entries 999 and 1000 carry the wrong keys:\n%s\n%s", entry(999), entry(1000))
	}
	// The rotation checkpoint, served for its tree size, opens with each
	// key alone: signed by both (docs/operations.md, what auditors do).
	rotation := filepath.Join(dir, "rotation.checkpoint")
	download(t, url+"/v1/checkpoints/1000", rotation)
	stopDaemon(t, d)
	for _, vkey := range []string{vkeyA, vkeyB} {
		run(true, ledgerVerify, "consistency", "--key", vkey, rotation, rotation)
	}

	// Both keys: verified.
	out, _ = run(true, ledgerVerify, "export", "--key", vkeyA, "--key", vkeyB, export)
	if !strings.Contains(out, "verified: entries 0 to 1999 (2000 entries)") {
		t.Errorf("with both keys:\n%s", out)
	}
	trust := filepath.Join(dir, "trust.txt")
	os.WriteFile(trust, []byte("# "+origin+"\n"+vkeyA+"\n\n# rotated at tree size 1000\n"+vkeyB+"\n"), 0o644)
	run(true, ledgerVerify, "export", "--trust", trust, export)
	// Only B: entry 0 names A's id.
	_, stderr = run(false, ledgerVerify, "export", "--key", vkeyB, export)
	if !strings.Contains(stderr, "ledger-verify: error: entry 0: key: signed by key "+idA+", which is not trusted") ||
		!strings.Contains(stderr, "hint: add the verifier key of "+idA+" with --key or --trust") {
		t.Errorf("with only the new key:\n%s", stderr)
	}
	// Only A: the checkpoint, signed by B since the rotation, names B's id.
	_, stderr = run(false, ledgerVerify, "export", "--key", vkeyA, export)
	if !strings.Contains(stderr, "not signed by the trusted key "+idA+" but by "+idB) {
		t.Errorf("with only the old key:\n%s", stderr)
	}
	// A's key with one byte changed: refused, in a trust file too.
	swapped := vkeyA[:len(vkeyA)-3] + string(vkeyA[len(vkeyA)-3]^1) + vkeyA[len(vkeyA)-2:]
	run(false, ledgerVerify, "export", "--key", swapped, "--key", vkeyB, export)
	os.WriteFile(trust, []byte(swapped+"\n"+vkeyB+"\n"), 0o644)
	if _, stderr = run(false, ledgerVerify, "export", "--trust", trust, export); !strings.Contains(stderr, "line 1: ") {
		t.Errorf("trust file with a changed byte:\n%s", stderr)
	}

	// ledgerd check passes with the rotated config.
	run(true, ledgerd, "check", "--data", data)
	// Without the previous key listed, ledgerd refuses to start, saying
	// to list it.
	var m map[string]json.RawMessage
	json.Unmarshal(after, &m)
	delete(m, "previous_keys")
	b, _ := json.Marshal(m)
	os.WriteFile(config, b, 0o600)
	for _, args := range [][]string{{"serve", "--data", data, "--listen", "127.0.0.1:0"}, {"check", "--data", data}} {
		_, stderr = run(false, ledgerd, args...)
		if !strings.Contains(stderr, "list the old verifier key as a previous key") || !strings.Contains(stderr, idA) || strings.Contains(stderr, "corrupt") {
			t.Errorf("ledgerd %s without previous_keys:\n%s", args[0], stderr)
		}
	}
}

// appendMany appends n entries, from index base, with 16 clients.
func appendMany(t *testing.T, url, token string, base, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				req, _ := http.NewRequest("POST", url+"/v1/entries", strings.NewReader(apitest.AppendBody(base+i)))
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					errs <- fmt.Errorf("append %d: HTTP %d", base+i, resp.StatusCode)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// stopDaemon stops ledgerd as an operator does (SIGTERM) and waits.
func stopDaemon(t *testing.T, d *process) {
	t.Helper()
	d.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		t.Fatalf("ledgerd did not stop\n%s", d.stderr)
	}
}

func download(t *testing.T, url, path string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: HTTP %d: %s", url, resp.StatusCode, b)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		t.Fatal(err)
	}
}

// keyIDOf is a verifier key's "<name>+<hash>".
func keyIDOf(vkey string) string {
	parts := strings.SplitN(vkey, "+", 3)
	return parts[0] + "+" + parts[1]
}
