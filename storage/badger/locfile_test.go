package badger_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
)

// Entry locations live in the store's locations file, 20 bytes per entry
// (locfile.go). These tests read and write the file by its documented
// layout, written out again here, and put it in the states damage, a
// crash or an older store leave.

const locRecordSize = 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// locRecord is record index of the locations file: u64 log position,
// u32 length, u32 CRC-32C of the entry, then the CRC-32C of the u64 index
// and those 16 bytes.
func locRecord(index uint64, pos uint64, length, crc uint32) []byte {
	b := binary.BigEndian.AppendUint64(nil, index)
	b = binary.BigEndian.AppendUint64(b, pos)
	b = binary.BigEndian.AppendUint32(b, length)
	b = binary.BigEndian.AppendUint32(b, crc)
	return binary.BigEndian.AppendUint32(b[8:], crc32.Checksum(b, castagnoli))
}

// The record of locfile.go's example, as written there.
func TestLocationRecordExample(t *testing.T) {
	const want = "0000000000001000" + "00000005" + "9a71bb4c" + "542b75e9"
	if got := hex.EncodeToString(locRecord(7, 4096, 5, crc32.Checksum([]byte("hello"), castagnoli))); got != want {
		t.Fatalf("the record of entry 7, \"hello\" at log position 4096, is %s; want %s", got, want)
	}
}

func locationsPath(dir string) string { return filepath.Join(dir, "locations") }

// readLocations returns the records of the locations file in dir.
func readLocations(t *testing.T, dir string) []byte {
	t.Helper()
	b, err := os.ReadFile(locationsPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeRecord overwrites record index of the locations file in dir.
func writeRecord(t *testing.T, dir string, index uint64, rec []byte) {
	t.Helper()
	f, err := os.OpenFile(locationsPath(dir), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(rec, int64(index)*locRecordSize); err != nil {
		t.Fatal(err)
	}
}

// Each entry has its record, which locates its bytes in the frame log and
// holds their CRC-32C; badger holds no 'f' key. The file is owner-only.
func TestBadgerLocationFile(t *testing.T) {
	f := newFrameStore(t)
	f.commit(5)
	recs := readLocations(t, f.dir)
	if len(recs) != 500*locRecordSize {
		t.Fatalf("the locations file holds %d bytes for 500 entries; want %d", len(recs), 500*locRecordSize)
	}
	if info, err := os.Stat(locationsPath(f.dir)); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the locations file: %v, %v; want mode 0600", info.Mode().Perm(), err)
	}
	segs := f.segments()
	if len(segs) != 1 {
		t.Fatalf("%d segments; the test reads one", len(segs))
	}
	seg, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := range uint64(500) {
		rec := recs[i*locRecordSize : (i+1)*locRecordSize]
		pos, length, crc := binary.BigEndian.Uint64(rec), binary.BigEndian.Uint32(rec[8:]), binary.BigEndian.Uint32(rec[12:])
		if want := locRecord(i, pos, length, crc); !bytes.Equal(rec, want) {
			t.Fatalf("record %d is %x; its checksum should make it %x", i, rec, want)
		}
		e := f.batches[i/100].Entries[i%100]
		if got := seg[pos : pos+uint64(length)]; !bytes.Equal(got, e) || crc != crc32.Checksum(e, castagnoli) {
			t.Fatalf("record %d locates %d bytes at log position %d with CRC %08x, not entry %d", i, length, pos, crc, i)
		}
	}
	if keys, err := badger.FrameKeys(f.dir); err != nil || len(keys) != 0 {
		t.Fatalf("badger holds 'f' keys %v (%v); want the locations in their file only", keys, err)
	}
}

// A damaged record is damage, from Entry, ReadEntries and Check: a byte
// flipped, a record of zeros, a record whose checksum matches but that
// locates something else.
func TestBadgerDamagedLocation(t *testing.T) {
	for _, tc := range []struct {
		name              string
		damage            func(rec []byte) []byte
		wantRead, wantChk string
	}{
		{"byte flipped", func(rec []byte) []byte { rec[3] ^= 0x10; return rec },
			"entry 150's location record in", "entry 150's location record in"},
		{"zeros", func(rec []byte) []byte { return make([]byte, locRecordSize) },
			"entry 150's location is missing: its record in", "entry 150's location is missing"},
		{"another checksum, recorded", func(rec []byte) []byte {
			return locRecord(150, binary.BigEndian.Uint64(rec), binary.BigEndian.Uint32(rec[8:]), binary.BigEndian.Uint32(rec[12:])^1)
		}, "entry 150 fails its checksum", "entry 150: the locations file locates it at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFrameStore(t)
			f.commit(3)
			rec := readLocations(t, f.dir)[150*locRecordSize : 151*locRecordSize]
			writeRecord(t, f.dir, 150, tc.damage(bytes.Clone(rec)))
			s, err := f.open()
			if err != nil {
				t.Fatalf("open: %v (the damage is in an indexed record, which open does not read)", err)
			}
			defer s.Close()
			_, err = s.Entry(t.Context(), 150)
			wantCorrupt(t, err, tc.wantRead)
			err = s.ReadEntries(t.Context(), 100, 300, func(uint64, []byte) error { return nil })
			wantCorrupt(t, err, tc.wantRead)
			wantCorrupt(t, s.Check(t.Context()), tc.wantChk)
			if e, err := s.Entry(t.Context(), 149); err != nil || !bytes.Equal(e, f.batches[1].Entries[49]) {
				t.Errorf("Entry(149) = %v; the undamaged entry should read", err)
			}
		})
	}
}

// The locations file cut short: below its mark, Open refuses it, naming
// it (the records lost are of frames open does not replay); under an
// open store, reads of the lost records are damage, not "not found".
func TestBadgerLocationFileShort(t *testing.T) {
	f := newFrameStore(t)
	f.commit(3)
	s, err := f.open()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(locationsPath(f.dir), 100*locRecordSize+7); err != nil {
		t.Fatal(err)
	}
	_, err = s.Entry(t.Context(), 250)
	wantCorrupt(t, err, "the locations of entry 250: ")
	if e, err := s.Entry(t.Context(), 50); err != nil || !bytes.Equal(e, f.batches[0].Entries[50]) {
		t.Errorf("Entry(50) = %v; the record is there", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = f.open()
	wantCorrupt(t, err, "locations holds the locations of 100 entries, but 300 were written and synced")
	if err := os.Remove(locationsPath(f.dir)); err != nil {
		t.Fatal(err)
	}
	_, err = f.open()
	wantCorrupt(t, err, "locations is missing, but the locations of 300 entries were written and synced to it")
	if _, err := os.Stat(locationsPath(f.dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused open made the locations file again: %v", err)
	}
}

// setLocationsMark sets the locations mark of the closed store in dir.
func setLocationsMark(t *testing.T, dir string, end, records uint64) {
	t.Helper()
	updateIndex(t, dir, func(txn *badgerdb.Txn) error {
		v := binary.BigEndian.AppendUint64(nil, end)
		return txn.Set([]byte("mlocations"), binary.BigEndian.AppendUint64(v, records))
	})
}

// Records the mark does not cover were not synced, and a crash may lose
// them: Open writes them again from the frames after the mark.
func TestBadgerRewritesLostLocations(t *testing.T) {
	f := newFrameStore(t)
	f.commit(5)
	seg, err := os.ReadFile(f.segments()[0])
	if err != nil {
		t.Fatal(err)
	}
	second := uint64(8 + binary.BigEndian.Uint32(seg)) // log position of the second frame
	// As if the mark had last been written after the first frame, and a
	// crash had lost the file's later writes, but for a torn record and
	// a record of zeros.
	setLocationsMark(t, f.dir, second, 100)
	recs := readLocations(t, f.dir)
	lost := append(bytes.Clone(recs[:100*locRecordSize]), make([]byte, locRecordSize)...)
	lost = append(lost, recs[101*locRecordSize:101*locRecordSize+9]...)
	if err := os.WriteFile(locationsPath(f.dir), lost, 0o600); err != nil {
		t.Fatal(err)
	}
	f.check()
	if got := readLocations(t, f.dir); !bytes.Equal(got, recs) {
		t.Fatalf("the locations file after the reopen holds %d bytes, not the %d written before the crash", len(got), len(recs))
	}
	s, err := f.open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	if repairs := s.Repairs(); len(repairs) != 0 {
		t.Fatalf("Repairs() = %q after the reopen", repairs)
	}
}

// A store written before the locations file, its locations in badger's
// 'f' keys, has them moved to the file at Open, the keys deleted; a crash
// during the move (the file written or not, synced or not, keys deleted
// in part) moves them again.
func TestBadgerMovesLocationsFromIndex(t *testing.T) {
	removeFile := func(t *testing.T, dir string) {
		if err := os.Remove(locationsPath(dir)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, dir string)
		keys    int
		chunk   int // keys moved at a time, if set
	}{
		{"no file", removeFile, 5, 0},
		{"no file, two keys at a time", removeFile, 5, 2},
		{"no file, five keys at a time", removeFile, 5, 5},
		{"file of zeros, its writes lost", func(t *testing.T, dir string) {
			if err := os.WriteFile(locationsPath(dir), make([]byte, 300*locRecordSize), 0o600); err != nil {
				t.Fatal(err)
			}
		}, 5, 0},
		{"keys deleted in part", func(t *testing.T, dir string) {
			updateIndex(t, dir, func(txn *badgerdb.Txn) error {
				for _, start := range []uint64{0, 100} {
					if err := txn.Delete(binary.BigEndian.AppendUint64([]byte{'f'}, start)); err != nil {
						return err
					}
				}
				return nil
			})
		}, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.chunk > 0 {
				badger.SetMigrateChunk(t, tc.chunk)
			}
			f := newFrameStore(t)
			f.commit(5)
			if n, err := badger.OldLocationLayout(f.dir); err != nil || n != 5 {
				t.Fatalf("OldLocationLayout = %d frames, %v", n, err)
			}
			tc.prepare(t, f.dir)
			if keys, err := badger.FrameKeys(f.dir); err != nil || len(keys) != tc.keys {
				t.Fatalf("the old layout has 'f' keys %v (%v); want %d", keys, err, tc.keys)
			}
			f.check()
			if keys, err := badger.FrameKeys(f.dir); err != nil || len(keys) != 0 {
				t.Fatalf("badger holds 'f' keys %v after the move (%v); want none", keys, err)
			}
			if n := len(readLocations(t, f.dir)); n != 500*locRecordSize {
				t.Fatalf("the locations file holds %d bytes after the move, want %d", n, 500*locRecordSize)
			}
			f.commit(1)
			f.check()
			s, err := f.open()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Check(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// After a crash the store's files are as the kernel had them: the
// locations file as written, not synced. A copy of the files of a store
// still open stands for that, cut at any commit; the reopened store
// serves every entry.
func TestBadgerLocationsAfterCrash(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	opts := badger.Options{Logger: testLogger(t)}
	s := openBadger(t, dir, opts)
	defer s.Close()
	var all [][]byte
	for start := uint64(0); start < 300; start += 30 {
		b := testBatch(start, 30)
		if err := s.Commit(ctx, b); err != nil {
			t.Fatal(err)
		}
		all = append(all, b.Entries...)
	}
	crashed := filepath.Join(t.TempDir(), "store")
	copyDir(t, dir, crashed)
	// The records the copy's mark does not cover may be lost too: those
	// after the mark now, which is at or after the copy's.
	_, records, err := badger.LocationsMark(s)
	if err != nil {
		t.Fatal(err)
	}
	if n := uint64(len(readLocations(t, crashed))) / locRecordSize; records < n {
		t.Logf("the crash loses the records of entries %d to %d", records, n-1)
		if err := os.Truncate(locationsPath(crashed), int64(records)*locRecordSize); err != nil {
			t.Fatal(err)
		}
	}
	c := openBadger(t, crashed, opts)
	defer c.Close()
	err = c.ReadEntries(ctx, 0, 300, func(i uint64, e []byte) error {
		if !bytes.Equal(e, all[i]) {
			t.Fatalf("entry %d after the crash differs", i)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Entry(ctx, 300); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Entry(300) = %v, want ErrNotFound", err)
	}
}
