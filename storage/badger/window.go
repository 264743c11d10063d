package badger

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/decisionledger/ledger/ledger"
)

// The window of a runIndex is the records of the entries after its runs:
// held in memory, not written anywhere, and rebuilt at Open from the
// frame log, which holds every entry's leaf hash and key. It is a map
// from a record's hash (a leaf hash, or the SHA-256 of an idempotency
// key) to the lowest index under it, filled by the indexer as it indexes
// each frame (Store.index), read by lookups after the runs, and drained
// when its records are written as a run: the run file written and
// synced, then added to the runs and the window emptied in one step
// under the index's lock, so that a lookup finds an entry in one or the
// other. A crash between the run and the mark that records it loses
// nothing: the run file is durable, and the window is rebuilt from the
// frames after the runs' end, whatever the mark says.
//
// Once runSize entries follow the runs, the indexer writes the window as
// a run after the frame that brought it there: it holds at most runSize
// entries' records and one frame's. A record costs 66 to 96 bytes
// resident (a map slot of 40 bytes and a control byte; the map doubles
// its slots as it grows, and is at its emptiest, 96, at runSize entries):
// 1.5 MiB for a leaf-hash window of runSize entries
// (TestBadgerWindowBytes), and as much again for keys if every entry has
// one. The map keeps its slots when emptied, for the next run's records.
// Stores written before it kept the window in badger ('h' and 'k' keys),
// which Open moves to a run (openWindow).
//
// The mark of a kind ('m' "leaves", 'm' "keys") is 16 bytes: the entry
// up to which runs were written, and the log position of the frame that
// holds that entry (the runs end at a frame's end: the position is that
// of the next frame). Open reads the frames from there to rebuild the
// window; a mark lost in a crash, badger being written without a sync,
// is an older one, whose frames start earlier: more are read, none is
// missed. An 8-byte mark, the entry alone, is of a store from before the
// window was held in memory.

// markSize is the size of a run mark's value; oldMarkSize, before the
// window held in memory.
const (
	markSize    = 16
	oldMarkSize = 8
)

// readRunMark returns the run mark at key: the entry the runs reach and
// the log position of the frame that holds it (posKnown false for a mark
// of the older layout, which has no position), and whether it is stored.
func readRunMark(txn *badgerdb.Txn, key []byte) (end uint64, pos int64, posKnown, ok bool, err error) {
	item, err := txn.Get(key)
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		return 0, 0, false, false, nil
	}
	if err != nil {
		return 0, 0, false, false, err
	}
	err = item.Value(func(v []byte) error {
		switch len(v) {
		case markSize:
			end, pos, posKnown = binary.BigEndian.Uint64(v), int64(binary.BigEndian.Uint64(v[8:])), true
		case oldMarkSize:
			end = binary.BigEndian.Uint64(v)
		default:
			return fmt.Errorf("%w: the index's run mark %q is %d bytes, not %d", ledger.ErrCorrupt, key[1:], len(v), markSize)
		}
		return nil
	})
	return end, pos, posKnown, err == nil, err
}

// addToWindow records in the window the records of the n entries from
// start that rec gives (ok false: the entry has none, an entry without a
// key), keeping the lowest index under a hash. Entries below the runs'
// end are left out: a frame indexed again after a crash may be in the
// runs already. Called by one goroutine at a time (the indexer, or Open).
func (ri *runIndex) addToWindow(start uint64, n int, rec func(i int) ([ledger.HashSize]byte, bool)) {
	ri.winMu.Lock()
	defer ri.winMu.Unlock()
	for i := range n {
		index := start + uint64(i)
		if index < ri.from {
			continue
		}
		h, ok := rec(i)
		if !ok {
			continue
		}
		if old, ok := ri.window[h]; ok && old <= index {
			continue
		}
		ri.window[h] = index
	}
}

// inWindow returns the index the window holds under h.
func (ri *runIndex) inWindow(h [ledger.HashSize]byte) (uint64, bool) {
	ri.winMu.RLock()
	defer ri.winMu.RUnlock()
	i, ok := ri.window[h]
	return i, ok
}

// indexed tells the index that the window holds the records of every
// entry below size, the frame that holds entry size starting at log
// position pos (called after each frame is indexed); it writes the
// window as a run when runSize entries follow the runs.
func (ri *runIndex) indexed(db *badgerdb.DB, size uint64, pos int64) error {
	ri.mu.RLock()
	err := ri.err
	ri.mu.RUnlock()
	ri.winMu.RLock()
	from := ri.from
	ri.winMu.RUnlock()
	if err != nil || size <= from || size-from < runSize {
		return err
	}
	return ri.flushWindow(db, size, pos)
}

// flushWindow writes the window, the records of the entries from the
// runs' end up to size, as a run, then drops it, and records the run in
// the mark with pos, the log position of the frame holding entry size.
// Only the goroutine that fills the window calls it.
func (ri *runIndex) flushWindow(db *badgerdb.DB, size uint64, pos int64) error {
	ri.winMu.RLock()
	first := ri.from
	recs := make([]runRecord, 0, len(ri.window))
	for h, i := range ri.window {
		recs = append(recs, runRecord{hash: h, index: i})
	}
	ri.winMu.RUnlock()
	slices.SortFunc(recs, compareRecords)
	r, err := ri.createRun(first, size, func(add func(runRecord) error) error {
		for _, rec := range recs {
			if err := add(rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Lookups hold mu while they read the runs and then the window: they
	// find these entries in one or the other.
	ri.mu.Lock()
	ri.runs = append(ri.runs, r)
	ri.winMu.Lock()
	ri.dropWindow(size)
	ri.winMu.Unlock()
	ri.startMerger()
	ri.mu.Unlock()
	return ri.written(db, size, pos)
}

// dropWindow empties the window, which starts at entry from now. Called
// with winMu held. The map keeps its slots for the next run's records,
// unless one large frame grew it beyond two runs' worth.
func (ri *runIndex) dropWindow(from uint64) {
	if ri.window == nil || uint64(len(ri.window)) > 2*runSize {
		ri.window = make(map[[ledger.HashSize]byte]uint64)
	} else {
		clear(ri.window)
	}
	ri.from = from
}

// written records in badger that the runs reach end, the runs being
// durable, so that a run file lost later is found missing at Open, and
// where the frame holding entry end starts, for Open to rebuild the
// window from.
func (ri *runIndex) written(db *badgerdb.DB, end uint64, pos int64) error {
	v := binary.BigEndian.AppendUint64(nil, end)
	v = binary.BigEndian.AppendUint64(v, uint64(pos))
	if err := db.Update(func(txn *badgerdb.Txn) error { return txn.Set(ri.kind.mark, v) }); err != nil {
		return fmt.Errorf("ledger: recording the %s runs' end in the index: %w", ri.kind.what, err)
	}
	return nil
}

// openWindow checks that ri's runs reach its mark, starts its window at
// the runs' end and returns the log position from which the frames must
// be read to fill it: the mark's, or 0 if there is none (no run written
// yet, or the mark lost with the index, whose frames are all indexed
// again). A store from before the window held in memory has the records
// of the entries after the runs in badger (and maybe some below, left by
// a crash): it writes those as runs (one, or one per sortChunk entries
// for a kind badger does not keep in order), records the runs' end with
// badger's log end, where the frames of the window start now, and drops
// the kind's keys. A crash between any two of these steps leaves what
// the next Open finishes: runs it does not write again, keys it drops.
func (s *Store) openWindow(ctx context.Context, ri *runIndex, log *slog.Logger) (int64, error) {
	var indexed, logEnd, mark uint64
	var pos int64
	var posKnown, marked, inBadger bool
	err := s.db.View(func(txn *badgerdb.Txn) error {
		var err error
		if mark, pos, posKnown, marked, err = readRunMark(txn, ri.kind.mark); err != nil {
			return err
		}
		if indexed, _, err = getUint64(txn, keySize); err != nil {
			return err
		}
		if logEnd, _, err = getUint64(txn, keyLogEnd); err != nil {
			return err
		}
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{ri.kind.prefix}})
		defer it.Close()
		it.Rewind()
		inBadger = it.Valid()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("ledger: reading the index: %w", err)
	}
	// The merger may be running already (merges a close cut short), so
	// the runs are read under the index's lock.
	end := ri.runsEnd()
	if end < mark {
		return 0, fmt.Errorf("%w: the %s runs in %s reach entry %d, but runs up to %d were written", ledger.ErrCorrupt, ri.kind.what, ri.kind.dir, end, mark)
	}
	if !inBadger && (posKnown || !marked) {
		ri.winMu.Lock()
		ri.dropWindow(end)
		ri.winMu.Unlock()
		if !marked {
			return 0, nil
		}
		return min(pos, int64(logEnd)), nil
	}
	// The window of an older store, in badger.
	moved := indexed > end
	for first := end; first < indexed; {
		chunk := indexed
		if !ri.kind.sorted {
			chunk = min(indexed, first+sortChunk)
		}
		r, err := ri.createRun(first, chunk, func(add func(runRecord) error) error {
			return ri.badgerRecords(s.db, first, chunk, add, func(*badgerdb.Item, runRecord) {})
		})
		if err != nil {
			return 0, err
		}
		ri.mu.Lock()
		ri.runs = append(ri.runs, r)
		ri.startMerger()
		ri.mu.Unlock()
		first = chunk
	}
	end = max(end, indexed)
	if err := ri.written(s.db, end, int64(logEnd)); err != nil {
		return 0, err
	}
	if err := s.db.DropPrefix([]byte{ri.kind.prefix}); err != nil {
		return 0, fmt.Errorf("ledger: dropping the %s keys written to runs from badger: %w", ri.kind.what, err)
	}
	ri.winMu.Lock()
	ri.dropWindow(end)
	ri.winMu.Unlock()
	if moved {
		log.InfoContext(ctx, "ledger: moved the "+ri.kind.what+" index of the latest entries from badger to runs",
			slog.Uint64("entries", indexed), slog.String("dir", ri.kind.dir))
	}
	return int64(logEnd), nil
}

// windowRebuild fills the windows at Open from the frames that badger
// indexed already, from log position from, the least of the marks'
// (openWindow), on (recover reads them; it indexes the frames after
// them, which fills the windows with theirs). A window that reaches
// runSize entries is written as a run (a crash between the index of a
// frame and its run).
type windowRebuild struct {
	from    int64
	started bool
}

// frame adds the leaf hashes and keys of b, the frame at log position
// pos ending at end, to the windows if it is at or after from; the first
// such frame must hold each window's first entry, or start before it.
func (w *windowRebuild) frame(s *Store, pos, end int64, b ledger.Batch) error {
	if pos < w.from {
		return nil
	}
	if !w.started {
		for _, ri := range []*runIndex{s.leaves, s.keys} {
			if ri.from < b.Start {
				return fmt.Errorf("%w: the frame at log position %d, from which the %s runs' mark says to read the entries after the runs, starts at entry %d, after the runs' end %d",
					ledger.ErrCorrupt, pos, ri.kind.what, b.Start, ri.from)
			}
		}
		w.started = true
	}
	return s.addToWindows(b, len(b.Entries), end)
}

// addToWindows adds to the windows the leaf hashes and keys of the n
// entries of b, whose frame ends at log position end, and writes a
// window as a run if it reached runSize entries.
func (s *Store) addToWindows(b ledger.Batch, n int, end int64) error {
	s.leaves.addToWindow(b.Start, n, func(i int) ([ledger.HashSize]byte, bool) { return b.LeafHashes[i], true })
	if len(b.Keys) > 0 {
		s.keys.addToWindow(b.Start, n, func(i int) ([ledger.HashSize]byte, bool) {
			if len(b.Keys[i]) == 0 {
				return [ledger.HashSize]byte{}, false
			}
			return keyHash(b.Keys[i]), true
		})
	}
	size := b.Start + uint64(n)
	if err := s.leaves.indexed(s.db, size, end); err != nil {
		return err
	}
	return s.keys.indexed(s.db, size, end)
}
