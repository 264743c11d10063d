package main

import (
	"context"
	"encoding/json"
	"errors"
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
	"time"

	"github.com/decisionledger/ledger/internal/apitest"
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
	t.Parallel() // a process of its own on its own directory and port
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
	if code := apitest.GetJSON(t, url+"/readyz", &struct{}{}); code != http.StatusServiceUnavailable {
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

// appenders are goroutines appending to a ledgerd until stopped, or
// until it stops answering; they record what it acknowledged.
type appenders struct {
	mu       sync.Mutex
	acked    map[uint64]string
	statuses map[int]int
	wg       sync.WaitGroup
}

// startAppenders starts clients appenders of body(i) to the ledgerd at
// url, until stop is closed.
func startAppenders(url, token string, clients int, body func(int) string, stop <-chan struct{}) *appenders {
	a := &appenders{acked: map[uint64]string{}, statuses: map[int]int{}}
	for c := range clients {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", url+"/v1/entries", strings.NewReader(body(c*1000000+i)))
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return // ledgerd stopped
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var r struct {
					Index uint64          `json:"index"`
					Entry json.RawMessage `json:"entry"`
				}
				a.mu.Lock()
				a.statuses[resp.StatusCode]++
				if resp.StatusCode == http.StatusCreated && json.Unmarshal(b, &r) == nil {
					a.acked[r.Index] = string(r.Entry)
				}
				a.mu.Unlock()
			}
		}()
	}
	return a
}

func (a *appenders) count(status int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.statuses[status]
}

func (a *appenders) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return fmt.Sprintf("HTTP statuses %v, %d acknowledged", a.statuses, len(a.acked))
}

// fillFileSystem writes path until the file system holding it is full.
func fillFileSystem(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	for _, size := range []int{1 << 20, 4096} {
		buf := make([]byte, size)
		for {
			w, err := f.Write(buf)
			n += int64(w)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				t.Fatalf("filling the file system: %v", err)
			}
		}
	}
	return n
}

// Another program fills the file system while ledgerd appends: ledgerd
// refuses appends and stops on SIGTERM without a crash, saying why (its
// store writes nothing to badger, whose mapped files fault on a full
// disk); once the file is removed, the next start serves every
// acknowledged entry.
func TestDiskFilledByAnother(t *testing.T) {
	t.Parallel() // a process of its own on its own directory and port
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	rootTest(t, "TestDiskFilledByAnother (it mounts a small tmpfs)")
	ledgerd, ledgerVerify := buildBinaries(t)
	// Above the store's reserve (128 MiB), which lets the appends start.
	dir := smallFileSystem(t, 160<<20)
	d := startDaemon(t, ledgerd, dir)
	exited := make(chan error, 1)
	go func() { exited <- d.cmd.Wait() }()
	token, _ := os.ReadFile(filepath.Join(dir, "token"))
	url := "http://" + d.addr

	stop := make(chan struct{})
	load := startAppenders(url, string(token), 4, apitest.AppendBody, stop)
	stopLoad := sync.OnceFunc(func() {
		close(stop)
		load.wg.Wait()
	})
	defer stopLoad()
	refusals := func() int {
		return load.count(http.StatusServiceUnavailable) + load.count(http.StatusInternalServerError)
	}
	waitFor := func(what string, done func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !done(); time.Sleep(time.Millisecond) {
			select {
			case err := <-exited:
				t.Fatalf("ledgerd stopped (%v) before %s:\n%s", err, what, d.stderr)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s in a minute; %v", what, load)
			}
		}
	}
	waitFor("500 appends acknowledged", func() bool { return load.count(http.StatusCreated) >= 500 })
	filler := filepath.Join(dir, "filler")
	filled := fillFileSystem(t, filler)
	before := refusals()
	waitFor("20 appends refused on the full disk", func() bool { return refusals() >= before+20 })
	d.cmd.Process.Signal(syscall.SIGTERM)
	err := <-exited
	stopLoad() // the appenders stop with ledgerd
	if status, ok := d.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && status.Signaled() {
		t.Fatalf("ledgerd was killed by %v on a full disk:\n%s", status.Signal(), d.stderr)
	}
	for _, crash := range []string{"SIGBUS", "fatal error", "panic:"} {
		if strings.Contains(d.stderr.String(), crash) {
			t.Fatalf("ledgerd crashed on a full disk (%v):\n%s", err, d.stderr)
		}
	}
	// It exits 1, saying why.
	if code := d.cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(d.stderr.String(), "ledgerd: error: closing the store: ledger: too little free space") {
		t.Fatalf("ledgerd exited %d on a full disk; want 1 and the reason:\n%s", code, d.stderr)
	}
	logRecord(t, d.stderr, "ledger: the store closed without writing its index: the next open indexes the frame log's entries again")
	// A start on the full disk is refused, saying why.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, ledgerd, "serve", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "ledgerd: error: ledger: too little free space: opening the store") {
		t.Fatalf("ledgerd serve on a full disk: %v; want exit status 1 and the reason:\n%s", err, out)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	again := startDaemon(t, ledgerd, dir)
	url = "http://" + again.addr
	checkServed(t, url, load.acked)
	var size uint64
	for index := range load.acked {
		size = max(size, index+1)
	}
	verified := exportAndVerify(t, ledgerVerify, url, again.vkey, size)
	t.Logf("filled %d bytes; %v; %s", filled, load, verified)
}
