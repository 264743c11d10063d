package badger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/decisionledger/ledger/ledger"
)

// Full tiles live in plain files, one per level, in the store's tiles/
// directory, written with pwrite and read with pread; badger keeps only
// partial tiles. A full tile never changes once the tree has grown past
// it, and there is one for every 256 entries at level 0: in badger, whose
// tables are memory-mapped and written through the mapping, each would
// stay resident in the process for as long as its table lives, so the
// process's RSS grew with the log (docs/log.md §5, docs/performance.md
// "Memory"). Read with pread, their pages are the kernel's page cache.
//
// The file of level L, tiles/level-L, is an array of slots of
// tileSlotSize bytes: slot N holds full tile L/N, its 8,192 bytes and then
// their CRC-32C (Castagnoli), big-endian. A slot of zeros, a hole or
// beyond the end of the file, holds no tile (the CRC-32C of 8,192 bytes is
// never 0 for zero bytes, so a stored tile is never all zeros); when the
// tree has that tile and badger holds no version of it either, the tile
// was lost, and Store.Tile reports damage (ledger.TileInTree). Any other
// slot whose checksum fails is damage, and so is a file shorter than this
// process wrote it.
//
// Tiles are derived from the frames, which are the durable copy: the
// indexer writes a frame's full tiles here without a sync, and syncs the
// files before the index records, with the "tiles" mark, that the tiles
// of the frames up to a log position are stored. Open replays the tiles of
// the frames after that mark, rewriting those the files may have lost.
const (
	tilesDir     = "tiles"
	tileBytes    = ledger.TileWidth * ledger.HashSize
	tileSlotSize = tileBytes + 4
	// maxTileLevel is the highest tile level of a tree of up to 2^64
	// entries: level L's hashes are at tree level 8L.
	maxTileLevel = 64/ledger.TileHeight - 1
)

// tileFiles are the full-tile files of a store.
type tileFiles struct {
	dir string

	// mu is held for writing while a slot is written, so that a reader
	// never sees a slot half written (the overlay serves a full tile until
	// its slot is written, but a reader that found no version there may
	// get here while the tile's slot is being written).
	mu    sync.RWMutex
	files [maxTileLevel + 1]*os.File
	sizes [maxTileLevel + 1]int64 // of the files, as this process wrote them
	// dirty says which files were written since the last sync; only the
	// writer's goroutine touches it.
	dirty [maxTileLevel + 1]bool
}

func tileFileName(level uint8) string { return fmt.Sprintf("level-%d", level) }

// openTileFiles opens the tile files in dir, creating dir if need be.
func openTileFiles(dir string) (*tileFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ledger: creating the tiles directory: %w", err)
	}
	tf := &tileFiles{dir: dir}
	for level := range tf.files {
		f, err := os.OpenFile(filepath.Join(dir, tileFileName(uint8(level))), os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			tf.close()
			return nil, fmt.Errorf("ledger: opening a tile file: %w", err)
		}
		info, err := f.Stat()
		if err != nil {
			f.Close()
			tf.close()
			return nil, fmt.Errorf("ledger: opening a tile file: %w", err)
		}
		tf.files[level], tf.sizes[level] = f, info.Size()
	}
	return tf, nil
}

// write stores full tile level/index. Called by one goroutine at a time
// (the indexer, or Open before it starts).
func (tf *tileFiles) write(level uint8, index uint64, hashes []byte) error {
	if len(hashes) != tileBytes {
		return fmt.Errorf("ledger: tile %d/%d of %d bytes is not full", level, index, len(hashes))
	}
	slot := make([]byte, tileSlotSize)
	copy(slot, hashes)
	binary.BigEndian.PutUint32(slot[tileBytes:], crc32.Checksum(hashes, castagnoli))
	return tf.writeSlot(level, index, slot)
}

// clear removes full tile level/index if the files hold it: a partial
// version replaced it (the ledger never does that, but the Store contract
// allows it, and replaying frames after a crash rewrites earlier
// versions before later ones).
func (tf *tileFiles) clear(level uint8, index uint64) error {
	if level > maxTileLevel || !tf.within(level, index) {
		return nil
	}
	return tf.writeSlot(level, index, make([]byte, tileSlotSize))
}

func (tf *tileFiles) within(level uint8, index uint64) bool {
	tf.mu.RLock()
	defer tf.mu.RUnlock()
	return index < uint64(tf.sizes[level])/tileSlotSize
}

func (tf *tileFiles) writeSlot(level uint8, index uint64, slot []byte) error {
	if level > maxTileLevel || index > (1<<62)/tileSlotSize {
		return fmt.Errorf("ledger: tile %d/%d is beyond any tree", level, index)
	}
	off := int64(index) * tileSlotSize
	tf.mu.Lock()
	defer tf.mu.Unlock()
	f := tf.files[level]
	if f == nil {
		var err error
		f, err = os.OpenFile(filepath.Join(tf.dir, tileFileName(level)), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("ledger: creating a tile file: %w", err)
		}
		// The file's name must survive a crash as well as its bytes.
		if err := syncDir(tf.dir); err != nil {
			f.Close()
			return err
		}
		tf.files[level] = f
	}
	if _, err := f.WriteAt(slot, off); err != nil {
		return fmt.Errorf("ledger: writing tile %d/%d: %w", level, index, err)
	}
	tf.sizes[level] = max(tf.sizes[level], off+tileSlotSize)
	tf.dirty[level] = true
	return nil
}

// read returns full tile level/index, or false if the files do not hold it.
func (tf *tileFiles) read(level uint8, index uint64) ([]byte, bool, error) {
	if level > maxTileLevel {
		return nil, false, nil
	}
	tf.mu.RLock()
	defer tf.mu.RUnlock()
	if index >= uint64(tf.sizes[level])/tileSlotSize {
		return nil, false, nil
	}
	slot := make([]byte, tileSlotSize)
	switch _, err := tf.files[level].ReadAt(slot, int64(index)*tileSlotSize); {
	case errors.Is(err, io.EOF):
		return nil, false, fmt.Errorf("%w: tile %d/%d: %s is shorter than the %d bytes written to it", ledger.ErrCorrupt, level, index,
			filepath.Join(tf.dir, tileFileName(level)), tf.sizes[level])
	case err != nil:
		return nil, false, fmt.Errorf("ledger: reading tile %d/%d: %w", level, index, err)
	}
	hashes, sum := slot[:tileBytes], binary.BigEndian.Uint32(slot[tileBytes:])
	if crc32.Checksum(hashes, castagnoli) == sum {
		return hashes, true, nil
	}
	if sum == 0 && allZero(hashes) {
		return nil, false, nil
	}
	return nil, false, fmt.Errorf("%w: tile %d/%d fails its checksum in %s", ledger.ErrCorrupt, level, index,
		filepath.Join(tf.dir, tileFileName(level)))
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// sizes returns the files' sizes, u64 each, level 0 first, as this
// process wrote them.
func (tf *tileFiles) sizesRecord() []byte {
	tf.mu.RLock()
	defer tf.mu.RUnlock()
	var b []byte
	for _, n := range tf.sizes {
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return b
}

// checkSizes refuses files shorter than record (sizesRecord's, as
// synced): a tile file lost or cut short after the tiles mark covered it.
func (tf *tileFiles) checkSizes(record []byte) error {
	if len(record) != 8*len(tf.sizes) {
		return fmt.Errorf("%w: the record of the tile files' sizes is %d bytes", ledger.ErrCorrupt, len(record))
	}
	for level, n := range tf.sizes {
		if want := int64(binary.BigEndian.Uint64(record[8*level:])); n < want {
			return fmt.Errorf("%w: %s holds %d bytes, but %d were written and synced", ledger.ErrCorrupt,
				filepath.Join(tf.dir, tileFileName(uint8(level))), n, want)
		}
	}
	return nil
}

// sync makes every tile written since the last sync durable.
func (tf *tileFiles) sync() error {
	tf.mu.RLock()
	defer tf.mu.RUnlock()
	for level, f := range tf.files {
		if !tf.dirty[level] {
			continue
		}
		if err := syncData(f); err != nil {
			return fmt.Errorf("ledger: syncing tile file %s: %w", tileFileName(uint8(level)), err)
		}
	}
	for level := range tf.dirty {
		tf.dirty[level] = false
	}
	return nil
}

func (tf *tileFiles) close() error {
	var errs []error
	for level, f := range tf.files {
		if f != nil {
			errs = append(errs, f.Close())
			tf.files[level] = nil
		}
	}
	return errors.Join(errs...)
}
