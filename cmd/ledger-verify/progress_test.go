package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/internal/progress"
	"github.com/decisionledger/ledger/internal/ptytest"
	"github.com/decisionledger/ledger/ledger"
)

// The progress line through the binary (this test binary run as
// ledger-verify, as the scripts run it): drawn on a terminal with
// LEDGER_PROGRESS=now and erased before the summary or the error, never
// on a pipe (stderr byte for byte what it is without progress), never
// with LEDGER_PROGRESS=off.
func TestProgressTerminal(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin", programName)
	if err := os.Mkdir(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, bin); err != nil {
		t.Fatal(err)
	}
	if _, err := fixture(dir, 50, ""); err != nil {
		t.Fatal(err)
	}
	// The same export with entry 30 changed: a failure after 30 entries
	// verified.
	frames := splitFrames(t, must(os.ReadFile(filepath.Join(dir, "export.ledger"))))
	i := entryFrame(frames, 30)
	frames[i].payload = bytes.Replace(frames[i].payload, []byte(`"index":30,`), []byte(`"index":31,`), 1)
	if err := os.WriteFile(filepath.Join(dir, "bad.ledger"), joinFrames(frames), 0o644); err != nil {
		t.Fatal(err)
	}

	// ledger-verify export FILE with stderr on a pipe or, if pty is not
	// nil, on its terminal.
	verify := func(t *testing.T, progress, file string, pty *ptytest.PTY) (code int, stdout, stderr string) {
		t.Helper()
		cmd := exec.Command(bin, "export", "--key-file", "ledger.vkey", file)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LEDGER_PROGRESS="+progress, "TERM=xterm")
		var out, errOut bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &errOut
		if pty != nil {
			cmd.Stderr = pty.Terminal
		}
		err := cmd.Run()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatal(err)
		}
		stderr = errOut.String()
		if pty != nil {
			stderr = string(pty.Output())
		}
		return cmd.ProcessState.ExitCode(), out.String(), stderr
	}

	// On a pipe, whatever LEDGER_PROGRESS says: stderr as without progress.
	_, okOut, okErr := verify(t, "off", "export.ledger", nil)
	_, badOut, badErr := verify(t, "off", "bad.ledger", nil)
	if !strings.HasPrefix(okOut, "verified: entries 0 to 49 (50 entries)") || okErr != "" {
		t.Fatalf("the export does not verify: stdout %q, stderr %q", okOut, okErr)
	}
	if !strings.HasPrefix(badErr, "ledger-verify: error: ") || !strings.Contains(badErr, "entry 30") {
		t.Fatalf("the changed export: stdout %q, stderr %q; want its error about entry 30", badOut, badErr)
	}
	for _, mode := range []string{"now", "auto", ""} {
		if code, out, errOut := verify(t, mode, "export.ledger", nil); code != 0 || out != okOut || errOut != okErr {
			t.Errorf("LEDGER_PROGRESS=%q, stderr a pipe: exit %d, stdout %q, stderr %q; want exit 0, %q, %q", mode, code, out, errOut, okOut, okErr)
		}
		if code, out, errOut := verify(t, mode, "bad.ledger", nil); code != 1 || out != badOut || errOut != badErr {
			t.Errorf("LEDGER_PROGRESS=%q, stderr a pipe, a failure: exit %d, stdout %q, stderr %q; want exit 1, %q, %q", mode, code, out, errOut, badOut, badErr)
		}
	}

	t.Run("now", func(t *testing.T) {
		code, out, term := verify(t, "now", "export.ledger", ptytest.Open(t))
		if code != 0 || out != okOut {
			t.Fatalf("exit %d, stdout %q; want 0, %q", code, out, okOut)
		}
		// The line at the first entry, redrawn in place at most four
		// times a second, and erased.
		if !regexp.MustCompile(`^\rledger-verify: export: 1 of 50 entries \(2%\)\x1b\[K(\rledger-verify: export: \d+ of 50 entries \(\d+%\)[^\r]*\x1b\[K)*\r\x1b\[K$`).MatchString(term) {
			t.Fatalf("on the terminal: %q; want the progress line, then erased", term)
		}
	})
	t.Run("now-failure", func(t *testing.T) {
		code, out, term := verify(t, "now", "bad.ledger", ptytest.Open(t))
		if code != 1 || out != badOut {
			t.Fatalf("exit %d, stdout %q; want 1, %q", code, out, badOut)
		}
		// The terminal turns "\n" into "\r\n".
		want := "\r\x1b[K" + strings.ReplaceAll(badErr, "\n", "\r\n")
		if !strings.HasPrefix(term, "\rledger-verify: export: 1 of 50 entries (2%)\x1b[K") || !strings.HasSuffix(term, want) {
			t.Fatalf("on the terminal: %q; want the progress line, erased, then %q", term, want)
		}
	})
	t.Run("off", func(t *testing.T) {
		if code, out, term := verify(t, "off", "export.ledger", ptytest.Open(t)); code != 0 || out != okOut || term != "" {
			t.Fatalf("LEDGER_PROGRESS=off on a terminal: exit %d, stdout %q, terminal %q; want 0, %q and nothing", code, out, term, okOut)
		}
	})
}

// monitor --init draws the progress of the new entries it verifies on a
// terminal, and erases it; on a pipe, nothing.
func TestMonitorProgress(t *testing.T) {
	skey, vkey, err := ledger.GenerateKey("ledger.example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	tl := newTileLog(t, skey)
	tl.add(t, "a", 300)
	t.Setenv(progress.Env, "now")
	t.Setenv("TERM", "xterm")
	dir := t.TempDir()
	pty := ptytest.Open(t)
	var stdout bytes.Buffer
	args := []string{"monitor", "--init", "--key", vkey, "--state", filepath.Join(dir, "state"), tl.srv.URL}
	code := run(args, nil, &stdout, pty.Terminal)
	term := string(pty.Output())
	if code != exitOK || !strings.Contains(stdout.String(), "verified: entries 0 to 299 (300 new)") {
		t.Fatalf("monitor --init: exit %d, stdout %q, terminal %q", code, stdout.String(), term)
	}
	if !regexp.MustCompile(`^\rledger-verify: monitor: 1 of 300 entries \(0%\)\x1b\[K(\r[^\r]*\x1b\[K)*\r\x1b\[K$`).MatchString(term) {
		t.Fatalf("on the terminal: %q; want the progress line of 300 entries, then erased", term)
	}
	tl.add(t, "a", 10)
	var stderr bytes.Buffer
	stdout.Reset()
	if code := run(append([]string{"monitor", "--key", vkey, "--state", filepath.Join(dir, "state")}, tl.srv.URL), nil, &stdout, &stderr); code != exitOK || stderr.Len() != 0 {
		t.Fatalf("monitor, stderr not a terminal: exit %d, stderr %q; want 0 and nothing", code, stderr.String())
	}
}
