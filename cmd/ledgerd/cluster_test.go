package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/storage/postgres"
)

// ledgerd check on PostgreSQL takes the lease: refused while an instance
// sequences, and checks the log when none does. The lease lasts 5 s, not
// the shortest TTL: nothing here waits for one to expire (a stopped
// instance and a finished command release it), and with 300 ms a loaded
// machine once delayed a renewal past it between /readyz and an append,
// which then found no sequencer.
func TestClusterCheck(t *testing.T) {
	f := apitest.NewClusterFixture(t)
	path := f.Config(t, "a", "5s")
	a := startServing(t, "--config", path)
	// serve names the instance, the database (its password redacted)
	// and the URL the others reach it at.
	if line, _ := a.line("ledgerd: instance "); line != "a of the instances on "+postgres.RedactURL(f.DB)+", reached by them at "+a.url {
		t.Errorf("serve's instance line: %q in %q", line, a.stdout)
	}
	apitest.WaitFor(t, "a to sequence", func() bool { code, _ := apitest.Readyz(t, a.url+"/readyz?role=sequencer"); return code == 200 })
	for i := range 3 {
		if status, _, body := f.Post(t, a.url, i, nil); status != http.StatusCreated {
			t.Fatalf("append: %d %s", status, body)
		}
	}
	// fsck --online reads the store beside the sequencer, without the
	// lease, up to the latest checkpoint.
	var stdout, stderr strings.Builder
	if code := run(t.Context(), []string{"fsck", "--online", "--config", path}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "checked online up to the signed checkpoint for") || !strings.Contains(stdout.String(), "no damage found") ||
		strings.Contains(stdout.String()+stderr.String(), apitest.DBPassword) {
		t.Errorf("fsck --online beside a sequencer: exit %d, %s %s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run(t.Context(), []string{"check", "--config", path}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), `instance "a"`) || !strings.Contains(stderr.String(), "stop every ledgerd instance") {
		t.Errorf("check beside a sequencer: exit %d, %s", code, stderr.String())
	}
	a.stop()
	stdout.Reset()
	stderr.Reset()
	if code := run(t.Context(), []string{"check", "--config", path}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "holds 3 entries") {
		t.Errorf("check: exit %d, %s %s", code, stdout.String(), stderr.String())
	}
	if strings.Contains(stdout.String()+stderr.String(), apitest.DBPassword) {
		t.Errorf("check printed the database's password")
	}
	// Nor does serve, in its lines and its log.
	if out := strings.Join(a.stdout, "\n") + a.stderr.String(); strings.Contains(out, apitest.DBPassword) {
		t.Errorf("the output shows the database's password:\n%s", out)
	}

	// The key rotates under the lease too, and the rotated log serves.
	newKey := filepath.Join(f.Dir, "new.key")
	if _, err := writeKey(newKey, localOrigin); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	if code := run(t.Context(), []string{"key", "rotate", "--new-key", newKey, "--config", path}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "rotated the key of "+localOrigin+" at tree size 3") {
		t.Fatalf("key rotate: exit %d, %s %s", code, stdout.String(), stderr.String())
	}
	b := startServing(t, "--config", path)
	apitest.WaitFor(t, "the rotated log to sequence", func() bool { code, _ := apitest.Readyz(t, b.url+"/readyz?role=sequencer"); return code == 200 })
	if status, _, body := f.Post(t, b.url, 4, nil); status != http.StatusCreated || !strings.Contains(body, `"index":3`) {
		t.Errorf("append after the rotation: %d %s", status, body)
	}
}
