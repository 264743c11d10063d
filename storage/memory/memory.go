// Package memory is a ledger.Store held in memory, for tests: it keeps
// the whole log (entries, leaf-hash and idempotency-key indexes, tiles and
// every signed checkpoint) in maps and slices behind one lock, and passes
// the conformance suite in storage/storetest like every other Store.
//
// It meets every requirement of the Store contract except durability: a
// batch is "durable" for as long as the data is referenced. Store.Reopen
// hands out a new handle over the same data, as a restart would, so
// tests can exercise Open after Close without a disk. Nothing survives
// the process; ledgerd never uses it.
package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/decisionledger/ledger/ledger"
)

// errClosed is returned by a Store used after Close.
var errClosed = errors.New("ledger: store is closed")

// errEmptyCheckpoint refuses an empty signed checkpoint: State reports "no
// checkpoint" as nil, so an empty one could not be told apart from none.
var errEmptyCheckpoint = errors.New("ledger: empty signed checkpoint")

// Store is a ledger.Store held in memory. It is safe for concurrent
// use and copies every slice on the way in and out, so neither the caller
// nor the store can change the other's bytes.
//
// Its data lives as long as something refers to it: Close ends this handle,
// and Reopen gives a new handle over the same data, as a restart would.
type Store struct {
	closed atomic.Bool
	data   *memData
}

type memData struct {
	mu          sync.RWMutex
	entries     [][]byte // never changed once stored, so readers may use them unlocked
	leafIndex   map[[ledger.HashSize]byte]uint64
	keyIndex    map[string]uint64
	tiles       map[tileKey][]byte
	checkpoints map[uint64][]byte
	// latest is the size of the latest checkpoint, if hasCheckpoint.
	latest        uint64
	hasCheckpoint bool
	// snapshot is the approval snapshot for snapshotSize entries, nil if
	// none was stored.
	snapshot     []byte
	snapshotSize uint64
}

type tileKey struct {
	level uint8
	index uint64
}

var _ ledger.SnapshotStore = (*Store)(nil)

// New returns an empty Store.
func New() *Store {
	return &Store{data: &memData{
		leafIndex:   make(map[[ledger.HashSize]byte]uint64),
		keyIndex:    make(map[string]uint64),
		tiles:       make(map[tileKey][]byte),
		checkpoints: make(map[uint64][]byte),
	}}
}

// Reopen returns a new handle over the same data, as a restart of the
// process would if the memory survived. s may be closed.
func (s *Store) Reopen() *Store {
	return &Store{data: s.data}
}

// Close ends this handle; the data stays for Reopen. Closing twice is safe.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

func (s *Store) open() (*memData, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	return s.data, nil
}

// State implements Store.
func (s *Store) State(ctx context.Context) (ledger.State, error) {
	d, err := s.open()
	if err != nil {
		return ledger.State{}, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	st := ledger.State{Size: uint64(len(d.entries))}
	if d.hasCheckpoint {
		st.CheckpointSize = d.latest
		st.Checkpoint = cloneBytes(d.checkpoints[d.latest])
	}
	return st, nil
}

// Commit implements Store.
func (s *Store) Commit(ctx context.Context, b ledger.Batch) error {
	d, err := s.open()
	if err != nil {
		return err
	}
	if err := b.Check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ledger: batch at %d: %w", b.Start, err)
	}
	// Copy before locking, so readers wait only for the map updates.
	entries := make([][]byte, len(b.Entries))
	for i, e := range b.Entries {
		entries[i] = cloneBytes(e)
	}
	tiles := make([][]byte, len(b.Tiles))
	for i, t := range b.Tiles {
		tiles[i] = cloneBytes(t.Hashes)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if size := uint64(len(d.entries)); b.Start != size {
		return fmt.Errorf("ledger: batch at %d: stored size is %d: %w", b.Start, size, ledger.ErrConflict)
	}
	for _, k := range b.Keys {
		if _, ok := d.keyIndex[string(k)]; ok && len(k) > 0 {
			return fmt.Errorf("ledger: batch at %d: an idempotency key is already stored: %w", b.Start, ledger.ErrConflict)
		}
	}
	for i, k := range b.Keys {
		if len(k) > 0 {
			d.keyIndex[string(k)] = b.Start + uint64(i)
		}
	}
	for i, h := range b.LeafHashes {
		if _, ok := d.leafIndex[h]; !ok {
			d.leafIndex[h] = b.Start + uint64(i)
		}
	}
	for i, t := range b.Tiles {
		d.tiles[tileKey{t.Level, t.Index}] = tiles[i]
	}
	d.entries = append(d.entries, entries...)
	return nil
}

// Entry implements Store.
func (s *Store) Entry(ctx context.Context, index uint64) ([]byte, error) {
	d, err := s.open()
	if err != nil {
		return nil, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if index >= uint64(len(d.entries)) {
		return nil, fmt.Errorf("ledger: entry %d: %w", index, ledger.ErrNotFound)
	}
	return cloneBytes(d.entries[index]), nil
}

// ReadEntries implements Store. fn runs without the lock held, so it may
// call the store, and commits proceed while it runs.
func (s *Store) ReadEntries(ctx context.Context, start, end uint64, fn func(index uint64, entry []byte) error) error {
	d, err := s.open()
	if err != nil {
		return err
	}
	d.mu.RLock()
	size := uint64(len(d.entries))
	var entries [][]byte
	if start <= end && end <= size {
		// Commits only append, so this window of the slice stays valid.
		entries = d.entries[start:end]
	}
	d.mu.RUnlock()
	if start > end || end > size {
		return fmt.Errorf("ledger: entries [%d, %d) of %d: %w", start, end, size, ledger.ErrNotFound)
	}
	var buf []byte
	for i, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		// fn may write to its slice; give it a copy of the stored bytes.
		buf = append(buf[:0], e...)
		if err := fn(start+uint64(i), buf); err != nil {
			return err
		}
	}
	return nil
}

// IndexOfKey implements Store.
func (s *Store) IndexOfKey(ctx context.Context, key []byte) (uint64, error) {
	d, err := s.open()
	if err != nil {
		return 0, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	i, ok := d.keyIndex[string(key)]
	if !ok || len(key) == 0 {
		return 0, fmt.Errorf("ledger: idempotency key: %w", ledger.ErrNotFound)
	}
	return i, nil
}

// IndexOf implements Store.
func (s *Store) IndexOf(ctx context.Context, leafHash [ledger.HashSize]byte) (uint64, error) {
	d, err := s.open()
	if err != nil {
		return 0, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	i, ok := d.leafIndex[leafHash]
	if !ok {
		return 0, fmt.Errorf("ledger: leaf hash %x: %w", leafHash, ledger.ErrNotFound)
	}
	return i, nil
}

// Tile implements Store.
func (s *Store) Tile(ctx context.Context, level uint8, index uint64) ([]byte, error) {
	d, err := s.open()
	if err != nil {
		return nil, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	t, ok := d.tiles[tileKey{level, index}]
	switch size := uint64(len(d.entries)); {
	case !ok && ledger.TileInTree(size, level, index):
		// A batch that did not carry it: the contract calls it lost.
		return nil, fmt.Errorf("%w: tile %d/%d of the tree of %d entries is missing", ledger.ErrCorrupt, level, index, size)
	case !ok:
		return nil, fmt.Errorf("ledger: tile %d/%d: %w", level, index, ledger.ErrNotFound)
	}
	return cloneBytes(t), nil
}

// AddCheckpoint implements Store.
func (s *Store) AddCheckpoint(ctx context.Context, size uint64, signed []byte) error {
	d, err := s.open()
	if err != nil {
		return err
	}
	if len(signed) == 0 {
		return errEmptyCheckpoint
	}
	signed = cloneBytes(signed)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hasCheckpoint && size <= d.latest && !(size == d.latest && ledger.AddsSignatures(d.checkpoints[d.latest], signed)) {
		return fmt.Errorf("ledger: checkpoint for size %d: latest is for size %d: %w", size, d.latest, ledger.ErrConflict)
	}
	if treeSize := uint64(len(d.entries)); size > treeSize {
		return fmt.Errorf("ledger: checkpoint for size %d: tree size is %d: %w", size, treeSize, ledger.ErrConflict)
	}
	d.checkpoints[size] = signed
	d.latest, d.hasCheckpoint = size, true
	return nil
}

// Checkpoint implements Store.
func (s *Store) Checkpoint(ctx context.Context, size uint64) ([]byte, error) {
	d, err := s.open()
	if err != nil {
		return nil, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	c, ok := d.checkpoints[size]
	if !ok {
		return nil, fmt.Errorf("ledger: checkpoint for size %d: %w", size, ledger.ErrNotFound)
	}
	return cloneBytes(c), nil
}

// PutSnapshot stores snap as the approval snapshot for size entries,
// replacing the one stored; it refuses a size beyond the stored tree.
func (s *Store) PutSnapshot(ctx context.Context, size uint64, snap []byte) error {
	d, err := s.open()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := uint64(len(d.entries)); size > n {
		return fmt.Errorf("ledger: snapshot for size %d, the tree has %d entries: %w", size, n, ledger.ErrConflict)
	}
	d.snapshot, d.snapshotSize = cloneBytes(snap), size
	return nil
}

// Snapshot returns the approval snapshot stored and its size, or
// ErrNotFound.
func (s *Store) Snapshot(ctx context.Context) (uint64, []byte, error) {
	d, err := s.open()
	if err != nil {
		return 0, nil, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.snapshot == nil {
		return 0, nil, fmt.Errorf("ledger: approval snapshot: %w", ledger.ErrNotFound)
	}
	return d.snapshotSize, cloneBytes(d.snapshot), nil
}

// cloneBytes copies b; unlike bytes.Clone it never returns nil for an empty b,
// so that a stored empty value reads back as present.
func cloneBytes(b []byte) []byte {
	return append(make([]byte, 0, len(b)), b...)
}
