package badger_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
)

// cpStore is a store of cpTree entries with a checkpoint every cpStep
// entries, cpCount of them, and the one at cpRotated signed twice (a key
// rotation's second signature replacing the first): more checkpoints than
// one read of the history's index holds, so that lookups search.
type cpStore struct {
	*frameStore
	sizes []uint64 // in the order added
}

const (
	cpTree    = 2000
	cpStep    = 3
	cpCount   = 400
	cpRotated = 300
)

// cpRotation is testCheckpoint(size) with a second signature line.
func cpRotation(size uint64) []byte {
	return append(testCheckpoint(size), "— second signature\n"...)
}

// cpWant is the checkpoint the store must serve for size, or nil.
func cpWant(size uint64) []byte {
	switch {
	case size == 0 || size%cpStep != 0 || size > cpStep*cpCount:
		return nil
	case size == cpRotated:
		return cpRotation(size)
	}
	return testCheckpoint(size)
}

func newCPStore(t *testing.T) *cpStore {
	t.Helper()
	f := &cpStore{frameStore: newFrameStore(t)}
	s, err := f.open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := testBatch(0, cpTree)
	if err := s.Commit(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	f.batches = append(f.batches, b)
	for i := range uint64(cpCount) {
		size := cpStep * (i + 1)
		if err := s.AddCheckpoint(t.Context(), size, testCheckpoint(size)); err != nil {
			t.Fatal(err)
		}
		f.sizes = append(f.sizes, size)
		if size == cpRotated {
			if err := s.AddCheckpoint(t.Context(), size, cpRotation(size)); err != nil {
				t.Fatal(err)
			}
			f.sizes = append(f.sizes, size)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

// noteOffset returns where the i-th checkpoint added is in notes, and its
// record's length.
func (f *cpStore) noteOffset(i int) (off, length int64) {
	seen := map[uint64]bool{}
	for j, size := range f.sizes[:i+1] {
		cp := testCheckpoint(size)
		if seen[size] {
			cp = cpRotation(size)
		}
		seen[size] = true
		if j == i {
			return off, 16 + int64(len(cp))
		}
		off += 16 + int64(len(cp))
	}
	panic("unreachable")
}

// cpStores builds one cpStore for t and returns a function that gives each
// subtest of t a copy of it.
func cpStores(t *testing.T) func(t *testing.T) *cpStore {
	template := newCPStore(t)
	return func(t *testing.T) *cpStore {
		t.Helper()
		f := &cpStore{frameStore: newFrameStore(t), sizes: template.sizes}
		f.batches = template.batches
		if err := os.CopyFS(f.dir, os.DirFS(template.dir)); err != nil {
			t.Fatal(err)
		}
		return f
	}
}

func (f *cpStore) path(name string) string { return filepath.Join(f.dir, "checkpoints", name) }

// wantCheckpoints checks that s serves every checkpoint added, the later
// of a size signed twice, and ErrNotFound for every other size, below the
// first, between them and above the latest.
func wantCheckpoints(t *testing.T, s *badger.Store) {
	t.Helper()
	for size := range uint64(cpStep*cpCount + 10) {
		got, err := s.Checkpoint(t.Context(), size)
		want := cpWant(size)
		if want == nil {
			if !errors.Is(err, ledger.ErrNotFound) {
				t.Fatalf("Checkpoint(%d) = %q, %v; want ErrNotFound", size, got, err)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Checkpoint(%d) = %q, %v; want %q", size, got, err, want)
		}
	}
	st, err := s.State(t.Context())
	if latest := uint64(cpStep * cpCount); err != nil || st.CheckpointSize != latest || !bytes.Equal(st.Checkpoint, testCheckpoint(latest)) {
		t.Fatalf("State = checkpoint %d %q, %v; want %d", st.CheckpointSize, st.Checkpoint, err, latest)
	}
}

// checkAll opens the store, checks every checkpoint and Check, and
// returns what Open repaired.
func (f *cpStore) checkAll() []string {
	f.t.Helper()
	s, err := f.open()
	if err != nil {
		f.t.Fatal(err)
	}
	defer s.Close()
	wantCheckpoints(f.t, s)
	if err := s.Check(f.t.Context()); err != nil {
		f.t.Fatalf("Check: %v", err)
	}
	if n, err := badger.CheckpointKeys(s); err != nil || n != 0 {
		f.t.Fatalf("badger holds %d checkpoint keys (%v); want none", n, err)
	}
	return s.Repairs()
}

// Checkpoints are kept in the checkpoint history, not in badger: after
// AddCheckpoint badger holds no checkpoint key, and every checkpoint is
// served, from the open store and after a reopen.
func TestBadgerCheckpointHistory(t *testing.T) {
	f := newCPStore(t)
	s, err := f.open()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddCheckpoint(t.Context(), cpTree, testCheckpoint(cpTree)); err != nil {
		t.Fatal(err)
	}
	if n, err := badger.CheckpointKeys(s); err != nil || n != 0 {
		t.Fatalf("after AddCheckpoint badger holds %d checkpoint keys (%v); want none", n, err)
	}
	if got, err := s.Checkpoint(t.Context(), cpTree); err != nil || !bytes.Equal(got, testCheckpoint(cpTree)) {
		t.Fatalf("Checkpoint(%d) = %q, %v", cpTree, got, err)
	}
	if got, err := s.Checkpoint(t.Context(), cpStep*cpCount); err != nil || !bytes.Equal(got, testCheckpoint(cpStep*cpCount)) {
		t.Fatalf("Checkpoint(%d) = %q, %v", cpStep*cpCount, got, err)
	}
	s.Close()

	f = newCPStore(t)
	if repairs := f.checkAll(); len(repairs) != 0 {
		t.Fatalf("Repairs() = %q; want none", repairs)
	}
	for _, name := range []string{"notes", "index"} {
		if info, err := os.Stat(f.path(name)); err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("checkpoints/%s: %v, %v; want a file of mode 0600", name, info, err)
		}
	}
}

// flip changes one byte of the file at path, at off.
func flip(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x20
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A damaged checkpoint or index record below the history's last is
// reported by Checkpoint and by Check as corruption, never as not found.
func TestBadgerCheckpointHistoryDamage(t *testing.T) {
	newCPStore := cpStores(t)
	const i = 50 // the 51st checkpoint added
	for _, tc := range []struct {
		name string
		off  func(f *cpStore) (path string, off int64)
	}{
		{"note", func(f *cpStore) (string, int64) {
			off, length := f.noteOffset(i)
			return f.path("notes"), off + length - 3
		}},
		{"note's size", func(f *cpStore) (string, int64) {
			off, _ := f.noteOffset(i)
			return f.path("notes"), off + 7
		}},
		{"index record's size", func(f *cpStore) (string, int64) { return f.path("index"), 24*i + 7 }},
		{"index record's offset", func(f *cpStore) (string, int64) { return f.path("index"), 24*i + 15 }},
		{"index record's checksum", func(f *cpStore) (string, int64) { return f.path("index"), 24*i + 22 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCPStore(t)
			path, off := tc.off(f)
			flip(t, path, off)
			s, err := f.open()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			size := f.sizes[i]
			_, err = s.Checkpoint(t.Context(), size)
			wantCorrupt(t, err, "checkpoint history")
			wantCorrupt(t, s.Check(t.Context()), "checkpoint history")
			// The others are served.
			if got, err := s.Checkpoint(t.Context(), f.sizes[i+300]); err != nil || !bytes.Equal(got, cpWant(f.sizes[i+300])) {
				t.Fatalf("Checkpoint(%d) = %q, %v", f.sizes[i+300], got, err)
			}
		})
	}
	for _, tc := range []struct {
		name string
		size uint64
		want string
	}{
		{"size above the tree", cpTree + 1, "the tree has 2000 entries"},
		{"size below the one before", 5, "after one for 1200"},
		{"size repeated without a signature added", cpStep * cpCount, "the later not the earlier with signatures added"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// As a history written by something else could hold.
			f := newCPStore(t)
			s, err := f.open()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := badger.AddCheckpointRecord(s, tc.size, []byte("another\n")); err != nil {
				t.Fatal(err)
			}
			wantCorrupt(t, s.Check(t.Context()), tc.want)
		})
	}
	t.Run("latest note", func(t *testing.T) {
		f := newCPStore(t)
		off, length := f.noteOffset(len(f.sizes) - 1)
		flip(t, f.path("notes"), off+length-3)
		_, err := f.open()
		wantCorrupt(t, err, "checkpoint history")
	})
}

// What a crash during AddCheckpoint leaves at the end of the history,
// never acknowledged, is cut or indexed again at open, and said in
// Repairs; more than that is damage, and the open is refused.
func TestBadgerCheckpointHistoryTornTail(t *testing.T) {
	newCPStore := cpStores(t)
	appendTo := func(t *testing.T, path string, b []byte) {
		t.Helper()
		file, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := file.Write(b); err != nil {
			t.Fatal(err)
		}
		file.Close()
	}
	truncateBy := func(t *testing.T, path string, n int64) {
		t.Helper()
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, info.Size()-n); err != nil {
			t.Fatal(err)
		}
	}
	// A note record for size 2000, as the store would write it.
	record := func(t *testing.T) []byte {
		f := newCPStore(t)
		before, err := os.ReadFile(f.path("notes"))
		if err != nil {
			t.Fatal(err)
		}
		s, err := f.open()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.AddCheckpoint(t.Context(), cpTree, testCheckpoint(cpTree)); err != nil {
			t.Fatal(err)
		}
		s.Close()
		after, err := os.ReadFile(f.path("notes"))
		if err != nil {
			t.Fatal(err)
		}
		return after[len(before):]
	}(t)
	wantRepairs := func(t *testing.T, repairs []string, what ...string) {
		t.Helper()
		if len(repairs) != len(what) {
			t.Fatalf("Repairs() = %q; want %d saying %q", repairs, len(what), what)
		}
		for i, w := range what {
			if !strings.Contains(repairs[i], w) {
				t.Fatalf("Repairs() = %q; want %q", repairs, what)
			}
		}
	}
	for _, tc := range []struct {
		name    string
		do      func(t *testing.T, f *cpStore)
		repairs []string
	}{
		{"note cut short", func(t *testing.T, f *cpStore) { appendTo(t, f.path("notes"), record[:len(record)/2]) },
			[]string{"cut the last 32 bytes of the checkpoint history"}},
		{"note's header cut short", func(t *testing.T, f *cpStore) { appendTo(t, f.path("notes"), record[:10]) },
			[]string{"cut the last 10 bytes of the checkpoint history"}},
		{"note of zeros", func(t *testing.T, f *cpStore) { appendTo(t, f.path("notes"), make([]byte, 4096)) },
			[]string{"cut the last 4096 bytes of the checkpoint history"}},
		{"index record lost", func(t *testing.T, f *cpStore) { truncateBy(t, f.path("index"), 24) },
			[]string{"indexed the last 1 checkpoints"}},
		{"index record cut short", func(t *testing.T, f *cpStore) { truncateBy(t, f.path("index"), 10) },
			[]string{"cut 14 bytes of an index record", "indexed the last 1 checkpoints"}},
		{"index record torn", func(t *testing.T, f *cpStore) { flip(t, f.path("index"), 24*int64(len(f.sizes))-3) },
			[]string{"cut the checkpoint history's index at record 400 of 401", "indexed the last 1 checkpoints"}},
		{"index records lost after the last sync", func(t *testing.T, f *cpStore) {
			// A power loss kept the index file's size but not the
			// records written since its last sync, at 384.
			b, err := os.ReadFile(f.path("index"))
			if err != nil {
				t.Fatal(err)
			}
			clear(b[24*390:])
			if err := os.WriteFile(f.path("index"), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, []string{"cut the checkpoint history's index at record 390 of 401", "indexed the last 11 checkpoints"}},
		{"index lost", func(t *testing.T, f *cpStore) { truncateBy(t, f.path("index"), 24*int64(len(f.sizes))) },
			[]string{"indexed the last 401 checkpoints"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCPStore(t)
			notes, err := os.ReadFile(f.path("notes"))
			if err != nil {
				t.Fatal(err)
			}
			tc.do(t, f)
			wantRepairs(t, f.checkAll(), tc.repairs...)
			wantRepairs(t, f.checkAll())
			if after, err := os.ReadFile(f.path("notes")); err != nil || !bytes.Equal(after, notes) {
				t.Fatalf("the notes after the repair differ from before the crash (%v)", err)
			}
		})
	}
	for _, tc := range []struct {
		name string
		tail func() []byte
	}{
		// More bytes than the record its header gives: written after it.
		{"bytes after a damaged note", func() []byte {
			b := bytes.Clone(record)
			b[len(b)-2] ^= 1
			return append(b, "more"...)
		}},
		{"bytes after zeros", func() []byte { return append(make([]byte, 100), 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCPStore(t)
			appendTo(t, f.path("notes"), tc.tail())
			_, err := f.open()
			wantCorrupt(t, err, "not a checkpoint (nothing was cut)")
		})
	}
}

// A store written before the checkpoint history has its checkpoints moved
// from badger into the history at open, and the keys deleted; a crash
// before the history is renamed into place moves them again, one after
// it deletes the keys left.
func TestBadgerCheckpointMigration(t *testing.T) {
	newCPStore := cpStores(t)
	t.Run("moved", func(t *testing.T) {
		f := newCPStore(t)
		badger.ToOldCheckpoints(t, f.dir, f.opts, false)
		if _, err := os.Stat(filepath.Join(f.dir, "checkpoints")); !os.IsNotExist(err) {
			t.Fatalf("checkpoints/ before the migration: %v", err)
		}
		f.checkAll()
		// The history is the one the store writes: a rotation's two
		// records become one, the later.
		f.sizes = slicesCompact(f.sizes)
		if info, err := os.Stat(f.path("index")); err != nil || info.Size() != 24*int64(len(f.sizes)) {
			t.Fatalf("the index after the migration: %v, %v; want %d records", info, err, len(f.sizes))
		}
	})
	t.Run("crash before the rename", func(t *testing.T) {
		f := newCPStore(t)
		badger.ToOldCheckpoints(t, f.dir, f.opts, false)
		tmp := filepath.Join(f.dir, "checkpoints.tmp")
		if err := os.MkdirAll(tmp, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, "notes"), []byte("half a migration"), 0o600); err != nil {
			t.Fatal(err)
		}
		f.checkAll()
		if _, err := os.Stat(tmp); !os.IsNotExist(err) {
			t.Fatalf("checkpoints.tmp after the migration: %v", err)
		}
	})
	t.Run("crash before the keys were deleted", func(t *testing.T) {
		f := newCPStore(t)
		badger.ToOldCheckpoints(t, f.dir, f.opts, true)
		notes, err := os.ReadFile(f.path("notes"))
		if err != nil {
			t.Fatal(err)
		}
		f.checkAll()
		if after, err := os.ReadFile(f.path("notes")); err != nil || !bytes.Equal(after, notes) {
			t.Fatalf("the history was written again (%v)", err)
		}
	})
	t.Run("checkpoint file ahead of the keys", func(t *testing.T) {
		// A crash of the version before, between the checkpoint file
		// and badger.
		f := newCPStore(t)
		badger.ToOldCheckpoints(t, f.dir, f.opts, false)
		if err := badger.WriteCheckpointFile(f.dir, cpTree, testCheckpoint(cpTree)); err != nil {
			t.Fatal(err)
		}
		s, err := f.open()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got, err := s.Checkpoint(t.Context(), cpTree); err != nil || !bytes.Equal(got, testCheckpoint(cpTree)) {
			t.Fatalf("Checkpoint(%d) = %q, %v", cpTree, got, err)
		}
		if got, err := s.Checkpoint(t.Context(), cpRotated); err != nil || !bytes.Equal(got, cpRotation(cpRotated)) {
			t.Fatalf("Checkpoint(%d) = %q, %v", cpRotated, got, err)
		}
		if err := s.Check(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

func slicesCompact(s []uint64) []uint64 {
	var out []uint64
	for _, v := range s {
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// The checkpoint file restores the latest checkpoint into the history
// when the history lacks it: a crash between the two, or the history lost.
func TestBadgerCheckpointFileRestoresHistory(t *testing.T) {
	newCPStore := cpStores(t)
	t.Run("crash between the file and the history", func(t *testing.T) {
		f := newCPStore(t)
		if err := badger.WriteCheckpointFile(f.dir, cpTree, testCheckpoint(cpTree)); err != nil {
			t.Fatal(err)
		}
		s, err := f.open()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if r := s.Repairs(); len(r) != 1 || !strings.Contains(r[0], "restored the latest signed checkpoint, for tree size 2000, from the checkpoint file into the checkpoint history") {
			t.Fatalf("Repairs() = %q", r)
		}
		if got, err := s.Checkpoint(t.Context(), cpTree); err != nil || !bytes.Equal(got, testCheckpoint(cpTree)) {
			t.Fatalf("Checkpoint(%d) = %q, %v", cpTree, got, err)
		}
		if st, err := s.State(t.Context()); err != nil || st.CheckpointSize != cpTree {
			t.Fatalf("State = %+v, %v", st, err)
		}
		if err := s.Check(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("history lost", func(t *testing.T) {
		f := newCPStore(t)
		if err := os.RemoveAll(filepath.Join(f.dir, "checkpoints")); err != nil {
			t.Fatal(err)
		}
		s, err := f.open()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		latest := uint64(cpStep * cpCount)
		if r := s.Repairs(); len(r) != 1 || !strings.Contains(r[0], "from the checkpoint file into the checkpoint history") {
			t.Fatalf("Repairs() = %q", r)
		}
		if got, err := s.Checkpoint(t.Context(), latest); err != nil || !bytes.Equal(got, testCheckpoint(latest)) {
			t.Fatalf("Checkpoint(%d) = %q, %v", latest, got, err)
		}
		if err := s.Check(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("file older than the history", func(t *testing.T) {
		f := newCPStore(t)
		if err := badger.WriteCheckpointFile(f.dir, 3, testCheckpoint(3)); err != nil {
			t.Fatal(err)
		}
		if r := f.checkAll(); len(r) != 1 || !strings.Contains(r[0], "rebuilt the checkpoint file from the checkpoint history") {
			t.Fatalf("Repairs() = %q", r)
		}
	})
}
