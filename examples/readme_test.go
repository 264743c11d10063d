//go:build unix

// Package examples holds runnable examples and, in this test, the check
// that the README's walkthroughs work as written.
package examples

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// marker precedes each shell block of the README that this test runs.
const marker = "<!-- run by examples/readme_test.go -->"

// TestREADMEWalkthrough runs the README's walkthroughs (the shell blocks
// after marker, in order, as one bash script with -euo pipefail) in a copy
// of the checkout, as a newcomer would paste them, against the real
// binaries they build. It checks that every output line the README shows
// ("#    " comments, "…" standing for anything) is printed, in order, and
// that the walkthroughs left the checkout exactly as it was: whatever they
// write, a private signing key first of all, goes outside the tree.
//
// The commands the walkthroughs build and run (go build -o … ./cmd/ledgerd,
// go run ./cmd/ledger-verify, ./examples/workload, …) are built once, all
// in one go build in the checkout itself, before the script starts: in
// the script, go is a shell function for which "go run ./cmd/X ARGS"
// stands for running that binary with ARGS and "go build -o FILE
// ./cmd/X" for copying it to FILE; any other use of go fails the script.
// The build shares its compiled packages with the rest of go test ./...
// (same directory, same flags), where a go run in the copy compiled them
// all a second time; that the commands build from the files a clone has
// is checked instead by comparing the files their packages are built from
// with the files git lists.
//
// It needs bash, curl, sha256sum and git (for the list of files to copy);
// without them, or with -short, it is skipped, and with LEDGER_CI=1 (as
// .ci/run sets) a missing tool fails it. The walkthroughs serve on port
// $LEDGER_ADDR (127.0.0.1:8080 when unset, as a newcomer's would); the
// test always runs them on a free port, with "127.0.0.1:8080" in the
// output it expects changed to that address, so that another ledgerd or
// a parallel run never meets them.
func TestREADMEWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs ledgerd; skipped with -short")
	}
	for _, tool := range []string{"bash", "curl", "sha256sum", "git", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("LEDGER_CI") != "" {
				t.Fatalf("the walkthroughs need %s (LEDGER_CI is set: install it)", tool)
			}
			t.Skipf("the walkthroughs need %s", tool)
		}
	}
	addr := freeAddr(t)

	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	repo := filepath.Join(work, "repo")
	copyCheckout(t, root, repo)
	before := listTree(t, repo)

	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	script, want := walkthroughs(t, string(readme))
	want = onAddress(want, addr)

	pkgs := goCommands(t, script)
	bin := filepath.Join(work, "bin")
	buildCommands(t, root, bin, pkgs)
	checkBuildFiles(t, root, repo, pkgs)

	tmp := filepath.Join(work, "tmp") // mktemp -d makes $D here
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+goFunction(bin, pkgs)+script)
	cmd.Dir = repo
	cmd.Env = append(withoutEnv(os.Environ(), "LEDGER_TOKEN", "LEDGER_URL", "LEDGER_ADDR", "TMPDIR"), "TMPDIR="+tmp, "LEDGER_ADDR="+addr)
	// Its own process group, so that a ledgerd it left running is
	// stopped with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // anything left behind
	}
	if runErr != nil {
		t.Fatalf("the walkthroughs failed: %v\nstdout:\n%s\nstderr:\n%s", runErr, stdout.String(), stderr.String())
	}

	lines := strings.Split(stdout.String(), "\n")
	at := 0
	for _, w := range want {
		re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(w), "…", ".*") + "$")
		found := false
		for ; at < len(lines); at++ {
			if re.MatchString(lines[at]) {
				found, at = true, at+1
				break
			}
		}
		if !found {
			t.Errorf("the README shows %q, which the walkthroughs did not print (in this order)", w)
			at = 0
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}

	after := listTree(t, repo)
	for path := range after {
		if _, ok := before[path]; !ok {
			t.Errorf("the walkthroughs wrote %s into the checkout", path)
		}
	}
	for path, size := range before {
		if got, ok := after[path]; !ok {
			t.Errorf("the walkthroughs removed %s from the checkout", path)
		} else if got != size {
			t.Errorf("the walkthroughs changed %s (%d bytes, now %d)", path, size, got)
		}
	}
}

// goUse is how the walkthroughs use go: to run a command of the
// checkout, or to build one into a file.
var goUse = regexp.MustCompile(`\bgo (?:run|build -o \S+) (\./\S+)`)

// goCommands returns the packages the script runs with go run or builds
// with go build -o, each once, in the order it first names them.
func goCommands(t *testing.T, script string) []string {
	t.Helper()
	var pkgs []string
	names := map[string]string{}
	for _, m := range goUse.FindAllStringSubmatch(script, -1) {
		pkg := m[1]
		name := path.Base(pkg)
		if other, ok := names[name]; ok {
			if other != pkg {
				t.Fatalf("the walkthroughs build %s and %s, which go build names alike (%s)", other, pkg, name)
			}
			continue
		}
		names[name] = pkg
		pkgs = append(pkgs, pkg)
	}
	if len(pkgs) == 0 {
		t.Fatal("the walkthroughs run no command with go run or go build -o")
	}
	return pkgs
}

// buildCommands builds pkgs in root into dir, in one go build.
func buildCommands(t *testing.T, root, dir string, pkgs []string) {
	t.Helper()
	// -buildvcs=false: the binaries say what the copy's did (no
	// revision: the copy is not a git checkout), and the build runs no git.
	args := append([]string{"build", "-buildvcs=false", "-o", dir + string(filepath.Separator)}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// checkBuildFiles fails the test unless every file of the main module
// that pkgs are built from in root (their packages' and their imports'
// source and embedded files, go.mod, go.sum) is in the copy at repo: what
// go build in a clone would lack, a file git ignores, is missing there.
func checkBuildFiles(t *testing.T, root, repo string, pkgs []string) {
	t.Helper()
	const format = `{{if and .Module .Module.Main}}{{$d := .Dir}}` +
		`{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .CgoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}` +
		`{{range .CFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .HFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}` +
		`{{range .SFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .SysoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}` +
		`{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`
	args := append([]string{"list", "-deps", "-f", format}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args[:2], " "), err)
	}
	files := append(strings.Fields(string(out)), filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum"))
	for _, file := range files {
		rel, err := filepath.Rel(root, file)
		if err != nil || !filepath.IsLocal(rel) {
			t.Fatalf("go list names %s, outside the checkout %s", file, root)
		}
		if _, err := os.Stat(filepath.Join(repo, rel)); err != nil {
			t.Errorf("the walkthroughs' commands build from %s, which git does not list: a clone would not build them", rel)
		}
	}
}

// goFunction returns the shell function go of the script: "go run PKG
// ARGS" runs the binary buildCommands built in bin for PKG, "go build -o
// FILE PKG" copies it to FILE; anything else fails.
func goFunction(bin string, pkgs []string) string {
	var run, build strings.Builder
	for _, pkg := range pkgs {
		exe := shellQuote(filepath.Join(bin, path.Base(pkg)))
		fmt.Fprintf(&run, "\t\t%s) shift 2; %s \"$@\"; return ;;\n", shellQuote(pkg), exe)
		fmt.Fprintf(&build, "\t\t%s) cp %s \"$3\"; return ;;\n", shellQuote(pkg), exe)
	}
	return "go() {\n" +
		"\tif [ \"${1-}\" = run ] && [ $# -ge 2 ]; then\n\t\tcase \"$2\" in\n" + run.String() + "\t\tesac\n" +
		"\telif [ \"${1-}\" = build ] && [ $# -eq 4 ] && [ \"$2\" = -o ]; then\n\t\tcase \"$4\" in\n" + build.String() + "\t\tesac\n" +
		"\tfi\n" +
		"\techo \"examples/readme_test.go: go $*: the test built no binary for this use of go\" >&2\n" +
		"\treturn 2\n" +
		"}\n"
}

// shellQuote quotes s for bash.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// readmeAddr is the address the README's ledgerd serves on when
// LEDGER_ADDR is unset, as its output lines show it.
const readmeAddr = "127.0.0.1:8080"

// freeAddr returns a free loopback address: the walkthroughs run there
// (LEDGER_ADDR), never on readmeAddr, which another ledgerd or a
// parallel run may hold.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// onAddress returns the output lines the walkthroughs show, with
// readmeAddr as addr.
func onAddress(want []string, addr string) []string {
	moved := make([]string, len(want))
	for i, w := range want {
		moved[i] = strings.ReplaceAll(w, readmeAddr, addr)
	}
	return moved
}

// walkthroughs returns the README's marked shell blocks as one script, and
// the output lines they show: comment lines starting "#    ", without
// that prefix.
func walkthroughs(t *testing.T, readme string) (script string, want []string) {
	t.Helper()
	var b strings.Builder
	blocks := 0
	sc := bufio.NewScanner(strings.NewReader(readme))
	for sc.Scan() {
		if sc.Text() != marker {
			continue
		}
		if !sc.Scan() || sc.Text() != "```sh" {
			t.Fatalf("README.md: %s is not followed by a ```sh block", marker)
		}
		blocks++
		for sc.Scan() && sc.Text() != "```" {
			line := sc.Text()
			b.WriteString(line + "\n")
			if w, ok := strings.CutPrefix(line, "#    "); ok {
				want = append(want, w)
			}
		}
	}
	if blocks < 5 || len(want) < 10 {
		t.Fatalf("README.md has %d blocks marked %q showing %d output lines; the walkthroughs have at least 5 and 10", blocks, marker, len(want))
	}
	return b.String(), want
}

// copyCheckout copies the files git lists in root (tracked, and untracked
// but not ignored, as they are in the work tree) to dir.
func copyCheckout(t *testing.T, root, dir string) {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): the test copies the files git lists", err)
	}
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		info, err := os.Lstat(src)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the work tree, or not a file
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// listTree returns every file and directory under dir with its size.
func listTree(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	files := map[string]int64{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		size := info.Size()
		if d.IsDir() {
			size = -1
		}
		files[rel] = size
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func withoutEnv(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || name == n
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

// TestWalkthroughsFollowLedgerAddr: the walkthroughs' commands name no
// address of their own: every ledgerd they start listens on $LEDGER_ADDR
// and every URL is $LEDGER_URL's (ledgerctl and the workload read it), so
// that one variable moves them all (the test runs them on a free port).
func TestWalkthroughsFollowLedgerAddr(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	script, _ := walkthroughs(t, string(readme))
	for i, line := range strings.Split(script, "\n") {
		if command, _, _ := strings.Cut(line, "#"); strings.Contains(command, readmeAddr) && !strings.Contains(command, "${LEDGER_ADDR:-"+readmeAddr+"}") {
			t.Errorf("walkthrough line %d names %s itself: %s", i+1, readmeAddr, line)
		}
	}
	n, m := 0, 0
	for _, line := range strings.Split(script, "\n") {
		if strings.HasPrefix(line, `"$D/ledgerd" `) && strings.HasSuffix(strings.TrimSpace(line), "&") { // a server started
			n++
			if strings.HasPrefix(line, `"$D/ledgerd" --listen "$LEDGER_ADDR" `) {
				m++
			}
		}
	}
	if n == 0 || n != m {
		t.Errorf("%d of the %d ledgerd the walkthroughs start listen on $LEDGER_ADDR", m, n)
	}
	if !strings.Contains(script, `export LEDGER_URL="http://$LEDGER_ADDR"`) {
		t.Error("the walkthroughs do not set LEDGER_URL from LEDGER_ADDR")
	}
}

// TestGoFunction: in the walkthroughs' script, go run of a command built
// runs its binary with the arguments as given and its exit status, go
// build -o copies it, and any other use of go fails without running
// anything.
func TestGoFunction(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash")
	}
	bin := filepath.Join(t.TempDir(), "it's bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ledger-verify", "ledgerd"} {
		script := "#!/bin/sh\nprintf '" + name + ":'\nfor a; do printf ' [%s]' \"$a\"; done\necho\nexit 3\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fn := goFunction(bin, []string{"./cmd/ledger-verify", "./cmd/ledgerd"})
	for _, c := range []struct {
		script, stdout string
		status         int
	}{
		{`go run ./cmd/ledger-verify digest 'a b' "$D"`, "ledger-verify: [digest] [a b] [/d]\n", 3},
		{`go run ./cmd/ledgerd`, "ledgerd:\n", 3},
		{`go build -o "$D/x" ./cmd/ledgerd && "$D/x" --data y`, "ledgerd: [--data] [y]\n", 3},
		{`go run ./cmd/ledgerctl get 1`, "", 2},
		{`go run`, "", 2},
		{`go build ./cmd/ledgerd`, "", 2},
		{`go build -o "$D/x" ./cmd/ledger-declare`, "", 2},
		{`go test ./...`, "", 2},
	} {
		d := t.TempDir()
		cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+fn+"D="+shellQuote(d)+"\n"+c.script)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		status := 0
		if exit, ok := err.(*exec.ExitError); ok {
			status = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		got := strings.ReplaceAll(stdout.String(), d, "/d")
		if got != c.stdout || status != c.status {
			t.Errorf("%s: printed %q, exit status %d; want %q, %d (stderr %q)", c.script, got, status, c.stdout, c.status, stderr.String())
		}
		if c.status == 2 && !strings.Contains(stderr.String(), "the test built no binary for this use of go") {
			t.Errorf("%s: stderr %q does not say why it failed", c.script, stderr.String())
		}
	}
}

// TestGoCommands: each package the script runs or builds, once, however
// the line goes on.
func TestGoCommands(t *testing.T) {
	script := `go build -o "$D/ledgerd" ./cmd/ledgerd
"$D/ledgerd" --data "$D/data" &
go run ./cmd/ledger-verify digest f.json
X=$(go run ./cmd/ledgerctl get 1)
go run ./cmd/ledger-verify export --key "$VKEY" \
    "$D/export.ledger"
go run ./examples/workload --decide x > "$D/out" &
`
	got := strings.Join(goCommands(t, script), " ")
	if want := "./cmd/ledgerd ./cmd/ledger-verify ./cmd/ledgerctl ./examples/workload"; got != want {
		t.Errorf("goCommands = %s, want %s", got, want)
	}
}
