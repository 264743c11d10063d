package badger_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
)

// frameFields are the offsets, in a segment, of parts of the frame that
// starts at off: the leaf hash and key of its first entry, and its first
// tile record's hashes (a level-1 tile's: level-0 tiles have none), if
// tiles, its number of tile records, is not 0.
type frameFields struct {
	crc, leafHash, key, tileHashes int
	tiles                          int
	payload                        [2]int // [start, end) of the payload
}

func parseFrameFields(t *testing.T, b []byte, off int) frameFields {
	t.Helper()
	n := int(binary.BigEndian.Uint32(b[off:]))
	f := frameFields{crc: off + 4, payload: [2]int{off + 8, off + 8 + n}}
	at := off + 8 + 8
	entries := int(binary.BigEndian.Uint32(b[at:]))
	f.tiles = int(binary.BigEndian.Uint32(b[at+4:]) &^ (1 << 31))
	at += 8
	for i := range entries {
		if i == 0 {
			f.leafHash = at + 8
			f.key = at + 8 + 32 + 2
		}
		at += 8 + 32
		at += 2 + int(binary.BigEndian.Uint16(b[at:]))
	}
	f.tileHashes = at + 1 + 8 + 2 + 2 // level, index, first, count
	return f
}

// Check finds damage that neither open nor reads look at: a frame's own
// checksum, and, under a checksum made to match, leaf hashes, keys and
// tiles that differ from what the index holds; and a flipped byte in a
// badger table.
func TestBadgerCheck(t *testing.T) {
	build := func(t *testing.T) *frameStore {
		// Runs of every frame's entries: open reads none of the frames
		// again, and their leaf hashes and keys are checked against the
		// runs (the windows after the runs are built from the frames).
		badger.SetRunSize(t, 100)
		f := newFrameStore(t)
		f.checkpointAt = 1000
		f.commit(30) // several segments
		if n := len(f.segments()); n < 2 {
			t.Fatalf("%d segments; the test needs several", n)
		}
		return f
	}
	t.Run("clean", func(t *testing.T) {
		f := build(t)
		s, err := f.open()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Check(t.Context()); err != nil {
			t.Fatalf("Check of an undamaged store: %v", err)
		}
	})
	for _, tc := range []struct {
		name   string
		last   bool // damage the last frame, not the first
		damage func(b []byte, f frameFields)
		want   string
	}{
		{"frame checksum", false, func(b []byte, f frameFields) { b[f.crc] ^= 1 }, "no whole frame at log position 0"},
		{"leaf hash", false, func(b []byte, f frameFields) { b[f.leafHash] ^= 1 }, "entry 0's leaf hash is not the hash of its bytes"},
		{"idempotency key", false, func(b []byte, f frameFields) { b[f.key] ^= 1 }, "entry 0: the idempotency-key index gives"},
		// The last frame with a tile record.
		{"tile", true, func(b []byte, f frameFields) { b[f.tileHashes+5] ^= 1 }, "is not the version the frame at log position"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := build(t)
			segs := f.segments()
			seg, off := segs[0], 0
			if tc.last {
				seg = segs[len(segs)-1]
			}
			b, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			fields := parseFrameFields(t, b, off)
			for at := off; tc.last && at < len(bytes.TrimRight(b, "\x00")); {
				if f := parseFrameFields(t, b, at); f.tiles > 0 {
					fields = f
				}
				at += 8 + int(binary.BigEndian.Uint32(b[at:]))
			}
			if tc.last && fields.tiles == 0 {
				t.Fatal("no frame of the last segment has a tile record")
			}
			tc.damage(b, fields)
			if tc.name != "frame checksum" {
				// Damage the checksum cannot see.
				sum := crc32.Checksum(b[fields.payload[0]:fields.payload[1]], crc32.MakeTable(crc32.Castagnoli))
				binary.BigEndian.PutUint32(b[fields.crc:], sum)
			}
			if err := os.WriteFile(seg, b, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := f.open()
			if err != nil {
				t.Fatalf("open: %v (the damage is in an indexed frame, which open does not read)", err)
			}
			defer s.Close()
			err = s.Check(t.Context())
			wantCorrupt(t, err, tc.want)
		})
	}
	// The locations file's record of an entry, against the frame, under a
	// checksum made to match.
	t.Run("entry location", func(t *testing.T) {
		f := build(t)
		rec := readLocations(t, f.dir)[:locRecordSize]
		writeRecord(t, f.dir, 0, locRecord(0, binary.BigEndian.Uint64(rec), binary.BigEndian.Uint32(rec[8:]), binary.BigEndian.Uint32(rec[12:])^1))
		s, err := f.open()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		wantCorrupt(t, s.Check(t.Context()), "entry 0: the locations file locates it at log position")
	})
	t.Run("badger table", func(t *testing.T) {
		f := build(t)
		tables, _ := filepath.Glob(filepath.Join(f.dir, "index", "*.sst"))
		if len(tables) == 0 {
			t.Fatal("no badger table to damage")
		}
		slices.Sort(tables)
		b, err := os.ReadFile(tables[0])
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/4] ^= 0x40 // in a data block, away from the table's index
		if err := os.WriteFile(tables[0], b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := f.open()
		if err != nil {
			// Found when the table was read at open: by its checksum, or
			// by what the damaged record says against the frames.
			if !strings.Contains(err.Error(), "checksum") && !errors.Is(err, ledger.ErrCorrupt) {
				t.Fatalf("open of a store with a damaged table: %v", err)
			}
			return
		}
		defer s.Close()
		err = s.Check(t.Context())
		wantCorrupt(t, err, "the index")
	})
}
