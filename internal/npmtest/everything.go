package npmtest

import (
	"bufio"
	"fmt"
	"io"
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
// (mcp-server-everything streamableHttp) on a port the kernel chooses
// and returns its endpoint, http://127.0.0.1:<port>/mcp, once the server
// listens. The server is killed when t ends; its output is in t's log if
// t failed. It skips t as Dir does.
//
// The server's only setting is PORT (it listens on every interface, and
// tests reach it on 127.0.0.1 only). Its line "MCP Streamable HTTP
// Server listening on port N" is no proof that it listens: it prints N as
// given, and prints the line when the port is taken too, just before
// "Failed to start: Port N is already in use" (Express 5 calls listen's
// callback with the error). So it is started with PORT=0, and the port is
// read from the kernel once the line is out: the one TCP socket in LISTEN
// state among the process's file descriptors (/proc/PID/fd, and
// /proc/PID/net/tcp6 and tcp). No port is picked ahead, so none can be
// taken in between.
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
	cmd := Command(t, "mcp-server-everything", "streamableHttp")
	cmd.Env = append(cmd.Env, "PORT=0")
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
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	})

	// Read its stderr to the listening line, then keep copying it to the
	// log.
	said := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		found := false
		for sc.Scan() {
			fmt.Fprintln(logFile, sc.Text())
			if !found && strings.Contains(sc.Text(), "MCP Streamable HTTP Server listening on port ") {
				found = true
				said <- true
			}
		}
		if !found {
			said <- false
		}
		io.Copy(logFile, stderr) // after a line too long for the scanner
		stderr.Close()
	}()
	select {
	case ok := <-said:
		if !ok {
			<-exited
			t.Fatalf("npmtest: server-everything exited at start: %v", cmd.ProcessState)
		}
	case <-time.After(startTimeout):
		t.Fatalf("npmtest: server-everything did not say it listens within %v", startTimeout)
	}
	port, err := listeningPort(cmd.Process.Pid)
	if err != nil {
		t.Fatalf("npmtest: server-everything said it listens: %v", err)
	}
	return "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"
}

// listeningPort returns the port of the one TCP socket in LISTEN state
// that process pid holds.
func listeningPort(pid int) (int, error) {
	proc := "/proc/" + strconv.Itoa(pid)
	fds, err := os.ReadDir(proc + "/fd")
	if err != nil {
		return 0, err
	}
	sockets := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(proc + "/fd/" + fd.Name())
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			sockets[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"/net/tcp6", "/net/tcp"} {
		data, err := os.ReadFile(proc + table)
		if err != nil {
			return 0, err
		}
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when
		// retrnsmt uid timeout inode ..., local_address ADDR:PORT in hex.
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !sockets[f[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			p, err := strconv.ParseUint(hexPort, 16, 16)
			if err != nil {
				return 0, fmt.Errorf("%s: local address %q", table, f[1])
			}
			ports = append(ports, int(p))
		}
	}
	if len(ports) != 1 {
		return 0, fmt.Errorf("process %d holds %d listening TCP sockets, want 1", pid, len(ports))
	}
	return ports[0], nil
}
