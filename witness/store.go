// Where the witnesses' cosignatures are kept beyond one process's memory
// (docs/operations.md "Witnesses"): a File in store_dir for one ledgerd
// on badger, the database for instances on PostgreSQL
// (storage/postgres's cosignatures table), so that a restart, a new
// sequencer and the followers serve them.

package witness

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Store keeps the cosignature lines witnesses returned, by checkpoint
// size and witness key ID ("<name>+<key hash in hex>", as
// verify.WitnessKey.ID gives it). It verifies nothing: whoever reads a
// line verifies it with the witness's configured key before serving it.
// File and storage/postgres's Store are the implementations.
type Store interface {
	// PutCosignature keeps line, the cosignature line (C2SP
	// tlog-cosignature, ending in a newline) by the witness of key ID
	// witness of the checkpoint the log signed for size, replacing that
	// witness's line for size. The line MUST name witness's key (its
	// name and key hash). A size the log signed no checkpoint for MUST
	// be refused with an error, keeping nothing. Once it returns nil,
	// Cosignatures(size) MUST return the line, and LatestCosignatures
	// MUST give witness size or more, for as long as size is the largest
	// size put: older sizes MAY be dropped.
	PutCosignature(ctx context.Context, size uint64, witness string, line []byte) error
	// Cosignatures returns the lines kept for the checkpoint of size, by
	// witness key ID, as put; an empty map when none is. The caller may
	// keep and change the map and the lines.
	Cosignatures(ctx context.Context, size uint64) (map[string][]byte, error)
	// LatestCosignatures returns, for each witness with a line kept, the
	// largest size one is kept for.
	LatestCosignatures(ctx context.Context) (map[string]uint64, error)
}

// File is a Store in one file (ledgerd's store_dir/cosigned-checkpoint):
// the checkpoint of the largest size put with the cosignatures put for
// it, that is the signed checkpoint as the log stored it followed by the
// cosignature lines, a note that reads as the served one. The file is
// replaced, not synced: after a crash it may be lost or stale, and its
// lines then fail the readers' verification, or are of an older
// checkpoint (witnesses answer with the size they know). Puts of older
// sizes are ignored.
type File struct {
	path string
	// checkpointAt returns the signed checkpoint of a size
	// (Log.CheckpointAt).
	checkpointAt func(context.Context, uint64) ([]byte, error)

	mu     sync.Mutex
	loaded bool
	size   uint64
	lines  map[string][]byte // nil: nothing kept
}

// NewFile returns the File at path, of the log whose signed checkpoints
// checkpointAt returns by size (Log.CheckpointAt). The file is read when
// first used.
func NewFile(path string, checkpointAt func(context.Context, uint64) ([]byte, error)) *File {
	return &File{path: path, checkpointAt: checkpointAt}
}

// load reads the file once. It holds nothing unless it starts with the
// checkpoint the log stored for the size it names (a file left from
// another store, or a restored backup's, is ignored). Called with mu
// held.
func (f *File) load(ctx context.Context) {
	if f.loaded {
		return
	}
	f.loaded = true
	b, err := os.ReadFile(f.path)
	if err != nil {
		return
	}
	text, _, ok := bytes.Cut(b, []byte("\n\n"))
	fields := strings.Split(string(text), "\n")
	if !ok || len(fields) < 3 {
		return
	}
	size, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil || strconv.FormatUint(size, 10) != fields[1] {
		return
	}
	cp, err := f.checkpointAt(ctx, size)
	if err != nil || !bytes.HasPrefix(b, cp) {
		return
	}
	lines := map[string][]byte{}
	for line := range bytes.Lines(b[len(cp):]) {
		if id, ok := lineID(line); ok {
			lines[id] = bytes.Clone(line)
		}
	}
	f.size, f.lines = size, lines
}

// lineID returns the key ID "<name>+<key hash>" a signature line names.
func lineID(line []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(line, []byte("— "))
	if !ok || !bytes.HasSuffix(rest, []byte("\n")) {
		return "", false
	}
	name, b64, ok := strings.Cut(strings.TrimSuffix(string(rest), "\n"), " ")
	sig, err := base64.StdEncoding.DecodeString(b64)
	if !ok || name == "" || err != nil || len(sig) < 4 {
		return "", false
	}
	return fmt.Sprintf("%s+%08x", name, binary.BigEndian.Uint32(sig)), true
}

// PutCosignature keeps line unless a larger size is kept, as Store
// says; the file then holds size's checkpoint and lines only.
func (f *File) PutCosignature(ctx context.Context, size uint64, witness string, line []byte) error {
	if id, ok := lineID(line); !ok || id != witness {
		return fmt.Errorf("keeping a cosignature for size %d: the line is not a signature line by %s", size, witness)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.load(ctx)
	cp, err := f.checkpointAt(ctx, size)
	if err != nil {
		return fmt.Errorf("keeping a cosignature for size %d: %w", size, err)
	}
	if f.lines != nil && size < f.size {
		return nil
	}
	lines := map[string][]byte{}
	if f.lines != nil && size == f.size {
		lines = maps.Clone(f.lines)
	}
	lines[witness] = bytes.Clone(line)
	b := bytes.Clone(cp)
	for _, id := range slices.Sorted(maps.Keys(lines)) {
		b = append(b, lines[id]...)
	}
	tmp := f.path + ".tmp"
	err = os.WriteFile(tmp, b, 0o644)
	if err == nil {
		err = os.Rename(tmp, f.path)
	}
	if err != nil {
		return fmt.Errorf("keeping a cosignature for size %d: %w", size, err)
	}
	f.size, f.lines = size, lines
	return nil
}

// Cosignatures returns the lines kept for size, as Store says: those of
// the one size the file holds.
func (f *File) Cosignatures(ctx context.Context, size uint64) (map[string][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.load(ctx)
	out := map[string][]byte{}
	if f.lines != nil && size == f.size {
		for id, line := range f.lines {
			out[id] = bytes.Clone(line)
		}
	}
	return out, nil
}

// LatestCosignatures returns the size the file holds for each witness
// with a line in it, as Store says.
func (f *File) LatestCosignatures(ctx context.Context) (map[string]uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.load(ctx)
	out := map[string]uint64{}
	for id := range f.lines {
		out[id] = f.size
	}
	return out, nil
}
