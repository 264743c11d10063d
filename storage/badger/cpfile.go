package badger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/decisionledger/ledger/ledger"
)

// The checkpoint file keeps the latest signed checkpoint of a Store
// beside its frame log, where rebuilding the index cannot lose it: the
// frames hold every entry, but which tree sizes were signed is known only
// to this file and to badger. On open the store refuses a tree smaller
// than this checkpoint (its entries were lost: serving on would hand out
// their indices again and fork the log), and a torn frame it covers.
//
// The file, "checkpoint" in the store's directory, integers big-endian:
//
//	u64 tree size
//	u32 CRC-32C (Castagnoli) of the tree size's 8 bytes and the note
//	the signed checkpoint note, to the end of the file
//
// It is replaced whole: written to "checkpoint.tmp", synced, renamed over
// the old one, and the directory synced.
const (
	checkpointFile    = "checkpoint"
	checkpointTmpFile = "checkpoint.tmp"
	cpFileHeader      = 12
	// maxCheckpointFile bounds what open reads: a checkpoint note is a
	// few hundred bytes, a few KiB with cosignatures.
	maxCheckpointFile = 1 << 20
)

// writeCheckpointFile makes signed, the checkpoint for size, the content
// of dir's checkpoint file, durably.
func writeCheckpointFile(dir string, size uint64, signed []byte) error {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, cpFileHeader+len(signed)), size)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = append(b, signed...)
	binary.BigEndian.PutUint32(b[8:], checkpointFileCRC(b))
	tmp := filepath.Join(dir, checkpointTmpFile)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("ledger: writing the checkpoint file: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, checkpointFile))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("ledger: writing the checkpoint file: %w", err)
	}
	return nil
}

// readCheckpointFile returns the checkpoint in dir's checkpoint file, with
// its tree size; signed is nil if there is no file.
func readCheckpointFile(dir string) (size uint64, signed []byte, err error) {
	path := filepath.Join(dir, checkpointFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("ledger: reading the checkpoint file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, nil, fmt.Errorf("ledger: reading the checkpoint file: %w", err)
	}
	if info.Size() <= cpFileHeader || info.Size() > maxCheckpointFile {
		return 0, nil, fmt.Errorf("%w: the checkpoint file %s is %d bytes", ledger.ErrCorrupt, path, info.Size())
	}
	b := make([]byte, info.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return 0, nil, fmt.Errorf("ledger: reading the checkpoint file: %w", err)
	}
	if checkpointFileCRC(b) != binary.BigEndian.Uint32(b[8:]) {
		return 0, nil, fmt.Errorf("%w: the checkpoint file %s fails its checksum", ledger.ErrCorrupt, path)
	}
	return binary.BigEndian.Uint64(b), b[cpFileHeader:], nil
}

// checkpointFileCRC is the checksum of a checkpoint file's content b: its
// tree size and its note, the checksum field skipped.
func checkpointFileCRC(b []byte) uint32 {
	return crc32.Update(crc32.Checksum(b[:8], castagnoli), castagnoli, b[cpFileHeader:])
}
