package ledger

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"

	"github.com/decisionledger/ledger/entry"
)

// ExportOptions choose what an export carries besides its entries.
type ExportOptions struct {
	// Size is the tree size of the checkpoint the export is made at.
	// Optional; 0 means the latest checkpoint.
	Size uint64
	// ConsistencyFrom, if not 0, adds a consistency proof from the tree of
	// that size (an earlier checkpoint the auditor trusts) to Size.
	ConsistencyFrom uint64
}

// ExportHeader is the first line of every export file, format version 1.
const ExportHeader = "ledger-export v1\n"

// Export writes entries [start, end) as an export file (docs/export.md):
// the signed checkpoint, the range, the entry hash before start, the
// range-proof hashes, an optional consistency proof, every entry in index
// order, and an end frame. Entries are streamed from the store; memory does
// not grow with the range.
func (l *Ledger) Export(ctx context.Context, w io.Writer, start, end uint64, opts ExportOptions) error {
	l.cpMu.Lock()
	latestSize := l.cpSize
	l.cpMu.Unlock()
	size := opts.Size
	if size == 0 {
		size = latestSize
	}
	if size == 0 {
		return fmt.Errorf("%w: no checkpoint to export at", ErrSize)
	}
	signed, err := l.store.Checkpoint(ctx, size)
	if err != nil {
		return fmt.Errorf("ledger: export: checkpoint of size %d: %w", size, err)
	}
	left, right, err := l.RangeProof(ctx, start, end, size)
	if err != nil {
		return fmt.Errorf("ledger: export: %w", err)
	}
	var consistency []byte
	if opts.ConsistencyFrom != 0 {
		p, err := l.ConsistencyProof(ctx, opts.ConsistencyFrom, size)
		if err != nil {
			return fmt.Errorf("ledger: export: %w", err)
		}
		consistency = strconv.AppendUint(nil, opts.ConsistencyFrom, 10)
		consistency = append(consistency, '\n')
		consistency = append(consistency, bytes.Join(p, nil)...)
	}
	var prev []byte
	if start > 0 {
		b, err := l.store.Entry(ctx, start-1)
		if err != nil {
			return fmt.Errorf("ledger: export: entry %d: %w", start-1, err)
		}
		e, err := entry.Parse(b)
		if err != nil {
			return fmt.Errorf("%w: entry %d: %w", errCorrupt, start-1, err)
		}
		h, err := e.Hash()
		if err != nil {
			return fmt.Errorf("%w: entry %d: %w", errCorrupt, start-1, err)
		}
		prev, _ = h.MarshalText()
	}

	bw := bufio.NewWriterSize(w, 64<<10)
	// bufio.Writer errors are sticky: the last write of a frame reports
	// any failure of the frame.
	frame := func(tag string, payload []byte) error {
		bw.WriteString(tag)
		bw.WriteByte(' ')
		bw.WriteString(strconv.Itoa(len(payload)))
		bw.WriteByte('\n')
		bw.Write(payload)
		return bw.WriteByte('\n')
	}
	bw.WriteString(ExportHeader)
	frame("checkpoint", signed)
	frame("range", fmt.Appendf(nil, "%d %d", start, end))
	if prev != nil {
		frame("prev", prev)
	}
	frame("left", bytes.Join(left, nil))
	frame("right", bytes.Join(right, nil))
	if consistency != nil {
		frame("consistency", consistency)
	}
	err = l.store.ReadEntries(ctx, start, end, func(_ uint64, b []byte) error {
		return frame("entry", b)
	})
	if err != nil {
		return fmt.Errorf("ledger: export: %w", err)
	}
	frame("end", nil)
	return bw.Flush()
}

// TlogProof returns a C2SP tlog-proof@v1 file for the entry at index in
// the tree of the given size (0: the latest checkpoint). The entry itself
// travels in the proof's extra data, so the file is self-contained; a
// verifier authenticates it with the inclusion proof (docs/export.md §4).
func (l *Ledger) TlogProof(ctx context.Context, index, size uint64) ([]byte, error) {
	if size == 0 {
		_, size = l.Checkpoint()
	}
	signed, err := l.store.Checkpoint(ctx, size)
	if err != nil {
		return nil, fmt.Errorf("ledger: tlog proof: checkpoint of size %d: %w", size, err)
	}
	p, err := l.InclusionProof(ctx, index, size)
	if err != nil {
		return nil, fmt.Errorf("ledger: tlog proof: %w", err)
	}
	e, err := l.store.Entry(ctx, index)
	if err != nil {
		return nil, fmt.Errorf("ledger: tlog proof: entry %d: %w", index, err)
	}
	var b bytes.Buffer
	b.WriteString("c2sp.org/tlog-proof@v1\nextra ")
	b.WriteString(base64.StdEncoding.EncodeToString(e))
	fmt.Fprintf(&b, "\nindex %d\n", index)
	for _, h := range p {
		b.WriteString(base64.StdEncoding.EncodeToString(h))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.Write(signed)
	return b.Bytes(), nil
}

// Tile returns the hashes of tile (level, index) in the C2SP tlog-tiles
// layout, width hashes long (1 to TileWidth), as they are in the tree of
// the latest checkpoint or a later one: a stored tile's first width
// hashes never change. It returns ErrNotFound for a tile, or a width, the
// latest checkpoint's tree does not have yet.
func (l *Ledger) Tile(ctx context.Context, level uint8, index uint64, width int) ([]byte, error) {
	_, size := l.Checkpoint()
	if width < 1 || width > TileWidth || uint(level)*TileHeight >= 64 {
		return nil, fmt.Errorf("%w: tile width %d", ErrNotFound, width)
	}
	// Hashes at tree level 8·level in the checkpoint's tree.
	have := size >> (TileHeight * uint(level))
	if index*TileWidth+uint64(width) > have {
		return nil, fmt.Errorf("%w: tile %d/%d.p/%d is beyond the latest checkpoint", ErrNotFound, level, index, width)
	}
	t, err := l.store.Tile(ctx, level, index)
	if err != nil {
		return nil, err
	}
	if len(t) < width*HashSize {
		return nil, fmt.Errorf("%w: tile %d/%d holds %d hashes, the checkpoint needs %d", errCorrupt, level, index, len(t)/HashSize, width)
	}
	return t[:width*HashSize], nil
}

// EntryBundle returns the C2SP tlog-tiles entry bundle of entries
// 256·index to 256·index+width-1 of the latest checkpoint's tree: each
// entry prefixed with its length as a big-endian uint16.
func (l *Ledger) EntryBundle(ctx context.Context, index uint64, width int) ([]byte, error) {
	_, size := l.Checkpoint()
	start := index * TileWidth
	if width < 1 || width > TileWidth || start+uint64(width) > size {
		return nil, fmt.Errorf("%w: entry bundle %d.p/%d is beyond the latest checkpoint", ErrNotFound, index, width)
	}
	var b []byte
	err := l.store.ReadEntries(ctx, start, start+uint64(width), func(_ uint64, e []byte) error {
		if len(e) > 0xffff {
			return fmt.Errorf("%w: an entry of %d bytes cannot be in a bundle", errCorrupt, len(e))
		}
		b = binary.BigEndian.AppendUint16(b, uint16(len(e)))
		b = append(b, e...)
		return nil
	})
	return b, err
}
