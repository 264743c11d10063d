package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/decisionledger/ledger/internal/signednote"
	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

// Checkpoints are C2SP tlog-checkpoint notes: the origin (the key's name),
// the tree size and the base64 root hash, each on its own line, signed by
// the ledger's key as a C2SP signed note.

func sumSHA256(b []byte) [sha256.Size]byte { return sha256.Sum256(b) }

// parseCheckpoint opens a signed checkpoint with the ledger's own key,
// as strictly as package verify does (both use internal/signednote):
// every signature line in canonical base64, and every line by the key
// verifying.
func parseCheckpoint(signed []byte, key *Key) (*log.Checkpoint, error) {
	v, err := note.NewVerifier(key.VerifierKey())
	if err != nil {
		return nil, err
	}
	n, err := signednote.Open(signed, v)
	if err != nil {
		return nil, err
	}
	cp := &log.Checkpoint{}
	if _, err := cp.Unmarshal([]byte(n.Text)); err != nil {
		return nil, err
	}
	if cp.Origin != key.Name() {
		return nil, fmt.Errorf("the checkpoint is for origin %q, the key's is %q", cp.Origin, key.Name())
	}
	return cp, nil
}

// Checkpoint returns the latest signed checkpoint and its tree size. Open
// signs one for a log that has none, the empty tree's for a new log, so
// there is always one.
func (l *Ledger) Checkpoint() ([]byte, uint64) {
	l.cpMu.Lock()
	defer l.cpMu.Unlock()
	return bytes.Clone(l.cp), l.cpSize
}

// WaitCheckpoint waits until a signed checkpoint covers the first size
// entries (the next periodic one, or a Publish; on a follower, the first
// refresh that finds one), and returns it and its size.
func (l *Ledger) WaitCheckpoint(ctx context.Context, size uint64) ([]byte, uint64, error) {
	for {
		l.cpMu.Lock()
		cp, cpSize, signed := l.cp, l.cpSize, l.cpSigned
		l.cpMu.Unlock()
		if cpSize >= size && cp != nil {
			return bytes.Clone(cp), cpSize, nil
		}
		select {
		case <-signed:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-l.stop:
			return nil, 0, ErrClosed
		}
	}
}

// CheckpointTime returns when the latest checkpoint was signed by this
// process, or loaded at Open; zero before any.
func (l *Ledger) CheckpointTime() time.Time {
	l.cpMu.Lock()
	defer l.cpMu.Unlock()
	return l.cpTime
}

// CheckpointAt returns the signed checkpoint published for exactly size.
func (l *Ledger) CheckpointAt(ctx context.Context, size uint64) ([]byte, error) {
	if l.follow != nil {
		if _, latest := l.Checkpoint(); size > latest {
			return nil, fmt.Errorf("checkpoint for tree size %d is beyond the follower's view (latest %d): %w", size, latest, ErrNotFound)
		}
	}
	return l.store.Checkpoint(ctx, size)
}

// Publish signs and stores a checkpoint for the current tree if it has
// grown since the latest one, and returns the latest signed checkpoint.
// Before signing, it checks from stored tiles that the new tree is
// consistent with the latest signed one: a ledger never signs two
// inconsistent checkpoints, across restarts too.
func (l *Ledger) Publish(ctx context.Context) ([]byte, error) {
	cp, _, err := l.publish(ctx)
	return cp, err
}

// publish is Publish, and reports whether it signed a checkpoint.
func (l *Ledger) publish(ctx context.Context) ([]byte, bool, error) {
	if l.follow != nil {
		return nil, false, l.errReadOnly("publish")
	}
	l.cpMu.Lock()
	defer l.cpMu.Unlock()
	l.mu.Lock()
	e, failed := l.edge, l.failed
	l.mu.Unlock()
	if failed != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrClosed, failed)
	}
	size := e.size()
	if size == l.cpSize && l.cp != nil {
		return bytes.Clone(l.cp), false, nil
	}
	root := e.root()
	if err := l.verifyConsistency(ctx, l.cpSize, l.cpRoot, size, root); err != nil {
		l.mu.Lock()
		l.failed = fmt.Errorf("%w: tree of size %d is not consistent with the checkpoint of size %d: %w", ErrCorrupt, size, l.cpSize, err)
		err = l.failed
		l.mu.Unlock()
		l.log.ErrorContext(ctx, "ledger: refusing to sign an inconsistent checkpoint; appends stopped", "size", size, "checkpoint_size", l.cpSize, "error", err)
		return nil, false, err
	}
	text := log.Checkpoint{Origin: l.key.Name(), Size: size, Hash: root}.Marshal()
	signed, err := note.Sign(&note.Note{Text: string(text)}, l.key.Signer())
	if err != nil {
		return nil, false, fmt.Errorf("ledger: signing checkpoint: %w", err)
	}
	// cpMu serializes AddCheckpoint; Commit may run beside it, so that
	// the store's sync of the checkpoint does not hold up appends.
	if err := l.store.AddCheckpoint(ctx, size, signed); err != nil {
		return nil, false, fmt.Errorf("ledger: storing checkpoint of size %d: %w", size, err)
	}
	l.cp, l.cpSize, l.cpRoot, l.cpTime = signed, size, root, l.opts.Now()
	close(l.cpSigned)
	l.cpSigned = make(chan struct{})
	return bytes.Clone(signed), true, nil
}

// publishLoop signs a checkpoint when the tree has grown (each durable
// batch wakes it), but no sooner than CheckpointInterval after the start
// of the previous one it signed. Rather than a ticker: an idle log wakes
// nothing and signs nothing, a lone append is covered at once rather than
// at the next tick, and under load checkpoints come every
// CheckpointInterval, so that an entry waits at most that long plus one
// signing and storing.
func (l *Ledger) publishLoop() {
	defer l.done.Done()
	var last time.Time // when the latest signing by this loop began
	spacing := time.NewTimer(time.Hour)
	spacing.Stop()
	defer spacing.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.grown:
		}
		if wait := l.opts.CheckpointInterval - time.Since(last); wait > 0 {
			spacing.Reset(wait)
			select {
			case <-l.stop:
				return
			case <-spacing.C:
			}
		}
		started := time.Now()
		_, signed, err := l.publish(context.Background())
		if err != nil && !errors.Is(err, ErrClosed) {
			l.log.Error("ledger: publishing checkpoint", "error", err)
		}
		// A wake-up for a batch this checkpoint covered may be
		// pending: it finds the tree as signed and signs nothing,
		// which does not count as the latest signing. A failure does,
		// so that it is retried (and logged) once an interval, not at
		// every batch.
		if signed || err != nil {
			last = started
		}
	}
}

// AddsSignatures reports whether signed is the checkpoint latest with
// signature lines added: the one checkpoint a Store accepts for the size of
// its latest (see Store.AddCheckpoint), which then replaces it.
func AddsSignatures(latest, signed []byte) bool {
	return len(latest) > 0 && len(signed) > len(latest) && bytes.HasPrefix(signed, latest) &&
		bytes.HasSuffix(latest, []byte("\n")) && bytes.HasSuffix(signed, []byte("\n"))
}
