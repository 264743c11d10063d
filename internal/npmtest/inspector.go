package npmtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// inspectorTimeout bounds one inspector-cli call (about 1 s).
const inspectorTimeout = 2 * time.Minute

// Inspector runs inspector-cli's non-interactive mode with args and
// returns what it printed on standard output: the JSON result of the
// one method it called. args are inspector-cli's own: the target first,
// a command and its arguments (stdio) or an http:// URL, then the
// method, for example
//
//	npmtest.Inspector(t, npmtest.Node(t), npmtest.Bin(t, "mcp-server-filesystem"), dir,
//		"--method", "tools/call", "--tool-name", "write_file",
//		"--tool-arg", "path="+file, "content=hello")
//	npmtest.Inspector(t, url, "--transport", "http", "--header", "Authorization: Bearer "+token,
//		"--method", "tools/list")
//
// (CONFORMANCE.md lists the methods and flags). A tool call that the
// server answers with isError: true still exits 0: the caller checks the
// JSON. The error is non-nil when inspector-cli exits non-zero (it could
// not connect, or the server answered with a JSON-RPC error) and then
// includes its standard error. It skips t as Dir does.
//
// It runs the package's build/index.js, the CLI itself, in that
// directory: the bin mcp-inspector-cli is a launcher that runs it with
// the node on PATH, and index.js reads its own package.json by a path
// relative to the working directory (inspector-cli 1.0.3 fails with
// "Cannot find module .../@modelcontextprotocol/package.json" anywhere
// else).
func Inspector(t testing.TB, args ...string) ([]byte, error) {
	t.Helper()
	build := filepath.Dir(Bin(t, "mcp-inspector-cli"))
	ctx, cancel := context.WithTimeout(t.Context(), inspectorTimeout)
	defer cancel()
	cmd := nodeCommand(t, ctx, filepath.Join(build, "index.js"), args...)
	cmd.Dir = build
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return stdout.Bytes(), fmt.Errorf("npmtest: inspector-cli did not finish within %v", inspectorTimeout)
	}
	if err != nil {
		return stdout.Bytes(), fmt.Errorf("npmtest: inspector-cli: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}
