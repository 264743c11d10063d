package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/internal/apitest"
)

// TestDaemonApprovalSnapshot runs the real ledgerd over a log of 5,000
// entries with open approvals in it. A start after a SIGKILL reads every
// entry (no snapshot yet) and writes a snapshot; the next start after
// more appends and another SIGKILL reads the snapshot and only the
// entries after it; a start after SIGTERM (Close writes a snapshot of the
// final size) reads no entry at all. Then a damaged snapshot file is
// ignored with a warning, every entry is read, and the state (each
// approval as GET /v1/approvals/{id} answers it, the counts logged) is
// the one the snapshot gave.
func TestDaemonApprovalSnapshot(t *testing.T) {
	t.Parallel() // a process of its own on its own directory and port
	if testing.Short() {
		t.Skip("builds and runs ledgerd")
	}
	ledgerd, _ := buildBinaries(t)
	dir := t.TempDir()
	d := startDaemon(t, ledgerd, dir)
	d.cmd.Process.Kill()
	d.cmd.Wait()
	hash, err := approver.HashPassword("snapshot approver password")
	if err != nil {
		t.Fatal(err)
	}
	setConfig(t, dir, map[string]any{"approvals": map[string]any{
		"approvers": []map[string]any{{"name": "approver-1", "password_argon2id": hash, "actions": []string{"*"}}},
	}})
	token, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	snapshotFile := filepath.Join(dir, "data", "store", "approvals")
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer hc.CloseIdleConnections()
	post := func(base, body string) []byte {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/v1/entries", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+string(token))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("append: %d %s", resp.StatusCode, b)
		}
		return b
	}
	var ids []string
	var before uint64 // the entries before the first approval: the approval config
	openApproval := func(base string, n int) {
		t.Helper()
		var op apitest.Opened
		if err := json.Unmarshal(post(base, apitest.PayRequest(300_000+n).AppendBody("needs_approval", "")), &op); err != nil || op.Approval.ID == "" {
			t.Fatalf("opening approval %d: %v", n, err)
		}
		if ids = append(ids, op.Approval.ID); len(ids) == 1 {
			before = op.Index
		}
	}
	stop := func(d *process, sig os.Signal) {
		t.Helper()
		d.cmd.Process.Signal(sig)
		d.cmd.Wait()
		hc.CloseIdleConnections()
	}
	// rebuilt is the start's "ledger approval state rebuilt" record.
	rebuilt := func(d *process) map[string]any {
		t.Helper()
		return logRecord(t, d.stderr, "ledger approval state rebuilt")
	}
	want := func(rec map[string]any, entries, snapshotSize uint64, approvals int) {
		t.Helper()
		entries += before
		if snapshotSize > 0 {
			snapshotSize += before
		}
		if rec["entries"] != float64(entries) || rec["snapshot_size"] != float64(snapshotSize) || rec["approvals"] != float64(approvals) {
			t.Fatalf("state rebuilt from entries %v, snapshot_size %v, approvals %v; want %d, %d, %d",
				rec["entries"], rec["snapshot_size"], rec["approvals"], entries, snapshotSize, approvals)
		}
	}
	// approvalsServed is every approval as GET /v1/approvals/{id} answers.
	approvalsServed := func(base string) string {
		t.Helper()
		var all []string
		for _, id := range ids {
			all = append(all, apitest.Get(t, base+"/v1/approvals/"+id))
		}
		return strings.Join(all, "\n")
	}

	d = startDaemon(t, ledgerd, dir)
	base := "http://" + d.addr
	const first = 5000
	for n := range 3 {
		openApproval(base, n)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < first-3; i += 8 {
				post(base, apitest.AppendBody(i))
			}
		})
	}
	wg.Wait()
	stop(d, os.Kill) // Close writes no snapshot

	// No snapshot: every entry is read, and the snapshot of the durable
	// log is written in the background.
	d = startDaemon(t, ledgerd, dir)
	want(rebuilt(d), first, 0, 3)
	apitest.WaitFor(t, "the approval snapshot file", func() bool {
		_, err := os.Stat(snapshotFile)
		return err == nil
	})
	base = "http://" + d.addr
	openApproval(base, 3)
	for i := range 9 {
		post(base, apitest.AppendBody(first+i))
	}
	stop(d, os.Kill)

	// The snapshot at 5,000 and the 10 entries after it.
	d = startDaemon(t, ledgerd, dir)
	want(rebuilt(d), first+10, first, 4)
	stop(d, syscall.SIGTERM)

	// Close wrote the snapshot of the final size: no entry is read.
	d = startDaemon(t, ledgerd, dir)
	want(rebuilt(d), first+10, first+10, 4)
	fromSnapshot := approvalsServed("http://" + d.addr)
	stop(d, os.Kill)

	// A damaged snapshot is not used: a warning, and every entry read to
	// the same state.
	b, err := os.ReadFile(snapshotFile)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(snapshotFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, ledgerd, dir)
	want(rebuilt(d), first+10, 0, 4)
	warn := logRecord(t, d.stderr, "ledger: the approval snapshot is not used; reading every entry")
	if e, _ := warn["error"].(string); !strings.Contains(e, "checksum") {
		t.Errorf("the warning's error %q does not say what was wrong with the snapshot", e)
	}
	if got := approvalsServed("http://" + d.addr); got != fromSnapshot {
		t.Errorf("the approvals served after reading every entry:\n%s\ndiffer from those after the snapshot:\n%s", got, fromSnapshot)
	}
	if len(ids) != 4 || fmt.Sprint(rebuilt(d)["refused_entries"]) != "0" {
		t.Errorf("%d approvals opened, refused entries %v; want 4 and 0", len(ids), rebuilt(d)["refused_entries"])
	}
}
