package main

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the command-line scripts in testdata/script (txtar).
// ledgerd runs in this process: paths in its arguments must be absolute
// ($WORK/...); the scripts' own commands take paths relative to $WORK.
// Besides testscript's commands:
//
//	ledgerd ARGS...   run ledgerd (! ledgerd: expect it to fail)
//	status N          the last ledgerd's exit status was N
//	mode PERM FILE    FILE's permission bits are PERM (octal)
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"ledgerd": func(ts *testscript.TestScript, neg bool, args []string) {
				code := run(context.Background(), args, ts.Stdout(), ts.Stderr())
				ts.Setenv("LEDGERD_STATUS", strconv.Itoa(code))
				if (code != 0) != neg {
					ts.Fatalf("ledgerd exited %d", code)
				}
			},
			"status": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 || neg {
					ts.Fatalf("usage: status N")
				}
				if got := ts.Getenv("LEDGERD_STATUS"); got != args[0] {
					ts.Fatalf("exit status %s, want %s", got, args[0])
				}
			},
			"mode": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 2 || neg {
					ts.Fatalf("usage: mode PERM FILE")
				}
				want, err := strconv.ParseUint(args[0], 8, 32)
				ts.Check(err)
				st, err := os.Stat(ts.MkAbs(args[1]))
				ts.Check(err)
				if got := st.Mode().Perm(); uint64(got) != want {
					ts.Fatalf("%s has mode %#o, want %#o", args[1], got, want)
				}
			},
		},
	})
}
