package badger_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/storage/badger"
)

// What Open repairs it says, in Repairs and in a warning: a frame a crash
// cut short, erased; the checkpoint file, lost, rebuilt from the
// checkpoint history; the history, lost or cut short, rebuilt. A
// store closed cleanly needs no repair.
func TestBadgerRepairs(t *testing.T) {
	opened := func(t *testing.T, f *frameStore) ([]string, []loggedRecord) {
		t.Helper()
		rec := &recordLog{}
		opts := f.opts
		opts.Logger = slog.New(&recordingHandler{log: rec})
		s, err := badger.Open(t.Context(), f.dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		repairs := s.Repairs()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		var warnings []loggedRecord
		for _, r := range rec.all() {
			if r.level >= slog.LevelWarn && r.component == "" && !strings.Contains(r.msg, "memory limit") {
				warnings = append(warnings, r)
			}
		}
		return repairs, warnings
	}
	wantRepair := func(t *testing.T, f *frameStore, what string) {
		t.Helper()
		repairs, warnings := opened(t, f)
		if len(repairs) != 1 || !strings.Contains(repairs[0], what) {
			t.Fatalf("Repairs() = %q; want one that says %q", repairs, what)
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0].msg, what) {
			t.Fatalf("warnings %+v; want one that says %q", warnings, what)
		}
		if repairs, warnings := opened(t, f); len(repairs) != 0 || len(warnings) != 0 {
			t.Fatalf("reopened after the repair: Repairs() = %q, warnings %+v; want none", repairs, warnings)
		}
	}

	t.Run("closed cleanly", func(t *testing.T) {
		f := newFrameStore(t)
		f.checkpointAt = 100
		f.commit(2)
		if repairs, warnings := opened(t, f); len(repairs) != 0 || len(warnings) != 0 {
			t.Fatalf("Repairs() = %q, warnings %+v; want none", repairs, warnings)
		}
	})
	t.Run("torn frame", func(t *testing.T) {
		f := newFrameStore(t)
		f.commit(2)
		restore := f.snapshotIndex()
		segs := f.segments()
		last := segs[len(segs)-1]
		before := frames(t, last)
		f.commit(1)
		frame := frames(t, last)[len(before):]
		f.batches = f.batches[:2]
		restore()
		if err := os.WriteFile(last, append(bytes.Clone(before), frame[:len(frame)/2]...), 0o600); err != nil {
			t.Fatal(err)
		}
		wantRepair(t, f, "cut short (never acknowledged)")
		f.check()
	})
	t.Run("checkpoint file lost", func(t *testing.T) {
		f := newFrameStore(t)
		f.checkpointAt = 200
		f.commit(3)
		if err := os.Remove(filepath.Join(f.dir, "checkpoint")); err != nil {
			t.Fatal(err)
		}
		wantRepair(t, f, "rebuilt the checkpoint file from the checkpoint history")
		if _, err := os.Stat(filepath.Join(f.dir, "checkpoint")); err != nil {
			t.Fatal(err)
		}
	})
}
