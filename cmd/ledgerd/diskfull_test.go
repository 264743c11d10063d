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
	"syscall"
	"testing"
)

// rootTest skips a test that needs root (to mount a file system) when the
// tests do not run as root, unless LEDGER_TEST_ROOT_REQUIRED is set, as
// .ci/run sets it: there the skip would hide a missing check, so it fails.
func rootTest(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("LEDGER_TEST_ROOT_REQUIRED") != "" {
		t.Fatalf("%s needs root, and LEDGER_TEST_ROOT_REQUIRED is set", why)
	}
	t.Skipf("%s needs root; run the tests as root (bash .ci/run does) to run it", why)
}

// smallFileSystem mounts a tmpfs of size bytes on a new directory and
// unmounts it when the test ends.
func smallFileSystem(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mounting a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("unmounting the tmpfs: %v: %s", err, out)
		}
	})
	return dir
}

// On a file system that fills up, ledgerd stops appending (503) before
// the disk is full, stops on SIGTERM without a crash (badger's mapped
// files kill a process that writes into them on a full disk), and serves
// every acknowledged entry again at the next start.
func TestDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	rootTest(t, "TestDiskFull (it mounts a small tmpfs)")
	ledgerd, ledgerVerify := buildBinaries(t)
	dir := smallFileSystem(t, 256<<20)
	d := startDaemon(t, ledgerd, dir)
	defer func() { d.cmd.Process.Kill(); d.cmd.Wait() }()
	token, _ := os.ReadFile(filepath.Join(dir, "token"))
	url := "http://" + d.addr

	var mu sync.Mutex
	acked := map[uint64]string{}
	statuses := map[int]int{}
	var wg sync.WaitGroup
	refused := make(chan struct{})
	var once sync.Once
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20000; i++ {
				select {
				case <-refused:
					return
				default:
				}
				req, _ := http.NewRequest("POST", url+"/v1/entries", strings.NewReader(bigAppendBody(c*100000+i)))
				req.Header.Set("Authorization", "Bearer "+string(token))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var r struct {
					Index uint64          `json:"index"`
					Entry json.RawMessage `json:"entry"`
				}
				mu.Lock()
				statuses[resp.StatusCode]++
				if resp.StatusCode == http.StatusCreated && json.Unmarshal(body, &r) == nil {
					acked[r.Index] = string(r.Entry)
				}
				mu.Unlock()
				if resp.StatusCode == http.StatusServiceUnavailable {
					once.Do(func() { close(refused) })
				}
			}
		}()
	}
	wg.Wait()
	if statuses[http.StatusServiceUnavailable] == 0 || len(statuses) != 2 || len(acked) == 0 {
		t.Fatalf("HTTP statuses %v, %d acknowledged; want 201s, then 503 once the reserve is reached", statuses, len(acked))
	}
	if code := getJSON(t, url+"/readyz", &struct{}{}); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz after the store refused = %d, want 503", code)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	err := d.cmd.Wait()
	if status, ok := d.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && status.Signaled() {
		t.Fatalf("ledgerd was killed by %v on a full disk:\n%s", status.Signal(), d.stderr)
	}
	for _, crash := range []string{"SIGBUS", "fatal error", "panic:"} {
		if strings.Contains(d.stderr.String(), crash) {
			t.Fatalf("ledgerd crashed on a full disk (%v):\n%s", err, d.stderr)
		}
	}

	again := startDaemon(t, ledgerd, dir)
	defer func() { again.cmd.Process.Kill(); again.cmd.Wait() }()
	url = "http://" + again.addr
	checkServed(t, url, acked)
	var size uint64
	for index := range acked {
		size = max(size, index+1)
	}
	out := exportAndVerify(t, ledgerVerify, url, again.vkey, size)
	t.Logf("statuses %v; %s", statuses, out)
}
