// Package ledger sequences and signs decision entries in an RFC 6962
// Merkle log, keeps the tree's tiles, publishes signed checkpoints and
// serves proofs, over a Store that keeps the bytes. docs/log.md is the
// specification of what it writes; this is its summary.
//
// # Appending
//
// Append takes a Record (a mediator's decision) from any goroutine and
// returns a Receipt once the entry is durable. One goroutine sequences:
// each record, as it arrives, gets the next index, a time (UTC,
// microseconds, never earlier than the entry before) and prev, the entry
// hash of the entry before (package entry). Its signature is then computed
// by a pool of workers, on every core, while the previous batch is being
// stored. Whenever the store is free, everything chained since the last
// batch is committed as one group: one write and one sync. Under
// concurrent load (the last batch held several entries) the next commit
// starts no sooner than MinCommitInterval after it, unless its batch
// fills, so that batches grow and each entry costs less.
// Receipts are sent only after that commit returns. A full queue refuses at
// once (ErrQueueFull); a storage failure stops all further appends
// (ErrClosed) until the ledger is reopened, because the store may be
// unable to say whether the failed batch became durable.
//
// # Tree and tiles
//
// The Merkle tree is RFC 6962's (SHA-256; leaf hash SHA-256(0x00 || entry
// bytes)). Its node hashes are stored as tiles in the C2SP tlog-tiles
// layout: tile (L, N) holds the hashes at tree level 8L with indices 256N
// to 256N+255; a partial tile holds the first W of them. Level 0 tiles hold
// the leaf hashes. Every other node is recomputed from the tile below it.
//
// # Checkpoints
//
// A checkpoint is a C2SP tlog-checkpoint (origin, tree size, base64 root
// hash), signed as a C2SP signed note by the ledger's key, whose name is
// the origin. A checkpoint is signed as soon as the tree has grown, but
// no sooner than CheckpointInterval (100 ms) after the previous one, and
// on demand (Publish): an idle log signs none. Before signing, Publish checks
// with a consistency proof read from the stored tiles that the new tree
// extends the latest signed one, so the ledger never signs two
// inconsistent checkpoints, across restarts too. Every checkpoint is kept.
//
// # Opening
//
// Open verifies the latest stored checkpoint's signature (by the key, or
// after a rotation by the keys, see Keys) and the root the stored tiles
// give at its size, then rehashes the entries made durable after it (none
// after a clean Close, which signs a final checkpoint; at most about one
// CheckpointInterval of appends after a crash), compares every tile they
// change with the stored one, and requires the stored right edge of the
// tree to be the one so rebuilt. Its cost does not grow with the log; it
// refuses to start if anything differs. The entries and full tiles the
// latest checkpoint covers are vouched for by its signature through the
// tiles above them, and are not read: Options.FullCheck (and ledgerd fsck)
// rehashes every stored entry and rebuilds every tile. Entries made
// durable after the latest checkpoint are kept, and a checkpoint is signed
// for them at once. The approval state is read from the store's approval
// snapshot (a SnapshotStore's; see snapshot.go) and the entries after it,
// or, without a usable one, from every entry.
//
// # Following
//
// Follow opens a read-only Ledger over a log that another process
// sequences on the same Store (several ledgerd instances on one database):
// it checks the store as Open does, less the rehashing of the entries
// after the latest checkpoint, starts no sequencer,
// signs nothing and never writes. It serves a view of the log (a durable
// size, the tree's right edge, the latest checkpoint): Size, Checkpoint,
// CheckpointAt, Entry, the proofs, Tile, EntryBundle, TlogProof, Export and
// WaitCheckpoint answer for the view. Append and Publish return an error
// wrapping ErrReadOnly; the approval state is the sequencer's, and a
// follower reports none. Refresh, and a goroutine every FollowInterval
// (200 ms) until Close, move the view to the store's state, all at once
// (a reader sees the old view or the new one), and only after checking
// it: the new latest checkpoint signed by the log's key, its root the one
// the stored tiles give, the stored tree at the view's checkpoint size
// still with the view's root, and a consistency proof from the tiles
// between the two checkpoints verified. A partial tile may have grown since
// the state was read (the sequencer does not wait for followers); its first
// hashes are the tree's. A store that fails a check is not followed: the
// view is kept, and a *FollowError (errors.Is ErrDiverged) naming both
// states is logged, returned by that Refresh and every later one, and
// reported by Failure. A store that cannot be read changes nothing.
//
// # Storage
//
// Store is the one storage interface; its contract is written in MUST
// words (store.go), and storage/storetest.Run is the conformance suite
// every implementation passes. This package holds no store: the stores are
// plug-ins in their own packages, which import this one for the contract,
// and any of them is passed to Open, Check and Rotate:
//
//   - storage/badger (badger.Open), the default, durable store of one
//     machine: each batch is one checksummed frame written and
//     fdatasync'd to a segment file, indexed by a badger database that a
//     reopen brings up to date with the frames (docs/log.md §5);
//   - storage/postgres (postgres.Open), the log in a PostgreSQL database;
//   - storage/memory (memory.New), for tests.
//
// A Store reports damage it finds in its own records as ErrCorrupt, as
// Open does for a stored tree that contradicts itself or a checkpoint.
//
// # Keys
//
// One Ed25519 key signs entries and checkpoints: a note-format private key
// file or an OpenSSH ed25519 key, optionally passphrase-protected; files
// readable by group or others are refused. Entries carry the key's id so
// keys can rotate: Rotate, with the ledger stopped, stores a checkpoint of
// the whole tree signed by the old key and the new one (same name, another
// key hash); entries appended afterwards carry the new key's id and later
// checkpoints are signed by the new key alone. Open takes the old verifier
// keys in Options.PreviousKeys and follows the keys back through the
// rotation checkpoints, refusing a history that a new key alone vouches
// for (rotation.go; docs/operations.md has the runbook).
package ledger
