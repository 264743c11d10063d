// Package ptytest opens pseudo-terminals for tests of what a command
// draws on a terminal (internal/progress), and nothing else.
//
// Open returns a pseudo-terminal's two ends: the terminal, to give a
// process as its standard error, and a Reader that collects everything
// written to it. Where no pseudo-terminal can be opened (no /dev/ptmx,
// or not Linux) Open skips the test with the reason, except under
// LEDGER_CI=1, where it fails it: CI never skips these silently.
package ptytest

import (
	"bytes"
	"os"
	"sync"
	"testing"
)

// PTY is an open pseudo-terminal. Close the terminal end (and every copy
// a child holds, by its exit) before Output.
type PTY struct {
	// Terminal is the terminal end (/dev/pts/N): a process writing to it
	// writes to a terminal.
	Terminal *os.File
	master   *os.File
	done     chan struct{}
	mu       sync.Mutex
	out      bytes.Buffer
}

// Open opens a pseudo-terminal for t, closed when t ends, and starts
// reading what is written to its terminal end (a terminal whose reader
// lags blocks its writers).
func Open(t testing.TB) *PTY {
	t.Helper()
	master, term, err := open()
	if err != nil {
		if os.Getenv("LEDGER_CI") == "1" {
			t.Fatalf("no pseudo-terminal (%v), and LEDGER_CI=1 requires the terminal tests", err)
		}
		t.Skipf("no pseudo-terminal, the terminal tests need one: %v", err)
	}
	p := &PTY{Terminal: term, master: master, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil { // EIO once every terminal end is closed
				return
			}
		}
	}()
	t.Cleanup(func() {
		term.Close()
		master.Close()
		<-p.done
	})
	return p
}

// Output closes the terminal end, waits until everything written to it
// is read, and returns it. A process given the terminal must have exited.
func (p *PTY) Output() []byte {
	p.Terminal.Close()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.out.Bytes())
}
