// The online fsck's socket (FsckSocket): its protocol, its server and
// its client (FsckOnline).

package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/decisionledger/ledger/ledger"
)

// FsckSocket, in store_dir, is where the daemon on a badger store takes
// requests for an online fsck (FsckOnline is the client).
//
// An online fsck checks the log while ledgerd appends: the tree of the
// latest signed checkpoint, below which the store never changes, with
// ledger.Fsck (Online). A badger store's directory lock keeps every other
// process out, so the check runs inside the ledgerd that holds it, on one
// reading worker (ledgerd's appends keep the other core), and
// "ledgerd fsck --online" asks for it over a unix socket in the store's
// directory, fsck.sock, mode 0600 in a directory of mode 0700: whoever
// can reach it can read the store's files anyway, the operator's
// authority, which no HTTP credential gives (a mediator token must not
// start a check of the whole log). One check runs at a time.
//
// The protocol is JSON lines: the client sends one fsckRequest; the
// daemon answers with FsckMessages, progress ones and then one with Done
// set, and closes the connection. A client that goes away stops the
// check.
//
// On PostgreSQL any process can read the store while the sequencer
// appends (the database isolates them), so "ledgerd fsck --online" opens
// the store itself, takes no lease and checks the tree of the latest
// checkpoint as it finds it.
const FsckSocket = "fsck.sock"

// fsckRequest asks for a check: with every entry's signature verified
// too, reporting at most MaxDamage problems (ledger.FsckOptions).
type fsckRequest struct {
	Signatures bool `json:"signatures"`
	MaxDamage  int  `json:"max_damage"`
}

// fsckMessage is one line of the daemon's answer: exactly one of
// Progress and Done is set, and Done only on the last line.
type fsckMessage struct {
	Progress *fsckProgressMessage `json:"progress,omitempty"`
	Done     *fsckDone            `json:"done,omitempty"`
}

// fsckProgressMessage is ledger.FsckProgress on the wire.
type fsckProgressMessage struct {
	Checked   uint64 `json:"checked"`
	Total     uint64 `json:"total"`
	ElapsedNS int64  `json:"elapsed_ns"`
}

// fsckDone is the check's ledger.FsckReport on the wire, each damage as
// its message.
type fsckDone struct {
	StoreSize      uint64   `json:"store_size"`
	Checked        uint64   `json:"checked"`
	CheckpointSize uint64   `json:"checkpoint_size"`
	Tiles          int      `json:"tiles"`
	Signatures     bool     `json:"signatures"`
	ElapsedNS      int64    `json:"elapsed_ns"`
	Damage         []string `json:"damage"`
	More           int      `json:"more"`
	// Error is why the check did not finish, if it did not.
	Error string `json:"error,omitempty"`
}

// fsckProgressEvery is how often ledgerd sends a progress message.
const fsckProgressEvery = 200 * time.Millisecond

// serveFsck listens on dir's fsck.sock and runs an online fsck of l for
// each client, one at a time, until stop is called (which ends a check
// running, and waits for it).
func serveFsck(ctx context.Context, dir string, l *ledger.Ledger, log *slog.Logger) (stop func(), err error) {
	path := filepath.Join(dir, FsckSocket)
	// A socket left by a ledgerd that crashed: the store's lock, which
	// this process holds, says none other serves it.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing the old fsck socket: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("the fsck socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("the fsck socket: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var running sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// The lock is taken here, in the order clients connect.
			if !running.TryLock() {
				c.SetWriteDeadline(time.Now().Add(time.Second))
				json.NewEncoder(c).Encode(fsckMessage{Done: &fsckDone{Error: "an online fsck is running already: one at a time"}})
				c.Close()
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				done := onlineFsck(ctx, c, l, log)
				// Free for the next check before the client hears this
				// one is done.
				running.Unlock()
				json.NewEncoder(c).Encode(fsckMessage{Done: done})
			}()
		}
	}()
	return func() {
		cancel()
		ln.Close()
		wg.Wait()
	}, nil
}

// onlineFsck runs one online fsck for the client c, and returns its
// result, to send.
func onlineFsck(ctx context.Context, c net.Conn, l *ledger.Ledger, log *slog.Logger) *fsckDone {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(io.LimitReader(c, 4096))
	line, err := br.ReadBytes('\n')
	var req fsckRequest
	if err == nil {
		err = json.Unmarshal(line, &req)
	}
	enc := json.NewEncoder(c)
	if err != nil {
		return &fsckDone{Error: fmt.Sprintf("a bad request: %v", err)}
	}
	c.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// The client sends nothing more: a read returns when it goes.
		io.Copy(io.Discard, c)
		cancel()
	}()
	log.Info("online fsck started", "signatures", req.Signatures)
	var last time.Time
	rep, err := l.Fsck(ctx, ledger.FsckOptions{Workers: 1, Signatures: req.Signatures, MaxDamage: req.MaxDamage,
		Progress: func(p ledger.FsckProgress) {
			if time.Since(last) < fsckProgressEvery && p.Checked < p.Total {
				return
			}
			last = time.Now()
			enc.Encode(fsckMessage{Progress: &fsckProgressMessage{Checked: p.Checked, Total: p.Total, ElapsedNS: int64(p.Elapsed)}})
		}})
	done := &fsckDone{StoreSize: rep.StoreSize, Checked: rep.Checked, CheckpointSize: rep.CheckpointSize, Tiles: rep.Tiles,
		Signatures: rep.Signatures, ElapsedNS: int64(rep.Elapsed), More: rep.More, Damage: []string{}}
	for _, d := range rep.Damage {
		done.Damage = append(done.Damage, d.Error())
	}
	if err != nil && len(rep.Damage) == 0 {
		done.Error = err.Error()
	}
	log.Info("online fsck finished", "checked", rep.Checked, "checkpoint_size", rep.CheckpointSize,
		"damage", len(rep.Damage)+rep.More, "duration", rep.Elapsed, "error", done.Error)
	return done
}

// NotServedError is FsckOnline's error when no daemon serves the store
// directory Dir: none runs there, or its socket did not open.
type NotServedError struct {
	Dir string
	Err error // the connection's
}

func (e *NotServedError) Error() string {
	return fmt.Sprintf("no ledgerd serves %s (%v)", e.Dir, e.Err)
}
func (e *NotServedError) Unwrap() error { return e.Err }

// FsckOnline asks the daemon serving the badger store in storeDir for an
// online fsck, with opts' Signatures and MaxDamage, calls opts.Progress
// (if set) with each progress the daemon reports, and returns the
// check's report, whose Err is the damage found. Its error is a
// *NotServedError when no daemon serves storeDir, the daemon's reason
// when the check did not finish, or what ended its answer (ctx's end
// among them).
func FsckOnline(ctx context.Context, storeDir string, opts ledger.FsckOptions) (*ledger.FsckReport, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", filepath.Join(storeDir, FsckSocket))
	if err != nil {
		return nil, &NotServedError{Dir: storeDir, Err: err}
	}
	defer c.Close()
	go func() {
		<-ctx.Done()
		c.Close()
	}()
	if err := json.NewEncoder(c).Encode(fsckRequest{Signatures: opts.Signatures, MaxDamage: opts.MaxDamage}); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bufio.NewReader(c))
	for {
		var m fsckMessage
		if err := dec.Decode(&m); err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return nil, fmt.Errorf("the answer of the ledgerd serving %s ended: %w", storeDir, err)
		}
		if m.Progress != nil {
			if opts.Progress != nil {
				opts.Progress(ledger.FsckProgress{Checked: m.Progress.Checked, Total: m.Progress.Total, Elapsed: time.Duration(m.Progress.ElapsedNS)})
			}
			continue
		}
		if m.Done == nil {
			continue
		}
		done := m.Done
		if done.Error != "" && len(done.Damage) == 0 {
			return nil, errors.New(done.Error)
		}
		rep := &ledger.FsckReport{StoreSize: done.StoreSize, Checked: done.Checked, CheckpointSize: done.CheckpointSize, Tiles: done.Tiles,
			Signatures: done.Signatures, Elapsed: time.Duration(done.ElapsedNS), More: done.More}
		for _, s := range done.Damage {
			rep.Damage = append(rep.Damage, errors.New(s))
		}
		return rep, nil
	}
}
