package ledger

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
)

// ExportOptions choose what an export carries besides its entries.
type ExportOptions struct {
	// Size is the tree size of the checkpoint the export is made at.
	// Optional; 0 means the latest checkpoint.
	Size uint64
	// ConsistencyFrom, if not 0, adds a consistency proof from the tree of
	// that size (an earlier checkpoint the auditor trusts) to Size. From
	// 0, the empty tree, the proof is empty (RFC 9162 §2.1.4), and a
	// verifier trusting the empty tree's checkpoint needs none: 0 adds no
	// frame.
	ConsistencyFrom uint64
	// PolicySet, if set, returns the bundle (package policy) of the
	// policy set with the given digest: the byte string whose SHA-256 is
	// the digest. Export then writes a policy-set frame for each distinct
	// policy set the range's version 3 entries name, in order of first
	// appearance, so that an auditor can replay the range's ledger
	// decisions from the file alone. A bundle whose SHA-256 is not the
	// digest, or longer than MaxPolicySetFrame, fails the export, as does
	// an error from PolicySet.
	PolicySet func(ctx context.Context, digest commit.Digest) ([]byte, error)
	// Cosignatures, if set, returns signature lines ("— name base64\n"
	// each) to add to the signed checkpoint of the given size: ledgerd's
	// witness cosignatures (C2SP tlog-cosignature). Optional.
	Cosignatures func(size uint64) []byte
}

// MaxPolicySetFrame bounds the payload of a policy-set frame: the 4 MiB
// of files a policy set may hold (policy.MaxSetBytes) and 256 KiB for the
// bundle's headers (its domain string and, for each of at most 1024
// files, a name of at most 128 bytes and a length).
const MaxPolicySetFrame = 4<<20 + 256<<10

// ExportHeader is the first line of every export file, format version 1.
const ExportHeader = "ledger-export v1\n"

// Export writes entries [start, end) as an export file (docs/export.md):
// the signed checkpoint, the range, the entry hash before start, the
// range-proof hashes, an optional consistency proof, every entry in index
// order, the bundles of the policy sets the entries name (when
// opts.PolicySet is set), and an end frame. Entries are streamed from the
// store; memory does not grow with the range, only with the number of
// distinct policy sets.
//
// The policy sets are fetched after the entries have been streamed, so an
// error from opts.PolicySet (or a bundle with another digest) may come
// after part of the file has been written to w: Export then returns the
// error without writing the end frame, and no reader accepts the file
// (docs/export.md §1).
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
	if opts.Cosignatures != nil {
		signed = append(signed, opts.Cosignatures(size)...)
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
			return fmt.Errorf("%w: entry %d: %w", ErrCorrupt, start-1, err)
		}
		h, err := e.Hash()
		if err != nil {
			return fmt.Errorf("%w: entry %d: %w", ErrCorrupt, start-1, err)
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
	var sets []commit.Digest // in order of first appearance
	seen := map[commit.Digest]bool{}
	err = l.store.ReadEntries(ctx, start, end, func(i uint64, b []byte) error {
		if opts.PolicySet != nil {
			d, ok, err := policySetOf(b)
			if err != nil {
				return fmt.Errorf("%w: entry %d: %w", ErrCorrupt, i, err)
			}
			if ok && !seen[d] {
				seen[d] = true
				sets = append(sets, d)
			}
		}
		return frame("entry", b)
	})
	if err != nil {
		return fmt.Errorf("ledger: export: %w", err)
	}
	for _, d := range sets {
		bundle, err := opts.PolicySet(ctx, d)
		if err != nil {
			return fmt.Errorf("ledger: export: policy set %s: %w", d, err)
		}
		if len(bundle) > MaxPolicySetFrame {
			return fmt.Errorf("ledger: export: policy set %s: a bundle of %d bytes, more than %d", d, len(bundle), MaxPolicySetFrame)
		}
		if commit.Digest(sha256.Sum256(bundle)) != d {
			return fmt.Errorf("ledger: export: policy set %s: the bundle has another digest", d)
		}
		frame("policy-set", bundle)
	}
	frame("end", nil)
	return bw.Flush()
}

// Only version 3 entries name a policy set. In an entry's canonical JSON
// (members sorted by name, strings escaped) version is the last member, so
// a version 3 entry ends with v3Suffix; and the top-level policy_set
// member is the last one spelled policySetMember: every member after it
// (prev, principal, sig, tiers_digest, time, version) is a fixed name or
// a string, in which a quote is escaped, whereas the attributes, which may
// hold such a member of their own, come before it.
const (
	v3Suffix        = `,"version":3}`
	policySetMember = `,"policy_set":"`
)

// policySetOf returns the policy-set digest a stored entry names, if it
// is a version 3 entry, without parsing the whole entry.
func policySetOf(b []byte) (commit.Digest, bool, error) {
	if !bytes.HasSuffix(b, []byte(v3Suffix)) {
		return commit.Digest{}, false, nil
	}
	at := bytes.LastIndex(b, []byte(policySetMember))
	if at < 0 {
		return commit.Digest{}, false, errors.New("a version 3 entry without policy_set")
	}
	text, _, ok := bytes.Cut(b[at+len(policySetMember):], []byte(`"`))
	if !ok {
		return commit.Digest{}, false, errors.New("policy_set is not a string")
	}
	d, err := commit.ParseDigest(string(text))
	if err != nil {
		return commit.Digest{}, false, err
	}
	return d, true, nil
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
		return nil, fmt.Errorf("%w: tile %d/%d holds %d hashes, the checkpoint needs %d", ErrCorrupt, level, index, len(t)/HashSize, width)
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
			return fmt.Errorf("%w: an entry of %d bytes cannot be in a bundle", ErrCorrupt, len(e))
		}
		b = binary.BigEndian.AppendUint16(b, uint16(len(e)))
		b = append(b, e...)
		return nil
	})
	return b, err
}
