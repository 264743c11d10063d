package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/transparency-dev/merkle/proof"
)

// Following: a read-only Ledger over a log that another process sequences
// on the same Store (several ledgerd instances on one database, one of
// which sequences). The follower serves a view of the log: a durable size,
// the tree's right edge at that size and the latest checkpoint, all
// checked, and moves the view forward only to a state of the store it has
// checked too: a newer latest checkpoint signed by the log's key, whose
// root the stored tiles give, and a tree that still has, at the view's
// checkpoint size, the view's root (the log only grew). A store that
// breaks this is never served: the follower keeps its view and reports
// a *FollowError (Failure).

// ErrReadOnly: the ledger follows a log another process sequences (see
// Follow); it appends and signs nothing.
var ErrReadOnly = errors.New("ledger: read-only follower")

// ErrDiverged classifies a *FollowError: the store no longer extends the
// log a follower served.
var ErrDiverged = errors.New("ledger: the store does not extend the followed log")

// FollowError is a refresh refused because the store does not extend the
// view the follower serves: its tree or its latest checkpoint shrank, the
// new latest checkpoint is not signed by the log's key, its root is not
// what the stored tiles give, or the stored tree is not consistent with
// the view's checkpoint. The view is kept. It is errors.Is ErrDiverged,
// and unwraps to the cause (ErrRotation for a checkpoint signed by another
// key).
type FollowError struct {
	// The view kept: its size and its checkpoint's size and root.
	Size, CheckpointSize uint64
	Root                 []byte
	// What the store holds: its size and its latest checkpoint's size,
	// and that checkpoint's root (nil if it could not be read).
	StoreSize, StoreCheckpointSize uint64
	StoreRoot                      []byte
	Err                            error
}

func (e *FollowError) Error() string {
	return fmt.Sprintf("%v: the store (size %d, checkpoint size %d, root %x) does not extend the view served (size %d, checkpoint size %d, root %x): %v",
		ErrDiverged, e.StoreSize, e.StoreCheckpointSize, e.StoreRoot, e.Size, e.CheckpointSize, e.Root, e.Err)
}

func (e *FollowError) Unwrap() error { return e.Err }

func (e *FollowError) Is(target error) bool { return target == ErrDiverged }

// follower is a following Ledger's own state.
type follower struct {
	ring *keyring
	// mu serializes refreshes, so that each moves the view from the one
	// the previous left.
	mu sync.Mutex
	// loopErr is the last error of the refresh loop, logged once.
	loopErr string
}

// Follow returns a read-only Ledger over a log that another process
// sequences on store, signed by key (after a rotation, with the earlier
// keys in opts.PreviousKeys). It checks the store as Open does, less the
// rehashing of the entries after the latest checkpoint (the sequencer may
// be appending them): the latest checkpoint's signature, the keys'
// rotations, and the checkpoint's root against the stored tiles. It
// starts no sequencer, signs nothing and never writes to the store.
//
// The follower serves the reads (Size, Checkpoint, CheckpointAt, Entry,
// proofs, Tile, EntryBundle, TlogProof, Export, WaitCheckpoint) for its
// view of the log, which Refresh moves forward; a goroutine refreshes
// every opts.FollowInterval until Close. Append and Publish return an
// error wrapping ErrReadOnly. The approval state is the sequencer's: on a
// follower Approval finds none, PendingApprovals is empty and
// ApprovalConfig reports none (ledgerd forwards those to the sequencer).
// Of opts, only Logger, Now, PreviousKeys and FollowInterval apply.
//
// After a key rotation, the checkpoints signed by the new key alone are
// refused (ErrRotation) by a follower that was given the old key: restart
// it with the new key, the old one in PreviousKeys, as the sequencer.
func Follow(ctx context.Context, store Store, key *Key, opts Options) (*Ledger, error) {
	opts = opts.withDefaults()
	opts.FullCheck, opts.following = false, true
	ring, err := newKeyring(key, opts.PreviousKeys)
	if err != nil {
		return nil, err
	}
	l, err := check(ctx, store, key, opts)
	if err != nil {
		return nil, err
	}
	l.follow = &follower{ring: ring}
	l.log.InfoContext(ctx, "ledger following", "size", l.edge.size(), "checkpoint_size", l.cpSize, "interval", opts.FollowInterval)
	if opts.FollowInterval > 0 {
		l.done.Add(1)
		go l.followLoop()
	}
	return l, nil
}

// ReadOnly reports whether l is a follower (see Follow).
func (l *Ledger) ReadOnly() bool { return l.follow != nil }

// errReadOnly refuses a write on a follower.
func (l *Ledger) errReadOnly(what string) error {
	return fmt.Errorf("%w: %s: another process sequences this log", ErrReadOnly, what)
}

// Refresh moves a follower's view to the store's latest state, checked:
// the latest checkpoint's signature by the log's key, its root against
// the stored tiles, and that the stored tree at the view's checkpoint size
// still has the view's root (a consistency proof from the tiles between
// the two checkpoints, verified, too). Readers see the old view or the new
// one, never a mix. A store that fails a check leaves the view as it was;
// Refresh then returns a *FollowError, which Failure reports from then on,
// and every later Refresh returns it: a store that once showed another
// history is not followed further. Other errors (the store unreachable, ctx
// done) are returned and change nothing. On a sequencing Ledger, whose
// view is always current, Refresh does nothing.
func (l *Ledger) Refresh(ctx context.Context) error {
	f := l.follow
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := l.failure(); err != nil {
		return err
	}
	st, err := l.store.State(ctx)
	if err != nil {
		return fmt.Errorf("ledger: follower: reading store state: %w", err)
	}
	l.cpMu.Lock()
	old, oldSize, oldRoot := l.cp, l.cpSize, l.cpRoot
	l.cpMu.Unlock()
	size := l.Size()
	if st.Size == size && st.CheckpointSize == oldSize && bytes.Equal(st.Checkpoint, old) {
		return nil
	}
	v, err := l.checkFollow(ctx, st, old, oldSize, oldRoot, size)
	if err != nil {
		if fe, ok := errors.AsType[*FollowError](err); ok {
			l.mu.Lock()
			l.failed = fe
			l.mu.Unlock()
			l.log.ErrorContext(ctx, "ledger: follower: the store does not extend the log served; keeping the view", "size", size,
				"checkpoint_size", oldSize, "store_size", st.Size, "store_checkpoint_size", st.CheckpointSize, "error", fe)
		}
		return err
	}
	// Both locks, in Publish's order, so that no reader sees a size from
	// one view and a checkpoint from the other.
	l.cpMu.Lock()
	l.mu.Lock()
	l.edge = v.edge
	l.mu.Unlock()
	if !bytes.Equal(v.cp, old) {
		l.cp, l.cpSize, l.cpRoot, l.cpTime = v.cp, v.cpSize, v.cpRoot, l.opts.Now()
		close(l.cpSigned)
		l.cpSigned = make(chan struct{})
	}
	l.cpMu.Unlock()
	return nil
}

// followView is a checked state of the store, for a follower to serve.
type followView struct {
	edge   *edge
	cp     []byte
	cpSize uint64
	cpRoot []byte
}

// checkFollow checks the store's state st against the view (latest
// checkpoint old for oldSize with root oldRoot, durable size size), as
// Refresh documents. It returns a *FollowError for a store that does not
// extend the view, and other errors as they come.
func (l *Ledger) checkFollow(ctx context.Context, st State, old []byte, oldSize uint64, oldRoot []byte, size uint64) (*followView, error) {
	fe := &FollowError{Size: size, CheckpointSize: oldSize, Root: oldRoot, StoreSize: st.Size, StoreCheckpointSize: st.CheckpointSize}
	diverged := func(err error) (*followView, error) {
		fe.Err = err
		return nil, fe
	}
	// A read the store cannot answer for a state it reported, or a
	// malformed tile, is the store contradicting itself; anything else
	// (a lost connection, a done ctx) is not the store's history.
	readErr := func(what string, err error) (*followView, error) {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt) {
			return diverged(fmt.Errorf("%s: %w", what, err))
		}
		return nil, fmt.Errorf("ledger: follower: %s: %w", what, err)
	}
	if st.Size < size {
		return diverged(fmt.Errorf("the tree shrank from %d to %d entries", size, st.Size))
	}
	if st.Checkpoint == nil {
		if old != nil {
			return diverged(errors.New("the store has no checkpoint any more"))
		}
		e, err := newTileReader(ctx, l.store).edgeAt(st.Size, true)
		if err != nil {
			return readErr(fmt.Sprintf("the tree edge at size %d", st.Size), err)
		}
		return &followView{edge: e}, nil
	}
	if st.CheckpointSize < oldSize {
		return diverged(fmt.Errorf("the latest checkpoint went back from tree size %d to %d", oldSize, st.CheckpointSize))
	}
	cp, signers, _, err := l.follow.ring.open(st.Checkpoint, fmt.Sprintf("the latest checkpoint (tree size %d)", st.CheckpointSize))
	if err != nil {
		return diverged(err)
	}
	fe.StoreRoot = cp.Hash
	if cur := l.key.ID(); !slices.Contains(signers, cur) {
		return diverged(fmt.Errorf("%w: the latest checkpoint (tree size %d) is signed by %v, not by the configured key %s", ErrRotation, cp.Size, signers, cur))
	}
	if cp.Size != st.CheckpointSize || cp.Size > st.Size {
		return diverged(fmt.Errorf("%w: the latest checkpoint is for size %d, stored as %d, tree size %d", ErrCorrupt, cp.Size, st.CheckpointSize, st.Size))
	}
	if cp.Size == oldSize && old != nil && !bytes.Equal(cp.Hash, oldRoot) {
		return diverged(fmt.Errorf("another checkpoint for tree size %d, with root %x", cp.Size, cp.Hash))
	}
	r := newTileReader(ctx, l.store)
	root, err := r.rootAt(cp.Size)
	if err != nil {
		return readErr(fmt.Sprintf("the root at size %d", cp.Size), err)
	}
	if !bytes.Equal(root, cp.Hash) {
		return diverged(fmt.Errorf("%w: stored tiles give root %x at size %d, the signed checkpoint says %x", ErrCorrupt, root, cp.Size, cp.Hash))
	}
	if old != nil && oldSize > 0 {
		root, err := r.rootAt(oldSize)
		if err != nil {
			return readErr(fmt.Sprintf("the root at size %d", oldSize), err)
		}
		if !bytes.Equal(root, oldRoot) {
			return diverged(fmt.Errorf("stored tiles give root %x at size %d, the checkpoint served says %x", root, oldSize, oldRoot))
		}
		p, err := r.consistencyProof(oldSize, cp.Size)
		if err != nil {
			return readErr(fmt.Sprintf("the consistency proof from size %d to %d", oldSize, cp.Size), err)
		}
		if err := proof.VerifyConsistency(hasher, oldSize, cp.Size, p, oldRoot, cp.Hash); err != nil {
			return diverged(fmt.Errorf("the tree of size %d is not consistent with the checkpoint served: %w", cp.Size, err))
		}
	}
	e, err := r.edgeAt(st.Size, true)
	if err != nil {
		return readErr(fmt.Sprintf("the tree edge at size %d", st.Size), err)
	}
	return &followView{edge: e, cp: st.Checkpoint, cpSize: cp.Size, cpRoot: cp.Hash}, nil
}

// followLoop refreshes every FollowInterval until Close. An error is
// logged when it first occurs, and the recovery after it.
func (l *Ledger) followLoop() {
	defer l.done.Done()
	// Close ends a refresh under way: the store may be slow or down.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		select {
		case <-l.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(l.opts.FollowInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		err := l.Refresh(ctx)
		if ctx.Err() != nil {
			return
		}
		var msg string
		if err != nil {
			msg = err.Error()
		}
		if msg == l.follow.loopErr {
			continue
		}
		switch {
		case err == nil:
			l.log.Info("ledger: follower: refreshing again", "size", l.Size())
		case errors.Is(err, ErrDiverged):
			// Refresh logged it.
		default:
			l.log.Warn("ledger: follower: refresh failed; serving the view as it was", "size", l.Size(), "error", err)
		}
		l.follow.loopErr = msg
	}
}
