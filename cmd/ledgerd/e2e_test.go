package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// process is a running ledgerd binary.
type process struct {
	cmd    *exec.Cmd
	addr   string
	vkey   string
	stderr *apitest.LockedBuffer
}

func buildBinaries(t *testing.T) (ledgerd, ledgerVerify string) {
	t.Helper()
	return built(t, "."), built(t, "../ledger-verify")
}

// startDaemon runs ledgerd on a free loopback port with the default data
// directory in dir, and returns once it serves.
func startDaemon(t *testing.T, bin, dir string) *process {
	t.Helper()
	return startDaemonEnv(t, bin, dir, nil)
}

// startDaemonEnv is startDaemon with env (KEY=value) added to the
// process's environment (never this one's: tests run in parallel).
func startDaemonEnv(t *testing.T, bin, dir string, env []string) *process {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0")
	cmd.Env = append(append(os.Environ(), "GOMEMLIMIT=160MiB"), env...)
	stdout, _ := cmd.StdoutPipe()
	d := &process{cmd: cmd, stderr: &apitest.LockedBuffer{}}
	cmd.Stderr = d.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Never left running: a test that stopped it itself has waited.
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	sc := bufio.NewScanner(stdout)
	deadline := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "mediator \"local\" token (shown once, stored only as a hash): "); ok {
			os.WriteFile(filepath.Join(dir, "token"), []byte(rest), 0o600)
		}
		if _, addr, ok := strings.Cut(line, " on http://"); ok && strings.HasPrefix(line, "ledgerd: serving") {
			d.addr = addr
		}
		if rest, ok := strings.CutPrefix(line, "verifier key: "); ok {
			d.vkey = rest
			break
		}
	}
	go io.Copy(io.Discard, stdout)
	if d.addr == "" || d.vkey == "" {
		t.Fatal("ledgerd did not start")
	}
	return d
}

// TestDaemonKill9 runs the real binaries: concurrent clients append over
// HTTP while ledgerd is killed with SIGKILL and restarted (4 times, 10 with
// LEDGER_SOAK=1: soakRounds); every
// acknowledged entry must be served unchanged afterwards, every checkpoint
// served before must be consistent with the one after, and at the end an
// export of all entries (over 1,000) verifies with ledger-verify.
func TestDaemonKill9(t *testing.T) {
	t.Parallel() // a process of its own on its own directory and port
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	ledgerd, ledgerVerify := buildBinaries(t)
	dir := t.TempDir()
	acked := map[uint64]string{} // index -> entry JSON
	var checkpoints [][]byte
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	var vkey string

	kills := soakRounds(t, 4, 10)
	for cycle := range kills {
		d := startDaemon(t, ledgerd, dir)
		vkey = d.vkey
		token, _ := os.ReadFile(filepath.Join(dir, "token"))
		url := "http://" + d.addr
		// Every earlier checkpoint is consistent with the current tree.
		if len(checkpoints) > 0 {
			checkConsistentAfterRestart(t, url, d.vkey, checkpoints)
		}
		for index, want := range acked {
			got := apitest.Get(t, fmt.Sprintf("%s/v1/entries/%d", url, index))
			if got != want {
				t.Fatalf("cycle %d: acknowledged entry %d lost or changed", cycle, index)
			}
		}
		ackedBefore := len(acked)
		stop := make(chan struct{})
		var mu sync.Mutex
		var wg sync.WaitGroup
		for c := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					req, _ := http.NewRequest("POST", url+"/v1/entries", strings.NewReader(apitest.AppendBody(cycle*100000+c*1000+i)))
					req.Header.Set("Authorization", "Bearer "+string(token))
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						return // killed
					}
					var r struct {
						Index uint64          `json:"index"`
						Entry json.RawMessage `json:"entry"`
					}
					err = json.NewDecoder(resp.Body).Decode(&r)
					resp.Body.Close()
					if resp.StatusCode == http.StatusCreated && err == nil {
						mu.Lock()
						acked[r.Index] = string(r.Entry)
						mu.Unlock()
					}
				}
			}()
		}
		// At least 250 acknowledged in each cycle (so that the final log
		// holds over 1,000 however slow the machine), then a random moment.
		deadline := time.Now().Add(60 * time.Second)
		for {
			mu.Lock()
			n := len(acked) - ackedBefore
			mu.Unlock()
			if n >= 250 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cycle %d: %d appends acknowledged in 60 s", cycle, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(900)) * time.Millisecond) // a random moment, not a wait for a condition
		if cp := apitest.Get(t, url+"/v1/checkpoint"); cp != "" {
			checkpoints = append(checkpoints, []byte(cp))
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		d.cmd.Process.Kill() // SIGKILL
		d.cmd.Wait()
		close(stop)
		wg.Wait()
	}

	// Final start: export everything and verify it with the auditor's tool.
	d := startDaemon(t, ledgerd, dir)
	defer func() { d.cmd.Process.Kill(); d.cmd.Wait() }()
	url := "http://" + d.addr
	checkConsistentAfterRestart(t, url, d.vkey, checkpoints)
	// The next checkpoint covers every acknowledged entry.
	var top uint64
	for index := range acked {
		top = max(top, index+1)
	}
	v, _ := note.NewVerifier(vkey)
	var latest log.Checkpoint
	apitest.WaitFor(t, "a checkpoint of every acknowledged entry", func() bool {
		cp, _, _, err := log.ParseCheckpoint([]byte(apitest.Get(t, url+"/v1/checkpoint")), strings.SplitN(vkey, "+", 2)[0], v)
		if err != nil {
			t.Fatal(err)
		}
		latest = *cp
		return latest.Size >= top
	})
	if latest.Size < 1000 || uint64(len(acked)) > latest.Size {
		t.Fatalf("%d acknowledged, tree size %d: want at least 1,000 entries", len(acked), latest.Size)
	}
	out := exportAndVerify(t, ledgerVerify, url, vkey, latest.Size)
	t.Logf("%d kills; %d entries acknowledged; %s", kills, len(acked), out)
}

// checkServed checks that the ledgerd at url serves every acknowledged
// entry (index to entry JSON) unchanged.
func checkServed(t *testing.T, url string, acked map[uint64]string) {
	t.Helper()
	for index, want := range acked {
		if got := apitest.Get(t, fmt.Sprintf("%s/v1/entries/%d", url, index)); got != want {
			t.Fatalf("acknowledged entry %d lost or changed", index)
		}
	}
}

// exportAndVerify downloads the export of entries [0, end) from the
// ledgerd at url and verifies it with the real ledger-verify, trusting
// only vkey; it returns ledger-verify's first line.
func exportAndVerify(t *testing.T, ledgerVerify, url, vkey string, end uint64) string {
	t.Helper()
	export := filepath.Join(t.TempDir(), "all.ledger")
	resp, err := http.Get(fmt.Sprintf("%s/v1/export?start=0&end=%d", url, end))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	f, err := os.Create(export)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(ledgerVerify, "export", "--key", vkey, export).CombinedOutput()
	if err != nil {
		t.Fatalf("ledger-verify: %v\n%s", err, out)
	}
	return strings.SplitN(string(out), "\n", 2)[0]
}

func checkConsistentAfterRestart(t *testing.T, url, vkey string, checkpoints [][]byte) {
	t.Helper()
	origin := strings.SplitN(vkey, "+", 2)[0]
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	current, _, _, err := log.ParseCheckpoint([]byte(apitest.Get(t, url+"/v1/checkpoint")), origin, v)
	if err != nil {
		t.Fatalf("current checkpoint: %v", err)
	}
	for _, signed := range checkpoints {
		old, _, _, err := log.ParseCheckpoint(signed, origin, v)
		if err != nil {
			t.Fatal(err)
		}
		var p apitest.Proof
		if code := apitest.GetJSON(t, fmt.Sprintf("%s/v1/consistency?size1=%d&tree_size=%d", url, old.Size, current.Size), &p); code != 200 {
			t.Fatalf("consistency %d -> %d: HTTP %d", old.Size, current.Size, code)
		}
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, old.Size, current.Size, p.Hashes, old.Hash, current.Hash); err != nil {
			t.Fatalf("checkpoint of size %d served before a kill is not consistent with size %d after: %v", old.Size, current.Size, err)
		}
	}
}
