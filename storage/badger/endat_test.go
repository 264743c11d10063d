package badger

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/decisionledger/ledger/ledger"
)

// A frame that is not whole is damage when the index records it, even
// where every other mark of a torn write is there: its last sector lost,
// nothing after it. (The external tests cannot make the index record a
// frame whose tiles mark it has not reached, which is when open reads an
// indexed frame.)
func TestEndAtIndexedFrameIsDamage(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(t.Context(), dir, Options{SegmentSize: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for start := uint64(0); start < 300; start += 100 {
		b := ledger.Batch{Start: start}
		for i := range uint64(100) {
			e := []byte(strings.Repeat("x", 600) + string(rune('a'+i%26)))
			b.Entries = append(b.Entries, e)
			b.LeafHashes = append(b.LeafHashes, [ledger.HashSize]byte{byte(start + i)})
		}
		if err := s.Commit(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
	lastFrame := s.ov.durableSize() // 300 entries
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, framesDir, segmentName(0))
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	end := int64(len(strings.TrimRight(string(b), "\x00")))
	// The last sector-part of the third frame, zeroed: a torn write's
	// mark.
	clear(b[end-end%sectorSize-1 : end])
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ack  acknowledged
		want string
	}{
		{acknowledged{indexEnd: end}, "the index records frames up to log position"},
		{acknowledged{signed: lastFrame}, "a signed checkpoint covers 300 entries"},
		{acknowledged{}, ""}, // nothing acknowledged: torn, erased
	} {
		l, err := openFrameLog(filepath.Join(dir, framesDir), 1<<20, func(int64) bool { return false })
		if err != nil {
			t.Fatal(err)
		}
		frames := 0
		dropped, err := l.recover(0, 0, tc.ack, func(pos int64, payload []byte) (uint64, error) {
			frames++
			return uint64(100 * frames), nil
		})
		l.close()
		switch {
		case tc.want == "" && (err != nil || dropped == 0 || frames != 2):
			t.Errorf("with %+v: recover = %d dropped after %d frames, %v; want the third frame erased", tc.ack, dropped, frames, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("with %+v: recover = %v; want damage: %q", tc.ack, err, tc.want)
		case tc.want != "":
			if got, _ := os.ReadFile(seg); string(got) != string(b) {
				t.Errorf("with %+v: the refusal changed the segment", tc.ack)
			}
		}
	}
}

// The same through Open: the index records the damaged last frame,
// and open reads that frame because the tiles mark is behind it (as after
// a crash between the frame's index and the next tile flush). Open refuses
// and changes nothing.
func TestOpenRefusesDamagedIndexedFrame(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 1 << 20, Logger: slog.New(slog.DiscardHandler)}
	s, err := Open(t.Context(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for start := uint64(0); start < 300; start += 100 {
		b := ledger.Batch{Start: start}
		for i := range uint64(100) {
			b.Entries = append(b.Entries, []byte(strings.Repeat("y", 600)+string(rune('a'+i%26))))
			b.LeafHashes = append(b.LeafHashes, [ledger.HashSize]byte{byte(start + i)})
		}
		if err := s.Commit(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The tiles mark back at the start: open reads every frame.
	db, err := badgerdb.Open(badgerdb.DefaultOptions(filepath.Join(dir, indexDir)).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badgerdb.Txn) error { return txn.Delete(keyTilesEnd) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, framesDir, segmentName(0))
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	end := len(strings.TrimRight(string(b), "\x00"))
	b[end-10] ^= 1 // inside the last entry of the last frame
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(t.Context(), dir, opts)
	if err == nil || !strings.Contains(err.Error(), "the index records frames up to log position") || !strings.Contains(err.Error(), "nothing was truncated") {
		t.Fatalf("open = %v; want damage the index records", err)
	}
	if got, _ := os.ReadFile(seg); string(got) != string(b) {
		t.Fatal("the refused open changed the segment")
	}
}
