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
// reference corpus copied into each script's work directory: the
// declarations in decl, the policies in policies.
func TestScript(t *testing.T) {
	corpus, err := filepath.Abs(filepath.Join("..", "..", "testdata", "declarations"))
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			if err := os.CopyFS(filepath.Join(env.WorkDir, "decl"), os.DirFS(corpus)); err != nil {
				return err
			}
			return os.CopyFS(filepath.Join(env.WorkDir, "policies"), os.DirFS(filepath.Join(corpus, "..", "policies")))
		},
	})
}
