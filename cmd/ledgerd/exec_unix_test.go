//go:build unix

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/decisionledger/ledger/internal/pgtest"
)

// The test binary doubles as a wrapper that starts ledgerd with a given
// descriptor limit and umask, which exec.Cmd cannot set: run with
// LEDGERD_TEST_EXEC=<ledgerd binary>, it sets RLIMIT_NOFILE (soft and
// hard, since Go raises the soft limit to the hard one at start) to
// LEDGERD_TEST_NOFILE and the umask to LEDGERD_TEST_UMASK (octal), if set,
// then executes the binary with its own arguments. Both are inherited
// across exec.
func TestMain(m *testing.M) {
	if bin := os.Getenv("LEDGERD_TEST_EXEC"); bin != "" {
		fmt.Fprintf(os.Stderr, "ledgerd wrapper: %v\n", execWrapped(bin))
		os.Exit(3)
	}
	code := pgtest.Run(m) // stops the PostgreSQL server the tests started, if any
	for _, f := range afterTests {
		f()
	}
	os.Exit(code)
}

// afterTests are run by TestMain after the tests: the cleanups of what
// several tests share (clusterLedgerd's binary).
var afterTests []func()

func execWrapped(bin string) error {
	if v := os.Getenv("LEDGERD_TEST_NOFILE"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return err
		}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
			return err
		}
	}
	if v := os.Getenv("LEDGERD_TEST_UMASK"); v != "" {
		mask, err := strconv.ParseUint(v, 8, 32)
		if err != nil {
			return err
		}
		syscall.Umask(int(mask))
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEDGERD_TEST_") {
			env = append(env, kv)
		}
	}
	return syscall.Exec(bin, append([]string{bin}, os.Args[1:]...), env)
}

// startWrapped starts the ledgerd binary bin as startDaemon does, through
// the wrapper, with the environment's LEDGERD_TEST_ settings vars.
func startWrapped(t *testing.T, bin, dir string, vars map[string]string) *process {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"LEDGERD_TEST_EXEC=" + bin}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return startDaemonEnv(t, self, dir, env)
}
