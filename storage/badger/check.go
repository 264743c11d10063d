package badger

import (
	"context"
	"crypto/sha256"
	"fmt"

	badgerdb "github.com/dgraph-io/badger/v4"

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
//   - every entry's location and checksum in the index against its frame;
//   - every idempotency key in the index against its frame;
//   - every stored tile against the version of it the last frame to
//     write it holds;
//   - the checksum of every badger table.
//
// Check reads the frames durable when it starts; it does not hold back
// commits. Whether the entries are signed and the tiles are the tree of
// the entries is the ledger's to check (ledger.Check).
func (s *Store) Check(ctx context.Context) error {
	if err := s.verifyTables(); err != nil {
		return fmt.Errorf("%w: the index: %w", ledger.ErrCorrupt, err)
	}
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
	for i, seg := range segments {
		for off := int64(0); off < ends[i] && next < size; {
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
					ledger.ErrCorrupt, pos, segmentName(seg.first), off, next)
			}
			b, locs, err := decodeFrame(payload)
			if err != nil {
				return fmt.Errorf("%w: frame at log position %d: %w", ledger.ErrCorrupt, pos, err)
			}
			if b.Start != next {
				return fmt.Errorf("%w: frame at log position %d starts at entry %d, not %d", ledger.ErrCorrupt, pos, b.Start, next)
			}
			for i := range locs {
				locs[i].pos += pos
			}
			if err := s.checkFrame(ctx, pos, b, locs); err != nil {
				return err
			}
			for _, t := range b.Tiles {
				tiles[tileID{t.Level, t.Index}] = tileVersion{sha256.Sum256(t.Hashes), pos}
			}
			next += uint64(len(b.Entries))
			off += frameHeaderSize + int64(len(payload))
		}
	}
	if next != size {
		return fmt.Errorf("%w: the frames hold %d entries, the store %d", ledger.ErrCorrupt, next, size)
	}
	for id, v := range tiles {
		stored, err := s.Tile(ctx, id.level, id.index)
		if err != nil {
			return fmt.Errorf("%w: tile %d/%d, written by the frame at log position %d: %w", ledger.ErrCorrupt, id.level, id.index, v.pos, err)
		}
		if sha256.Sum256(stored) != v.sum {
			return fmt.Errorf("%w: tile %d/%d: the stored tile is not the version the frame at log position %d wrote, the last to write it",
				ledger.ErrCorrupt, id.level, id.index, v.pos)
		}
	}
	return nil
}

type tileVersion struct {
	sum [sha256.Size]byte
	pos int64 // of the frame that wrote it
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
	for i, e := range b.Entries {
		index := b.Start + uint64(i)
		if leaf := sha256.Sum256(append([]byte{0}, e...)); leaf != b.LeafHashes[i] {
			return fmt.Errorf("%w: frame at log position %d: entry %d's leaf hash is not the hash of its bytes", ledger.ErrCorrupt, pos, index)
		}
		if got, err := s.IndexOf(ctx, b.LeafHashes[i]); err != nil || got != index {
			return fmt.Errorf("%w: entry %d: the leaf-hash index gives %d (%v)", ledger.ErrCorrupt, index, got, err)
		}
		loc, err := s.location(index)
		if err != nil {
			return err
		}
		if loc != locs[i] {
			return fmt.Errorf("%w: entry %d: the index locates it at log position %d (%d bytes, CRC %08x), its frame at %d (%d bytes, CRC %08x)",
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

// location returns where the index (the overlay's, or badger's) says the
// entry at index is.
func (s *Store) location(index uint64) (entryLocation, error) {
	if loc, pending := s.ov.location(index); pending {
		return loc, nil
	}
	var loc entryLocation
	err := s.db.View(func(txn *badgerdb.Txn) error {
		start, locs, err := frameOf(txn, index)
		if err == nil {
			loc = locs[index-start]
		}
		return err
	})
	if err != nil {
		return entryLocation{}, fmt.Errorf("ledger: locating entry %d: %w", index, err)
	}
	return loc, nil
}
