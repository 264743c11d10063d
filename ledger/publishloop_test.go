package ledger_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
)

// countingStore counts the checkpoints stored and when each was.
type countingStore struct {
	ledger.Store
	mu    sync.Mutex
	added []time.Time
}

func (s *countingStore) AddCheckpoint(ctx context.Context, size uint64, signed []byte) error {
	err := s.Store.AddCheckpoint(ctx, size, signed)
	if err == nil {
		s.mu.Lock()
		s.added = append(s.added, time.Now())
		s.mu.Unlock()
	}
	return err
}

func (s *countingStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.added)
}

func openInterval(t *testing.T, s ledger.Store, interval time.Duration) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), s, testKey(t), ledger.Options{CheckpointInterval: interval, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// An entry appended to an idle log is covered by a checkpoint at once, not
// at the end of an interval: with an interval of an hour, the first append
// is covered (within a bound no loaded machine reaches), and the next,
// inside the hour, is not.
func TestPublishLoneAppendAtOnce(t *testing.T) {
	s := &countingStore{Store: memory.New()}
	l := openInterval(t, s, time.Hour)
	if n := s.count(); n != 1 {
		t.Fatalf("%d checkpoints stored at Open; want the empty tree's", n)
	}
	appendN(t, l, 0, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, size, err := l.WaitCheckpoint(ctx, 1); err != nil || size != 1 {
		t.Fatalf("WaitCheckpoint(1) = size %d, %v; want the lone append covered at once", size, err)
	}
	appendN(t, l, 1, 1)
	time.Sleep(200 * time.Millisecond)
	if _, size := l.Checkpoint(); size != 1 {
		t.Fatalf("a checkpoint of size %d was signed within the hour after the previous one", size)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, size := l.Checkpoint(); size != 2 {
		t.Fatalf("Close signed a checkpoint of size %d; want 2", size)
	}
}

// A log that does not grow signs nothing, however short the interval.
func TestPublishIdleSignsNothing(t *testing.T) {
	s := &countingStore{Store: memory.New()}
	l := openInterval(t, s, time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	if n := s.count(); n != 1 {
		t.Fatalf("%d checkpoints stored by an empty idle log; want the empty tree's", n)
	}
	appendN(t, l, 0, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := l.WaitCheckpoint(ctx, 20); err != nil {
		t.Fatal(err)
	}
	n, signed := s.count(), l.CheckpointTime()
	time.Sleep(100 * time.Millisecond)
	if got := s.count(); got != n || !l.CheckpointTime().Equal(signed) {
		t.Fatalf("an idle log stored %d more checkpoints in 100 ms", got-n)
	}
}

// Under load, checkpoint signings start at least the interval apart:
// every one counted started after the first append and before the count
// was read, so there are at most (that time / interval) + 1 of them, on
// a machine however loaded. Every appended entry is covered in the end.
func TestPublishSpacingUnderLoad(t *testing.T) {
	const interval = 40 * time.Millisecond
	s := &countingStore{Store: memory.New()}
	l := openInterval(t, s, interval)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var appended atomic.Int64
	start := time.Now()
	for g := range 8 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				if _, err := l.Append(context.Background(), testRecord(t, g*1_000_000+i)); err != nil {
					t.Error(err)
					return
				}
				appended.Add(1)
			}
		})
	}
	time.Sleep(400 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	n, elapsed := s.count()-1, time.Since(start) // without the empty tree's, at Open
	if most := int(elapsed/interval) + 1; n > most {
		t.Errorf("%d checkpoints signed in %v of appends; at most %d start %v apart", n, elapsed, most, interval)
	}
	if n < 1 {
		t.Errorf("no checkpoint signed in %v of appends", elapsed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := l.WaitCheckpoint(ctx, uint64(appended.Load())); err != nil {
		t.Fatalf("no checkpoint covers the %d entries appended: %v", appended.Load(), err)
	}
	t.Logf("%d entries, %d checkpoints in %v", appended.Load(), n, elapsed)
}
