package badger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"runtime"
	"sync"

	"github.com/decisionledger/ledger/ledger"
)

// Check reads the whole store and returns an error wrapping errCorrupt at
// the first thing that is not as written. Open and reads check only what
// they touch; Check looks at everything the store keeps:
//
//   - every frame's checksum, and each entry's own, from the first byte of
//     the frame log to its end;
//   - that the frames follow each other, index after index, up to the
//     tree size;
//   - every entry's leaf hash in its frame against the hash of its bytes,
//     and the leaf-hash index against it;
//   - every entry's location and checksum in the locations file
//     (locfile.go) against its frame;
//   - every idempotency key in the index against its frame, and that the
//     idempotency-key runs hold as many records as the frames before
//     their end hold keys (every block read against its checksum);
//   - every stored tile against the version of it the frames make, each
//     adding its hashes to the version the frames before it left;
//   - every checkpoint of the checkpoint history against its checksums,
//     the sizes increasing and none above the tree size, and the latest
//     against the checkpoint file;
//   - the checksum of every badger table.
//
// Check reads the frames durable when it starts; it does not hold back
// commits. Whether the entries are signed and the tiles are the tree of
// the entries is the ledger's to check (ledger.Check).
func (s *Store) Check(ctx context.Context) error {
	return s.CheckProgress(ctx, nil)
}

// CheckProgress is Check, calling progress, if not nil, from the
// caller's goroutine after each frame read, with the entries read so far
// and the store's size, for a progress line.
func (s *Store) CheckProgress(ctx context.Context, progress func(done, total uint64)) error {
	if err := s.verifyTables(); err != nil {
		return fmt.Errorf("%w: the index: %w", ledger.ErrCorrupt, err)
	}
	// Before the size: the runs end below it.
	keysEnd, keyRecords, err := s.keys.scan()
	if err != nil {
		return err
	}
	var keys uint64 // in the frames, of the entries below keysEnd
	size := s.ov.durableSize()
	s.log.mu.RLock()
	segments := append([]*segment(nil), s.log.segments...)
	ends := make([]int64, len(segments))
	for i, seg := range segments {
		ends[i] = seg.size
	}
	s.log.mu.RUnlock()
	var next uint64
	tiles := map[tileID]tileVersion{} // each tile's last version in the frames
	// The frames are read in order here; what the index says of each is
	// checked on every core (checkFrame, a few lookups per entry, is most
	// of the cost).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type job struct {
		pos  int64
		b    ledger.Batch
		locs []entryLocation
	}
	jobs := make(chan job, 4*runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	var failMu sync.Mutex
	var failed error
	fail := func(err error) {
		failMu.Lock()
		if failed == nil {
			failed = err
			cancel()
		}
		failMu.Unlock()
	}
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if ctx.Err() != nil {
					continue
				}
				if err := s.checkFrame(ctx, j.pos, j.b, j.locs); err != nil {
					fail(err)
				}
			}
		}()
	}
	err = func() error {
		defer func() {
			close(jobs)
			wg.Wait()
		}()
		return s.readFrames(ctx, segments, ends, size, &next, tiles, func(pos int64, b ledger.Batch, locs []entryLocation) {
			select {
			case jobs <- job{pos, b, locs}:
			case <-ctx.Done():
			}
			for i, k := range b.Keys {
				if len(k) > 0 && b.Start+uint64(i) < keysEnd {
					keys++
				}
			}
			if progress != nil {
				progress(b.Start+uint64(len(b.Entries)), size)
			}
		})
	}()
	if failed != nil {
		return failed
	}
	if err != nil {
		return err
	}
	if next != size {
		return fmt.Errorf("%w: the frames hold %d entries, the store %d", ledger.ErrCorrupt, next, size)
	}
	if keys != keyRecords {
		// Each frame's keys were found at their entries: the runs hold
		// records of no key.
		return fmt.Errorf("%w: the idempotency-key runs in %s hold %d records, the frames of their %d entries %d keys",
			ledger.ErrCorrupt, keysDir, keyRecords, keysEnd, keys)
	}
	if err := s.cps.check(s.dir, size); err != nil {
		return err
	}
	for id, v := range tiles {
		stored, err := s.Tile(ctx, id.level, id.index)
		if err != nil {
			return fmt.Errorf("%w: tile %d/%d, written by the frame at log position %d: %w", ledger.ErrCorrupt, id.level, id.index, v.pos, err)
		}
		if v.hashes != nil && !bytes.Equal(stored, v.hashes) || v.hashes == nil && sha256.Sum256(stored) != v.sum {
			return fmt.Errorf("%w: tile %d/%d: the stored tile is not the version the frame at log position %d left, the last to add to it",
				ledger.ErrCorrupt, id.level, id.index, v.pos)
		}
	}
	return nil
}

// readFrames reads the frames of segments (up to ends) in order, entry
// next on, up to size entries, checks that they follow each other, records
// the last version of each tile in tiles, rebuilt whole from the hashes
// each frame adds to it (framelog.go), and gives each frame to check.
func (s *Store) readFrames(ctx context.Context, segments []*segment, ends []int64, size uint64, next *uint64, tiles map[tileID]tileVersion,
	check func(pos int64, b ledger.Batch, locs []entryLocation)) error {
	for i, seg := range segments {
		for off := int64(0); off < ends[i] && *next < size; {
			if err := ctx.Err(); err != nil {
				return err
			}
			pos := seg.first + off
			view := segment{first: seg.first, size: ends[i], f: seg.f}
			payload, whole, err := readFrame(&view, pos)
			if err != nil {
				return err
			}
			if !whole {
				return fmt.Errorf("%w: no whole frame at log position %d (segment %s, offset %d), where the frame for entry %d begins",
					ledger.ErrCorrupt, pos, segmentName(seg.first), off, *next)
			}
			b, frameTiles, locs, err := decodeFrame(payload)
			if err != nil {
				return fmt.Errorf("%w: frame at log position %d: %w", ledger.ErrCorrupt, pos, err)
			}
			if b.Start != *next {
				return fmt.Errorf("%w: frame at log position %d starts at entry %d, not %d", ledger.ErrCorrupt, pos, b.Start, *next)
			}
			for i := range locs {
				locs[i].pos += pos
			}
			check(pos, b, locs)
			for _, ft := range frameTiles {
				id := tileID{ft.level, ft.index}
				hashes, err := ft.rebuild(tiles[id].hashes)
				if err != nil {
					return fmt.Errorf("%w: frame at log position %d: %w, in the frames before it", ledger.ErrCorrupt, pos, err)
				}
				if len(hashes) == tileBytes {
					// No later frame adds to it: its sum will do.
					tiles[id] = tileVersion{sum: sha256.Sum256(hashes), pos: pos}
				} else {
					tiles[id] = tileVersion{hashes: bytes.Clone(hashes), pos: pos}
				}
			}
			*next += uint64(len(b.Entries))
			off += frameHeaderSize + int64(len(payload))
		}
	}
	return nil
}

// tileVersion is a tile as the frames left it: a partial one's hashes, or
// a full one's SHA-256.
type tileVersion struct {
	hashes []byte // nil if full
	sum    [sha256.Size]byte
	pos    int64 // of the frame that wrote it last
}

// verifyTables checks every badger table's block checksums. Badger
// v4.9.6's DB.VerifyChecksum dereferences a nil block when a block fails
// its checksum under OnBlockRead; that panic is the finding.
func (s *Store) verifyTables() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("a table block fails its checksum (badger panicked reporting it: %v)", r)
		}
	}()
	return s.db.VerifyChecksum()
}

// checkFrame checks what the index and the tiles say of the frame at pos
// against the frame: its batch b, with its entries' locations.
func (s *Store) checkFrame(ctx context.Context, pos int64, b ledger.Batch, locs []entryLocation) error {
	indexed, err := s.frameLocations(b.Start, len(b.Entries))
	if err != nil {
		return err
	}
	for i, e := range b.Entries {
		index := b.Start + uint64(i)
		if leaf := sha256.Sum256(append([]byte{0}, e...)); leaf != b.LeafHashes[i] {
			return fmt.Errorf("%w: frame at log position %d: entry %d's leaf hash is not the hash of its bytes", ledger.ErrCorrupt, pos, index)
		}
		if got, err := s.IndexOf(ctx, b.LeafHashes[i]); err != nil || got != index {
			return fmt.Errorf("%w: entry %d: the leaf-hash index gives %d (%v)", ledger.ErrCorrupt, index, got, err)
		}
		if loc := indexed[i]; loc != locs[i] {
			return fmt.Errorf("%w: entry %d: the locations file locates it at log position %d (%d bytes, CRC %08x), its frame at %d (%d bytes, CRC %08x)",
				ledger.ErrCorrupt, index, loc.pos, loc.length, loc.crc, locs[i].pos, locs[i].length, locs[i].crc)
		}
		if len(b.Keys) > 0 && len(b.Keys[i]) > 0 {
			if got, err := s.IndexOfKey(ctx, b.Keys[i]); err != nil || got != index {
				return fmt.Errorf("%w: entry %d: the idempotency-key index gives %d (%v)", ledger.ErrCorrupt, index, got, err)
			}
		}
	}
	return nil
}

// frameLocations returns where the index (the overlay's, or the
// locations file) says the n entries from start, a frame's, are: from the
// file, with one read.
func (s *Store) frameLocations(start uint64, n int) ([]entryLocation, error) {
	locs := make([]entryLocation, n)
	if _, pending := s.ov.location(start); pending {
		for i := range locs {
			var err error
			if locs[i], err = s.location(start + uint64(i)); err != nil {
				return nil, err
			}
		}
		return locs, nil
	}
	if err := s.locations.read(start, locs); err != nil {
		return nil, fmt.Errorf("ledger: locating entry %d: %w", start, err)
	}
	return locs, nil
}

// location returns where the index (the overlay's, or the locations
// file) says the entry at index is.
func (s *Store) location(index uint64) (entryLocation, error) {
	if loc, pending := s.ov.location(index); pending {
		return loc, nil
	}
	var loc [1]entryLocation
	if err := s.locations.read(index, loc[:]); err != nil {
		return entryLocation{}, fmt.Errorf("ledger: locating entry %d: %w", index, err)
	}
	return loc[0], nil
}
