package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/apitest"
)

// TestKeyRotateTrustLines runs the real binaries: "ledgerd key rotate"
// prints the trust file lines auditors add (the old key retired at the
// rotation's tree size, the new key), which as a trust file verify an
// export across the rotation with ledger-verify; and ledgerd started with
// the old key_file and no previous_keys, once the new key signed the
// log's latest checkpoint, names the new key as the one that signs now,
// not as the old one.
func TestKeyRotateTrustLines(t *testing.T) {
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
	appendMany(t, "http://"+d.addr, string(token), 0, 10)
	stopDaemon(t, d)
	origin := strings.SplitN(vkeyA, "+", 2)[0]
	vkeyB, _ := runLedgerd(t, ledgerd, "", "keygen", "--name", origin, "--out", filepath.Join(dir, "b.key"))
	pre, _ := os.ReadFile(config)
	out, _ := runLedgerd(t, ledgerd, "", "key", "rotate", "--new-key", filepath.Join(dir, "b.key"), "--data", data)
	lines := vkeyA + " retired-at 10\n" + vkeyB + "\n"
	if !strings.Contains(out+"\n", "trust file lines for auditors (the old key's line replaces the one they have):\n"+lines) {
		t.Errorf("key rotate prints no trust file lines:\n%s", out)
	}

	// The new key signs entries 10-14 and the checkpoint of size 15.
	d = startDaemon(t, ledgerd, dir)
	url := "http://" + d.addr
	appendMany(t, url, string(token), 10, 5)
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(apitest.Get(t, url+"/v1/checkpoint"), "\n15\n"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint of size 15")
		}
	}
	export := filepath.Join(dir, "all.ledger")
	download(t, url+"/v1/export?start=0&end=15&tree_size=15", export)
	stopDaemon(t, d)
	trust := filepath.Join(dir, "ledger.trust")
	os.WriteFile(trust, []byte("# "+origin+", rotated at tree size 10\n"+lines), 0o644)
	if out, err := exec.Command(ledgerVerify, "export", "--trust", trust, export).CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "verified: entries 0 to 14 (15 entries)") {
		t.Fatalf("ledger-verify export with the printed lines: %v\n%s", err, out)
	}

	// The config of before the rotation: the old key_file, no
	// previous_keys.
	os.WriteFile(config, pre, 0o600)
	cmd := exec.Command(ledgerd, "check", "--data", data)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("ledgerd check with the old key_file succeeded")
	}
	idA, idB := keyIDOf(vkeyA), keyIDOf(vkeyB)
	if strings.Contains(stderr.String(), "the old key's id is "+idB) {
		t.Errorf("the hint names the new key as the old one:\n%s", &stderr)
	}
	want := fmt.Sprintf("ledgerd: hint: the log is signed now by %s, which the config does not name: if the log's key was rotated to it (ledgerd key rotate), configure its private key file as key_file and list the configured key %s in previous_keys", idB, idA)
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("hint, want %q:\n%s", want, &stderr)
	}
}
