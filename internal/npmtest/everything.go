package npmtest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds the wait for a server's "listening" line.
const startTimeout = 60 * time.Second

// StartEverything starts server-everything's streamable HTTP transport
// (mcp-server-everything streamableHttp, PORT=<port>) on a free port and
// returns its endpoint, http://127.0.0.1:<port>/mcp, once the server has
// printed that it listens. The server is killed when t ends; its output
// is in t's log if t failed. It skips t as Dir does.
//
// The server listens on every interface (it has no setting for the
// address); tests reach it on 127.0.0.1 only. The port is one that the
// kernel just gave a listener of ours and took back; if another process
// takes it in between, the server says so and exits, and another port is
// tried.
func StartEverything(t testing.TB) string {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "server-everything.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		logFile.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("server-everything's output:\n%s", lastLines(out, 40))
		}
	})
	for try := 0; ; try++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		cmd := Command(t, "mcp-server-everything", "streamableHttp")
		cmd.Env = append(cmd.Env, "PORT="+strconv.Itoa(port))
		cmd.Stdout = logFile
		// A pipe of our own, not StderrPipe: Wait, called as soon as the
		// server exits, would close that one before its last line is read.
		stderr, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = w
		err = cmd.Start()
		w.Close()
		if err != nil {
			stderr.Close()
			t.Fatalf("npmtest: starting server-everything: %v", err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() {
			cmd.Process.Signal(syscall.SIGKILL)
			<-exited
		}

		// Read its stderr to the line saying it listens (or that the port
		// was taken), then keep copying it to the log.
		want := fmt.Sprintf("listening on port %d", port)
		result := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stderr)
			said := ""
			for sc.Scan() {
				line := sc.Text()
				fmt.Fprintln(logFile, line)
				if said == "" && (strings.Contains(line, want) || strings.Contains(line, "already in use")) {
					said = line
					result <- line
				}
			}
			if said == "" {
				result <- ""
			}
			io.Copy(logFile, stderr) // a line too long for the scanner
			stderr.Close()
		}()
		var line string
		select {
		case line = <-result:
		case <-time.After(startTimeout):
			stop()
			t.Fatalf("npmtest: server-everything did not say it listens within %v", startTimeout)
		}
		switch {
		case strings.Contains(line, want):
			t.Cleanup(stop)
			return "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"
		case strings.Contains(line, "already in use") && try < 4:
			stop()
			continue
		default:
			stop()
			t.Fatalf("npmtest: server-everything did not start on port %d", port)
		}
	}
}

// freePort returns a port that the kernel just gave a loopback listener.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("npmtest: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
