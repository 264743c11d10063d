package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"ledger-declare": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
		// ledger-fixture whatif writes writeWhatifFixture's files in the
		// current directory, from the corpus $LEDGER_CORPUS.
		"ledger-fixture": func() {
			if len(os.Args) != 2 || os.Args[1] != "whatif" {
				fmt.Fprintln(os.Stderr, "usage: ledger-fixture whatif")
				os.Exit(2)
			}
			if err := writeWhatifFixture(".", os.Getenv("LEDGER_CORPUS")); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		},
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
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// setenvfile NAME FILE sets NAME to FILE's first line (a
			// verifier key the fixture wrote).
			"setenvfile": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 2 {
					ts.Fatalf("usage: setenvfile NAME FILE")
				}
				line, _, _ := strings.Cut(ts.ReadFile(args[1]), "\n")
				ts.Setenv(args[0], line)
			},
		},
		Setup: func(env *testscript.Env) error {
			env.Setenv("LEDGER_CORPUS", filepath.Dir(corpus))
			if err := os.CopyFS(filepath.Join(env.WorkDir, "decl"), os.DirFS(corpus)); err != nil {
				return err
			}
			return os.CopyFS(filepath.Join(env.WorkDir, "policies"), os.DirFS(filepath.Join(corpus, "..", "policies")))
		},
	})
}
