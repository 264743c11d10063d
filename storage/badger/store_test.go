package badger_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	badgerdb "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
	"github.com/decisionledger/ledger/storage/storetest"
)

func TestBadgerStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) (ledger.Store, func() ledger.Store) {
		dir := t.TempDir()
		// Small segments, so that reads and reopens cross segment files.
		opts := badger.Options{SegmentSize: 1 << 20, Logger: testLogger(t)}
		s := openBadger(t, dir, opts)
		return s, func() ledger.Store {
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			s = openBadger(t, dir, opts)
			return s
		}
	})
}

// TestBadgerReopen writes enough, through small memtables, that the data
// is read back from flushed tables as well as the write-ahead log, and
// reopens with other options.
func TestBadgerReopen(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{MemTableSize: 1 << 20, Logger: testLogger(t)})
	var entries [][]byte
	var last ledger.Batch
	for start := 0; start < 3000; start += 150 {
		last = testBatch(uint64(start), 150)
		if err := s.Commit(ctx, last); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, last.Entries...)
	}
	if err := s.AddCheckpoint(ctx, 2000, []byte("checkpoint 2000\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.AddCheckpoint(ctx, 3000, []byte("checkpoint 3000\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if tables, err := filepath.Glob(filepath.Join(dir, "index", "*.sst")); err != nil || len(tables) == 0 {
		t.Fatalf("no table was flushed (%v); the test would only read the write-ahead log", err)
	}

	s = openBadger(t, dir, badger.Options{Logger: testLogger(t)})
	defer s.Close()
	st, err := s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != 3000 || st.CheckpointSize != 3000 || string(st.Checkpoint) != "checkpoint 3000\n" {
		t.Errorf("State after reopen = size %d, checkpoint %d %q; want 3000, 3000 %q",
			st.Size, st.CheckpointSize, st.Checkpoint, "checkpoint 3000\n")
	}
	if c, err := s.Checkpoint(ctx, 2000); err != nil || string(c) != "checkpoint 2000\n" {
		t.Errorf("Checkpoint(2000) after reopen = %q, %v", c, err)
	}
	err = s.ReadEntries(ctx, 0, 3000, func(i uint64, e []byte) error {
		if !bytes.Equal(e, entries[i]) {
			return fmt.Errorf("entry %d differs", i)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ReadEntries after reopen: %v", err)
	}
	for _, i := range []uint64{0, 1499, 2999} {
		if got, err := s.IndexOf(ctx, leafHash(entries[i])); err != nil || got != i {
			t.Errorf("IndexOf(leaf %d) after reopen = %d, %v", i, got, err)
		}
	}
	lastTile := last.Tiles[len(last.Tiles)-1]
	if tile, err := s.Tile(ctx, lastTile.Level, lastTile.Index); err != nil || !bytes.Equal(tile, lastTile.Hashes) {
		t.Errorf("Tile(%d, %d) after reopen = %d bytes, %v; want the %d committed last",
			lastTile.Level, lastTile.Index, len(tile), err, len(lastTile.Hashes))
	}
}

// TestBadgerLargeBatch checks that a batch whose index exceeds one badger
// transaction is still committed, indexed in several transactions, and
// becomes visible whole.
func TestBadgerLargeBatch(t *testing.T) {
	ctx := t.Context()
	// A 1 MiB memtable takes transactions of at most about 157 KB: far
	// less than the index of 5,000 entries.
	dir := t.TempDir()
	s := openBadger(t, dir, badger.Options{MemTableSize: 1 << 20, Logger: testLogger(t)})
	if err := s.Commit(ctx, testBatch(0, 10)); err != nil {
		t.Fatal(err)
	}
	big := testBatch(10, 5000)
	if err := s.Commit(ctx, big); err != nil {
		t.Fatalf("Commit of 5,000 entries into a 1 MiB memtable: %v", err)
	}
	check := func(s *badger.Store) {
		t.Helper()
		st, err := s.State(ctx)
		if err != nil || st.Size != 5010 {
			t.Fatalf("State = %+v, %v; want size 5010", st, err)
		}
		for _, i := range []uint64{10, 2500, 5009} {
			if e, err := s.Entry(ctx, i); err != nil || !bytes.Equal(e, big.Entries[i-10]) {
				t.Errorf("Entry(%d) = %d bytes, %v", i, len(e), err)
			}
			if got, err := s.IndexOf(ctx, big.LeafHashes[i-10]); err != nil || got != i {
				t.Errorf("IndexOf(leaf %d) = %d, %v", i, got, err)
			}
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openBadger(t, dir, badger.Options{MemTableSize: 1 << 20, Logger: testLogger(t)})
	defer s.Close()
	check(s)
}

// TestBadgerOptionsDefaults checks the zero Options against the
// documented defaults, as the badger options Tune is given.
func TestBadgerOptionsDefaults(t *testing.T) {
	var got badgerdb.Options
	s := openBadger(t, t.TempDir(), badger.Options{Tune: func(o *badgerdb.Options) { got = *o }})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"SyncWrites", got.SyncWrites, false}, // the frame log syncs commits; checkpoints call DB.Sync
		{"DetectConflicts", got.DetectConflicts, false},
		{"MemTableSize", got.MemTableSize, int64(2 << 20)},
		{"NumMemtables", got.NumMemtables, 2},
		{"BlockCacheSize", got.BlockCacheSize, int64(8 << 20)},
		{"IndexCacheSize", got.IndexCacheSize, int64(0)},
		{"NumCompactors", got.NumCompactors, 2},
		{"ValueLogFileSize", got.ValueLogFileSize, int64(1 << 20)},
		{"ValueThreshold", got.ValueThreshold, int64(16 << 10)},
		{"BaseTableSize", got.BaseTableSize, int64(512 << 10)},
		{"TableSizeMultiplier", got.TableSizeMultiplier, 1},
		{"Compression", got.Compression, options.None},
		{"InMemory", got.InMemory, false},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if got.Logger == nil {
		t.Errorf("Logger is nil, want the slog adapter")
	}

	// Fields that are set reach badger.
	opts := badger.Options{MemTableSize: 16 << 20, NumMemtables: 3, BlockCacheSize: 1 << 20,
		NumCompactors: 3, Tune: func(o *badgerdb.Options) { got = *o }}
	if s, err := badger.Open(t.Context(), t.TempDir(), opts); err != nil {
		t.Fatal(err)
	} else if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got.MemTableSize != 16<<20 || got.NumMemtables != 3 || got.BlockCacheSize != 1<<20 ||
		got.NumCompactors != 3 {
		t.Errorf("set options did not reach badger: %+v", got)
	}
}

// TestBadgerOptionsRefused checks that Open refuses, before creating
// anything, options out of range and a Tune that gives up durability.
func TestBadgerOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts badger.Options
		want string
	}{
		{"Tune turns InMemory on", badger.Options{Tune: func(o *badgerdb.Options) { o.InMemory = true }}, "InMemory"},
		{"Tune drops the block cache", badger.Options{Tune: func(o *badgerdb.Options) { o.Compression, o.BlockCacheSize = options.ZSTD, 0 }}, "BlockCacheSize"},
		{"one compactor", badger.Options{NumCompactors: 1}, "NumCompactors"},
		{"negative memtable", badger.Options{MemTableSize: -1}, "MemTableSize"},
		{"negative block cache", badger.Options{BlockCacheSize: -1}, "BlockCacheSize"},
		{"segment below 1 MiB", badger.Options{SegmentSize: 1000}, "SegmentSize"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := badger.Open(t.Context(), dir, tc.opts)
			if err == nil {
				s.Close()
				t.Fatalf("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open: %v; want an error naming %s", err, tc.want)
			}
			if files, _ := os.ReadDir(dir); len(files) != 0 {
				t.Errorf("Open created %d files before refusing", len(files))
			}
		})
	}
}

// TestBadgerLog checks that badger's routine messages are logged at
// Debug, without their trailing newlines.
func TestBadgerLog(t *testing.T) {
	logs := &recordLog{}
	ctx := t.Context()
	s, err := badger.Open(ctx, t.TempDir(), badger.Options{
		Logger: slog.New(&recordingHandler{log: logs}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, testBatch(0, 100)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fromBadger := 0
	for _, r := range logs.all() {
		if r.component != "badger" {
			continue
		}
		fromBadger++
		if r.level == slog.LevelInfo {
			t.Errorf("badger message logged at Info, want Debug: %q", r.msg)
		}
		if strings.HasSuffix(r.msg, "\n") {
			t.Errorf("badger message logged with its trailing newline: %q", r.msg)
		}
	}
	if fromBadger == 0 {
		t.Errorf("no message from badger reached the logger")
	}
}

func openBadger(t *testing.T, dir string, opts badger.Options) *badger.Store {
	t.Helper()
	s, err := badger.Open(t.Context(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testLogger logs warnings and errors into the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// testBatch returns a batch of n entries of about 600 bytes at start, with
// their leaf hashes and the level-0 tiles they change, whole (a store's
// frames hold the hashes a batch adds to the stored tiles, so a batch's
// tiles must extend them). Entry i is the same in every batch.
func testBatch(start uint64, n int) ledger.Batch {
	b := ledger.Batch{Start: start}
	for i := range uint64(n) {
		b.Entries = append(b.Entries, testEntry(start+i))
		b.LeafHashes = append(b.LeafHashes, leafHash(b.Entries[i]))
	}
	for t := start / ledger.TileWidth; t*ledger.TileWidth < start+uint64(n); t++ {
		var hashes []byte
		for i := t * ledger.TileWidth; i < min(start+uint64(n), (t+1)*ledger.TileWidth); i++ {
			h := leafHash(testEntry(i))
			hashes = append(hashes, h[:]...)
		}
		b.Tiles = append(b.Tiles, ledger.Tile{Level: 0, Index: t, Hashes: hashes})
	}
	return b
}

// testEntry returns entry index of testBatch's log: about 600 bytes.
func testEntry(index uint64) []byte {
	digest := sha256.Sum256(fmt.Append(nil, index))
	e := fmt.Appendf(nil, `{"index":%d,"params":{"digest":"sha256:%x"},"sig":"`, index, digest)
	for len(e) < 598 {
		e = fmt.Appendf(e, "%x", digest)
	}
	return append(e[:598], `"}`...)
}

func leafHash(e []byte) [ledger.HashSize]byte {
	return sha256.Sum256(append([]byte{0}, e...))
}

// recordingHandler is a slog.Handler that keeps every record in log.
type recordingHandler struct {
	log   *recordLog
	attrs []slog.Attr
}

type recordLog struct {
	mu      sync.Mutex
	records []loggedRecord
}

type loggedRecord struct {
	level     slog.Level
	msg       string
	component string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	lr := loggedRecord{level: r.Level, msg: r.Message}
	for _, a := range h.attrs {
		if a.Key == "component" {
			lr.component = a.Value.String()
		}
	}
	h.log.mu.Lock()
	defer h.log.mu.Unlock()
	h.log.records = append(h.log.records, lr)
	return nil
}

func (h *recordingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recordingHandler{log: h.log, attrs: append(slices.Clip(h.attrs), attrs...)}
}

func (h *recordingHandler) WithGroup(string) slog.Handler { return h }

func (l *recordLog) all() []loggedRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.records)
}
