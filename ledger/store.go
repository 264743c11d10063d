package ledger

import (
	"context"
	"errors"
	"fmt"
)

// HashSize is the size of every hash in the log: SHA-256.
const HashSize = 32

// TileHeight is the height of a tile in the C2SP tlog-tiles layout: a tile
// holds up to 2^8 = 256 hashes of one tree level.
const (
	TileHeight = 8
	TileWidth  = 1 << TileHeight
)

// Errors a Store returns, wrapped with detail; test for them with errors.Is.
var (
	// ErrNotFound: the entry, tile, leaf hash or checkpoint is not stored.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the write does not continue the stored log (a batch that
	// does not start at the stored size, a checkpoint not larger than the
	// latest).
	ErrConflict = errors.New("conflicts with the stored log")
	// ErrCorrupt: the stored data contradict themselves or a signed
	// checkpoint. Open returns it when a stored entry, tile or checkpoint
	// does not match the tree it recomputes; a Store returns it when its
	// own records disagree (a checksum, a length or an index that does not
	// match the data), rather than serve bytes it cannot vouch for, and
	// when it lost something its records say it holds (an entry below its
	// size, a tile of its tree, its latest checkpoint), rather than call
	// it ErrNotFound: "not found" is a definite answer about the log,
	// damage is not. An error never wraps both.
	ErrCorrupt = errors.New("ledger: store is corrupt")
)

// Store keeps a ledger's entries, Merkle tiles and signed checkpoints. The
// ledger is its only writer: it calls Commit from one goroutine at a time,
// and AddCheckpoint from one goroutine at a time, but a Commit and an
// AddCheckpoint may run at once (a checkpoint's sync must not hold up
// appends). Reads may come from any goroutine, concurrently with writes.
//
// Every implementation runs the conformance suite in storetest.
type Store interface {
	// State returns the durable state: the tree size (the number of
	// entries) and the latest checkpoint, nil if none was added.
	State(ctx context.Context) (State, error)

	// Commit appends a batch of entries and the tiles they change.
	//
	// Commit MUST refuse, wrapping ErrConflict and writing nothing, a batch
	// whose Start is not the stored size, whose Entries and LeafHashes
	// differ in length or are empty, whose Keys are neither empty nor as
	// many as its Entries, or one of whose non-empty Keys is already stored
	// or repeated in the batch.
	// Commit MUST be atomic: after any crash, either the whole batch is
	// stored (entries, leaf-hash index, tiles and the new size
	// Start+len(Entries)) or none of it is.
	// When Commit returns nil the batch MUST be durable: it survives a
	// process crash and a power loss. On error the batch MUST NOT be
	// visible. A refusal (ErrConflict, a done context) writes nothing, and
	// the caller may retry; after a failed write or sync the store MAY
	// refuse every later write until it is reopened, and the reopened
	// store then holds the batch whole or not at all.
	// Commit MUST NOT write into b's slices, which the ledger shares (its
	// receipts hold the Entries, its tree's edge the Tiles' bytes), nor
	// keep them after it returns.
	Commit(ctx context.Context, b Batch) error

	// Entry returns the bytes of the entry at index, or ErrNotFound if
	// index is not below the stored size. An entry below the stored size
	// that the store cannot find MUST be reported as ErrCorrupt.
	Entry(ctx context.Context, index uint64) ([]byte, error)

	// ReadEntries calls fn with each entry in [start, end) in index order,
	// stopping at the first error fn returns, which it returns. It MUST
	// return ErrNotFound, before calling fn, if end exceeds the stored size
	// or start > end, and ErrCorrupt for an entry of the range it cannot
	// find. fn MUST NOT retain the slice after it returns.
	ReadEntries(ctx context.Context, start, end uint64, fn func(index uint64, entry []byte) error) error

	// IndexOf returns the index of the entry whose Merkle leaf hash is
	// leafHash, or ErrNotFound. If two entries had the same leaf hash, the
	// lower index is returned (entries differ in index, so they cannot).
	IndexOf(ctx context.Context, leafHash [HashSize]byte) (uint64, error)

	// IndexOfKey returns the index of the entry committed with the
	// idempotency key key, or ErrNotFound.
	IndexOfKey(ctx context.Context, key []byte) (uint64, error)

	// Tile returns the hashes stored for the tile at (level, index): the
	// concatenation of between 1 and TileWidth hashes, the last version
	// committed. It returns ErrNotFound if no batch has written that tile
	// and the tree of the stored size does not have it (TileInTree). The
	// ledger's batches carry every tile they change, so a tile of the
	// stored tree that the store does not hold was lost: Tile MUST return
	// ErrCorrupt for it, never ErrNotFound.
	Tile(ctx context.Context, level uint8, index uint64) ([]byte, error)

	// AddCheckpoint stores a signed checkpoint for tree size size and makes
	// it the latest. It MUST refuse, wrapping ErrConflict and storing
	// nothing, a size that is smaller than the latest checkpoint's or
	// that exceeds the stored tree size, and a size equal to the latest's
	// unless signed is the latest checkpoint's bytes followed by more (the
	// same checkpoint with signature lines added: a key rotation's second
	// signature, see Rotate), which then replaces it. When it returns nil
	// the checkpoint MUST be durable. Earlier checkpoints stay readable.
	AddCheckpoint(ctx context.Context, size uint64, signed []byte) error

	// Checkpoint returns the signed checkpoint added for exactly size, or
	// ErrNotFound. The latest checkpoint, which State names, MUST NOT be
	// ErrNotFound: a store that lost it returns ErrCorrupt, from State
	// too.
	Checkpoint(ctx context.Context, size uint64) ([]byte, error)

	// Close releases the store. Durable data stays durable.
	Close() error
}

// SnapshotStore is a Store that also keeps the ledger's approval
// snapshot: the approval lifecycle's state as the entries [0, size)
// leave it, so that Open reads it and the entries after it instead of the
// whole log (snapshot.go). It is optional: Open rebuilds the state from
// every entry on a Store without it. Every implementation runs the
// snapshot tests of the conformance suite in storetest.
type SnapshotStore interface {
	Store

	// PutSnapshot stores snap, the snapshot at tree size size, replacing
	// the one stored. It MUST refuse, wrapping ErrConflict and storing
	// nothing, a size beyond the stored tree size. It MUST be atomic:
	// after any crash, Snapshot returns the old snapshot whole or the new
	// one whole. It need not be durable when it returns (a lost snapshot
	// costs the next Open a longer scan, nothing more), but once Close has
	// returned the store opened again MUST return it. A Store that
	// fences writers (storage/postgres) MUST refuse it from a fenced one,
	// as Commit.
	PutSnapshot(ctx context.Context, size uint64, snap []byte) error

	// Snapshot returns the stored snapshot and its size, or ErrNotFound
	// if none was stored. The caller checks it (its checksum, its size
	// against the tree, its root against the tiles).
	Snapshot(ctx context.Context) (size uint64, snap []byte, err error)
}

// State is a Store's durable state.
type State struct {
	// Size is the number of entries stored.
	Size uint64
	// Checkpoint is the latest signed checkpoint (nil if none), for tree
	// size CheckpointSize.
	Checkpoint     []byte
	CheckpointSize uint64
}

// Batch is one group commit.
type Batch struct {
	// Start is the index of Entries[0], which must equal the stored size.
	Start uint64
	// Entries are the entries' bytes (their Merkle leaves).
	Entries [][]byte
	// LeafHashes[i] is the RFC 6962 leaf hash of Entries[i].
	LeafHashes [][HashSize]byte
	// Tiles replace the stored tiles at the same (Level, Index), which
	// they extend: a tile only grows, so each begins with the hashes
	// stored. A Store may refuse, wrapping ErrConflict, one that does
	// not (the badger store does: its frames hold only the hashes a
	// batch adds).
	Tiles []Tile
	// Keys, if not empty, holds one idempotency key per entry (empty for
	// an entry without one); IndexOfKey finds the entry by its key.
	Keys [][]byte
}

// Tile is a tile of the Merkle tree in the C2SP tlog-tiles layout: the
// hashes at tree level TileHeight*Level with indices
// TileWidth*Index ... TileWidth*Index+len(Hashes)/HashSize-1.
type Tile struct {
	Level  uint8
	Index  uint64
	Hashes []byte // 1 to TileWidth hashes, concatenated
}

// TileInTree reports whether the tree of size entries has the tile at
// (level, index): whether it has a node at tree level TileHeight·level
// whose index is at least TileWidth·index. Those are the tiles a Store
// holds after the ledger's batches; one it does not hold was lost.
func TileInTree(size uint64, level uint8, index uint64) bool {
	if uint(level)*TileHeight >= 64 {
		return false
	}
	n := size >> (TileHeight * uint(level)) // nodes at that tree level
	return n > 0 && index <= (n-1)/TileWidth
}

// Check refuses, wrapping ErrConflict, a batch that no Store may commit
// whatever it holds: an empty one, one whose entries and leaf hashes differ
// in number, whose keys are neither none nor one per entry, that repeats a
// non-empty idempotency key, or with a tile that is not 1 to TileWidth
// hashes. Every Store calls it before writing anything, so that all refuse
// malformed batches alike.
func (b Batch) Check() error {
	if len(b.Entries) == 0 {
		return fmt.Errorf("ledger: batch at %d is empty: %w", b.Start, ErrConflict)
	}
	if len(b.Entries) != len(b.LeafHashes) {
		return fmt.Errorf("ledger: batch at %d has %d entries but %d leaf hashes: %w",
			b.Start, len(b.Entries), len(b.LeafHashes), ErrConflict)
	}
	if len(b.Keys) != 0 && len(b.Keys) != len(b.Entries) {
		return fmt.Errorf("ledger: batch at %d has %d entries but %d keys: %w",
			b.Start, len(b.Entries), len(b.Keys), ErrConflict)
	}
	seen := map[string]bool{}
	for _, k := range b.Keys {
		if len(k) > 0 && seen[string(k)] {
			return fmt.Errorf("ledger: batch at %d repeats an idempotency key: %w", b.Start, ErrConflict)
		}
		seen[string(k)] = true
	}
	for _, t := range b.Tiles {
		if n := len(t.Hashes); n == 0 || n%HashSize != 0 || n > TileWidth*HashSize {
			return fmt.Errorf("ledger: batch at %d: tile %d/%d has %d bytes, not 1 to %d hashes: %w",
				b.Start, t.Level, t.Index, n, TileWidth, ErrConflict)
		}
	}
	return nil
}
