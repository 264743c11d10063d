package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/internal/referencecalls"
	"github.com/decisionledger/ledger/policy"
)

// TestDaemonPolicies runs the real ledgerd with the reference catalog and
// a copy of the reference policies. SIGHUP with a changed set: later
// decisions name the new digest, its publication precedes them, and both
// sets are served. SIGHUP with an invalid set: refused, logged with
// file:line:col, the set in force still decides. SIGHUPs while 8 clients
// decide and append continuously fail no request. A restart keeps the
// archive (every set still served, none lost) and publishes nothing when
// its set is the last published; an invalid set refuses to start (exit 1,
// file:line:col).
func TestDaemonPolicies(t *testing.T) {
	t.Parallel() // a process of its own on its own directory and port
	if testing.Short() {
		t.Skip("builds and runs ledgerd")
	}
	bin := buildLedgerd(t)
	dir := t.TempDir()
	d := startDaemon(t, bin, dir)
	d.cmd.Process.Kill()
	d.cmd.Wait()
	catalogDir, _ := filepath.Abs(apitest.CorpusDir)
	policyDir := apitest.CopyPolicies(t)
	setConfig(t, dir, map[string]any{"catalog_dir": catalogDir, "policy_dir": policyDir})
	tokenBytes, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	token := string(tokenBytes)
	d = startDaemon(t, bin, dir)
	url := "http://" + d.addr
	stop := func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		if err := d.cmd.Wait(); err != nil {
			t.Errorf("ledgerd stopped: %v\n%s", err, d.stderr.String())
		}
	}
	pay := apitest.Payment(t)
	mail := apitest.DecideBody(t, referencecalls.Table()[10]) // allow, email.allow-internal
	status, first, answer := apitest.DecideOn(t, url, token, pay)
	if status != http.StatusCreated || first.Decision != entry.Allow {
		t.Fatalf("decide: %d %s", status, answer)
	}
	setA := first.PolicySet

	// A valid reload.
	os.WriteFile(filepath.Join(policyDir, "freeze.cedar"), []byte(apitest.DenyAllPayments), 0o600)
	d.cmd.Process.Signal(syscall.SIGHUP)
	var second apitest.Decided
	apitest.WaitFor(t, "the reloaded set to decide", func() bool {
		_, second, _ = apitest.DecideOn(t, url, token, pay)
		return second.PolicySet != setA
	})
	setB := second.PolicySet
	if second.Decision != entry.Deny || !slices.Contains(second.Policies, "payments.freeze") {
		t.Errorf("after the reload: %+v, want deny by payments.freeze", second)
	}
	pubs := daemonPublications(t, url)
	if at := pubs[setB]; len(at) != 1 || at[0] <= first.Index || at[0] >= second.Index {
		t.Errorf("set B published at %v, want between entries %d and %d", at, first.Index, second.Index)
	}
	for _, set := range []string{setA, setB} {
		status, b := apitest.GetBody(t, url+"/v1/policies/"+set)
		if status != 200 || policy.DigestOfBundle(b).String() != set {
			t.Errorf("GET /v1/policies/%s: %d", set, status)
		}
	}

	// An invalid reload: a policy cut short: the parser fails at the end, line 4, column 1.
	os.WriteFile(filepath.Join(policyDir, "broken.cedar"), []byte("// broken\n\npermit (principal, action, resource) when {\n"), 0o600)
	d.cmd.Process.Signal(syscall.SIGHUP)
	apitest.WaitFor(t, "the refusal in the log", func() bool { return strings.Contains(d.stderr.String(), "policy reload refused") })
	if line := logLine(d.stderr.String(), "policy reload refused"); !strings.Contains(line, "broken.cedar:4:1") {
		t.Errorf("the refusal does not name broken.cedar:4:1: %s", line)
	}
	if _, still, _ := apitest.DecideOn(t, url, token, pay); still.PolicySet != setB || still.Decision != entry.Deny {
		t.Errorf("after a refused reload: %+v, want set B", still)
	}
	os.Remove(filepath.Join(policyDir, "broken.cedar"))

	// Reloads under load: 8 clients decide and append without pause
	// while the set changes 6 times.
	var failed, done atomic.Int64
	var failures sync.Map
	quit := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-quit:
					return
				default:
				}
				body, path := mail, "/v1/decide"
				if g%2 == 1 {
					body, path = strings.Replace(mail, "{", `{"decision":"allow","policies":["mediator.own"],`, 1), "/v1/entries"
				}
				req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					failed.Add(1)
					failures.Store(err.Error(), true)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					failed.Add(1)
					failures.Store(fmt.Sprint(path, resp.StatusCode), true)
				}
				done.Add(1)
			}
		}()
	}
	// Each reload comes once the clients have done some requests since the
	// last, and the clients go on past the last one.
	served := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); done.Load()+failed.Load() < n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the clients did %d requests in 30 s, want %d", done.Load()+failed.Load(), n)
			}
		}
	}
	for i := range 6 {
		served(done.Load() + failed.Load() + 20)
		if i%2 == 0 {
			os.Remove(filepath.Join(policyDir, "freeze.cedar"))
		} else {
			os.WriteFile(filepath.Join(policyDir, "freeze.cedar"), []byte(apitest.DenyAllPayments), 0o600)
		}
		d.cmd.Process.Signal(syscall.SIGHUP)
	}
	served(max(100, done.Load()+failed.Load()+40))
	close(quit)
	wg.Wait()
	if failed.Load() != 0 || done.Load() < 100 {
		var kinds []string
		failures.Range(func(k, _ any) bool { kinds = append(kinds, k.(string)); return true })
		t.Errorf("under reloads: %d of %d requests failed (%v)", failed.Load(), done.Load(), kinds)
	}
	if n := strings.Count(d.stderr.String(), "policy set reloaded"); n < 2 {
		t.Errorf("%d reloads logged, want several", n)
	}
	checkDaemonLog(t, url)

	// A restart with the set last published publishes nothing, and keeps
	// every archived set.
	var before struct {
		Current  string   `json:"current"`
		Archived []string `json:"archived"`
	}
	apitest.GetJSON(t, url+"/v1/policies", &before)
	stop()
	d = startDaemon(t, bin, dir)
	url = "http://" + d.addr
	var after struct {
		Current  string   `json:"current"`
		Archived []string `json:"archived"`
	}
	apitest.GetJSON(t, url+"/v1/policies", &after)
	if after.Current != before.Current || !slices.Equal(after.Archived, before.Archived) || !slices.Contains(after.Archived, setA) || !slices.Contains(after.Archived, setB) {
		t.Errorf("after a restart: %+v, before %+v", after, before)
	}
	if !strings.Contains(d.stderr.String(), "policy set in force, published before") {
		t.Errorf("the restart published again:\n%s", logLine(d.stderr.String(), "policy set"))
	}
	for _, set := range after.Archived {
		if status, b := apitest.GetBody(t, url+"/v1/policies/"+set); status != 200 || policy.DigestOfBundle(b).String() != set {
			t.Errorf("after a restart, GET /v1/policies/%s: %d", set, status)
		}
	}
	checkDaemonLog(t, url)
	stop()

	// An invalid set refuses to start.
	os.WriteFile(filepath.Join(policyDir, "broken.cedar"), []byte("// broken\n\npermit (principal, action, resource) when {\n"), 0o600)
	out, err := exec.Command(bin, "serve", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "broken.cedar:4:1") {
		t.Errorf("a start with an invalid set: %v, want exit 1 naming broken.cedar:4:1\n%s", err, out)
	}
}

// logLine is the first line of log that contains s.
func logLine(log, s string) string {
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

// daemonPublications reads every entry the daemon at url serves and
// returns the indexes of the publications, by digest.
func daemonPublications(t *testing.T, url string) map[string][]uint64 {
	t.Helper()
	pubs := map[string][]uint64{}
	for _, e := range readAll(t, url) {
		if e.Kind == entry.KindPolicySet {
			pubs[e.PolicySet.String()] = append(pubs[e.PolicySet.String()], e.Index)
		}
	}
	return pubs
}

// readAll reads every entry the daemon at url serves, up to its latest
// checkpoint.
func readAll(t *testing.T, url string) []*entry.Entry {
	t.Helper()
	var list []*entry.Entry
	for i := uint64(0); ; i++ {
		status, b := apitest.GetBody(t, fmt.Sprintf("%s/v1/entries/%d", url, i))
		if status == http.StatusNotFound {
			return list
		}
		e, err := entry.Parse(b)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		list = append(list, e)
	}
}

// checkDaemonLog checks the log the daemon at url serves: every ledger
// decision's set was published by an earlier entry and is served.
func checkDaemonLog(t *testing.T, url string) {
	t.Helper()
	published := map[string]bool{}
	for _, e := range readAll(t, url) {
		switch e.Kind {
		case entry.KindPolicySet:
			if !published[e.PolicySet.String()] {
				status, b := apitest.GetBody(t, url+"/v1/policies/"+e.PolicySet.String())
				if status != 200 || policy.DigestOfBundle(b) != e.PolicySet {
					t.Errorf("published set %s: GET %d", e.PolicySet, status)
				}
			}
			published[e.PolicySet.String()] = true
		case entry.KindDecision:
			if !published[e.PolicySet.String()] {
				t.Fatalf("entry %d decided with %s, not published before it", e.Index, e.PolicySet)
			}
		}
	}
}
