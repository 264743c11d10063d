package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/internal/progress"
	"github.com/decisionledger/ledger/internal/ptytest"
)

// policy whatif with stderr a terminal (LEDGER_PROGRESS=now) draws the
// verification's progress and erases it before the report (the script
// policy-whatif.txtar holds a pipe to no progress line).
func TestWhatifProgress(t *testing.T) {
	corpus, err := filepath.Abs(filepath.Join("..", "..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := writeWhatifFixture(dir, corpus); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ledger.vkey"))
	if err != nil {
		t.Fatal(err)
	}
	vkey, _, _ := strings.Cut(string(b), "\n")
	t.Setenv(progress.Env, "now")
	t.Setenv("TERM", "xterm")
	pty := ptytest.Open(t)
	var stdout bytes.Buffer
	code := run([]string{"policy", "whatif", "--key", vkey, "--policies", filepath.Join(corpus, "policies"), filepath.Join(dir, "export.ledger")}, &stdout, pty.Terminal)
	term := string(pty.Output())
	if code != 0 || !strings.HasPrefix(stdout.String(), "whatif: entries 0 to 47 ") {
		t.Fatalf("policy whatif: exit %d, stdout %q, terminal %q", code, stdout.String(), term)
	}
	if !regexp.MustCompile(`^\rledger-declare: policy whatif: 1 of 48 entries \(2%\)\x1b\[K(\r[^\r]*\x1b\[K)*\r\x1b\[K$`).MatchString(term) {
		t.Fatalf("on the terminal: %q; want the progress line of 48 entries, then erased", term)
	}
}
