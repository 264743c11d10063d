package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The binaries the process tests run, each built once per test binary run
// (a link costs a second or two of CPU, and some forty tests need one);
// TestMain removes them after the tests. No test writes to a binary it
// was given.
var builds struct {
	mu   sync.Mutex
	dir  string
	bins map[string]*build
}

type build struct {
	once sync.Once
	bin  string
	err  error
}

// built returns the binary of the package at pkg (relative to this
// directory), building it on first use.
func built(t testing.TB, pkg string) string {
	t.Helper()
	builds.mu.Lock()
	if builds.bins == nil {
		builds.bins = map[string]*build{}
	}
	b := builds.bins[pkg]
	if b == nil {
		b = &build{}
		builds.bins[pkg] = b
	}
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "ledgerd-test-bin-")
		if err != nil {
			builds.mu.Unlock()
			t.Fatal(err)
		}
		builds.dir = dir
	}
	dir := builds.dir
	builds.mu.Unlock()
	b.once.Do(func() {
		name := filepath.Base(filepath.Clean(pkg))
		if name == "." {
			name = "ledgerd"
		}
		b.bin = filepath.Join(dir, name)
		if out, err := exec.Command("go", "build", "-o", b.bin, pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

func init() {
	afterTests = append(afterTests, func() {
		if builds.dir != "" {
			os.RemoveAll(builds.dir)
		}
	})
}
