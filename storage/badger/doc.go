// Package badger is the default ledger.Store: a log kept in one
// directory of one machine, durable when Commit returns, and the store
// ledgerd opens in its store_dir. docs/log.md §5 specifies what it
// writes; this is its summary.
//
// # Layout
//
// A store's directory holds:
//
//   - frames/, the frame log: one checksummed frame per Commit (the
//     batch's entries, leaf hashes and idempotency keys, and the hashes
//     it adds to the tiles above level 0: a level-0 tile's are the leaf
//     hashes), appended to segment files with one write and one
//     fdatasync. It is the durable copy of the log; its byte layout is
//     in framelog.go. Frames written before that delta format, each
//     tile whole, are read as ever.
//   - index/, a badger database indexing the frames (partial tiles, the
//     tree size and the marks of how far the files below are complete),
//     written behind the frames without a sync of its own; its key
//     layout is on Store.
//   - tiles/, the full tiles, one file per level, written with pwrite and
//     read with pread, so that their pages are the kernel's page cache
//     rather than the process's memory (badger maps its tables); their
//     layout is in tilefile.go.
//   - leaves/, the leaf-hash index but for the entries after its last
//     run: sorted runs of leaf hashes, written whole and read with
//     pread, for the same reason; their layout is in runindex.go.
//   - keys/, the idempotency-key index but for the entries after its
//     last run: sorted runs of the keys' SHA-256, in the same layout, so
//     that the keys are kept for the life of the log at a resident cost
//     of 8 bytes per 102 keys.
//
// The leaf hashes and keys of the entries after the runs (at most 16,384
// entries' and a frame's) are held in memory, not written anywhere: Open
// rebuilds them from the frames after the runs' end, whose position the
// runs' marks in badger record (window.go).
//   - checkpoints/, the checkpoint history: every signed checkpoint,
//     appended to a file of checksummed records, synced before
//     AddCheckpoint returns, with a dense index of fixed records beside
//     it, which open makes whole again from the records after a crash;
//     both are read with pread, for the same reason; their layout is in
//     cphistory.go.
//   - locations, where each entry's bytes are in the frame log, with
//     their length and CRC-32C: a record of 20 bytes per entry, under a
//     checksum of its own, written with pwrite and read with pread, for
//     the same reason; its layout is in locfile.go. A store written
//     before it, its locations in badger, has them moved at Open.
//   - checkpoint, the latest signed checkpoint with its tree size and a
//     CRC-32C, replaced whole and synced before the history records it
//     (cpfile.go), so that no loss of the history or the index loses the
//     latest signed checkpoint.
//
// # Guarantees
//
// Open takes an exclusive flock on the directory, refusing at once, and
// changing nothing, while another Store holds it. It re-indexes every
// frame the index lost in a crash, erases a frame whose write a crash cut
// short (never acknowledged), cuts a checkpoint a crash cut short at the
// end of the history (never acknowledged either) and makes the history's
// index whole, restores either copy of the latest signed checkpoint from
// the other, moves the checkpoints, entry locations, and latest leaf
// hashes and keys of a store written before the history, the locations
// file and the windows in memory out of badger, says what it
// repaired (Store.Repairs), and refuses, wrapping ledger.ErrCorrupt, a
// frame log that is damaged, does not continue the index, or holds fewer
// entries than the latest signed checkpoint, and a checkpoint history
// damaged at its end. Reads report what they find damaged, or lost (a
// tile of the tree in neither a tile file nor the index, the location
// record of an entry below the tree size), as ledger.ErrCorrupt, never as
// ledger.ErrNotFound. Commit refuses, wrapping ledger.ErrConflict, a
// batch whose tile does not extend the stored tile (a frame holds only
// the hashes a batch adds to it). Store.Check (ledgerd fsck) reads every frame,
// entry, location record, index record, tile, checkpoint and badger table
// against its checksum and against each other.
//
// Commit refuses a batch, writing nothing and wrapping ErrNoSpace, while
// the file system has less than Options.ReserveBytes free: badger writes
// through memory-mapped files, and a write into a mapping on a full disk
// kills the process instead of failing. Below half of it (at most 64
// MiB), which only other writers can cause, the store writes nothing to
// badger: the indexer waits for space, AddCheckpoint and Open refuse,
// wrapping ErrNoSpace, and Close leaves the index for the next Open to
// recover from the frame log. Directories are made 0700 and files 0600.
//
// The store passes storage/storetest, the Store conformance suite; this
// package's tests cut frames short and damage them as crashes and disks
// do, and package ledger's TestCrash kills a process appending to it with
// SIGKILL and checks that every acknowledged entry survives.
package badger
