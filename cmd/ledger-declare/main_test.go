package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"ledger-declare": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScript runs the CLI scripts in testdata/script (txtar), with the
// reference corpus copied into each script's work directory.
func TestScript(t *testing.T) {
	corpus, err := filepath.Abs(filepath.Join("..", "..", "testdata", "declarations"))
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			return os.CopyFS(filepath.Join(env.WorkDir, "decl"), os.DirFS(corpus))
		},
	})
}
