package ledger_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/proccpu"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// BenchmarkAppend measures durable appends to a badger store on disk from
// 64 concurrent appenders, each in a closed loop (append, wait for the
// receipt, append again) with one (depth=1) or four (depth=4) appends in
// flight, with ~300-byte attributes and default options. Like ledgerd, it
// sets the memory limit that goes with the store's default options
// (badger.MemoryLimit) unless GOMEMLIMIT is set. Run it over 200,000
// entries with
//
//	go test -run '^$' -bench 'Append/' -benchtime 200000x ./ledger/
//
// It reports appends/s, the append latency median and p99, the latency
// from append to the first signed checkpoint covering the entry (p99), the
// process's CPU time per append (user + system, getrusage over the timed
// part, every goroutine: appenders, ledger, badger, GC) and its CPU use in
// per cent of one core (200 is both cores of a 2-core machine busy), the
// checkpoints signed per second, their mean size in bytes and the p99 of
// their stores, and the process's peak RSS.
// LEDGER_BENCH_CHECKPOINT_INTERVAL (a Go duration) sets
// Options.CheckpointInterval, to compare intervals in one sitting
// (docs/performance.md, "Checkpoint latency"), and
// LEDGER_BENCH_MIN_COMMIT_INTERVAL sets Options.MinCommitInterval.
func BenchmarkAppend(b *testing.B) {
	for _, depth := range []int{1, 4} {
		b.Run(fmt.Sprintf("appenders=64/depth=%d", depth), func(b *testing.B) { benchmarkAppend(b, 64, depth, false) })
	}
	// As a gateway appends: every entry with an idempotency key, which
	// the ledger looks up before sequencing it and the store checks again
	// when it commits.
	b.Run("appenders=64/depth=4/keyed", func(b *testing.B) { benchmarkAppend(b, 64, 4, true) })
}

// benchmarkAppend runs appenders that each keep depth appends in flight
// (depth goroutines in closed loops).
func benchmarkAppend(b *testing.B, appenders, depth int, keyed bool) {
	badger.SetMemoryLimit()
	ctx := context.Background()
	s, err := badger.Open(ctx, b.TempDir(), badger.Options{Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ts := &timedStore{Store: s}
	var batches, batched atomic.Int64
	opts := ledger.Options{Logger: discardLogger(), OnBatch: func(n int) {
		batches.Add(1)
		batched.Add(int64(n))
	}}
	if v := os.Getenv("LEDGER_BENCH_CHECKPOINT_INTERVAL"); v != "" {
		if opts.CheckpointInterval, err = time.ParseDuration(v); err != nil {
			b.Fatalf("LEDGER_BENCH_CHECKPOINT_INTERVAL: %v", err)
		}
	}
	if v := os.Getenv("LEDGER_BENCH_MIN_COMMIT_INTERVAL"); v != "" {
		if opts.MinCommitInterval, err = time.ParseDuration(v); err != nil {
			b.Fatalf("LEDGER_BENCH_MIN_COMMIT_INTERVAL: %v", err)
		}
	}
	l, err := ledger.Open(ctx, ts, testKey(b), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	records := make([]ledger.Record, 1000)
	for i := range records {
		records[i] = testRecord(b, i)
	}

	latencies := make([]time.Duration, b.N)
	var next atomic.Int64
	// Every 100th entry is sampled for the time from Append to the first
	// signed checkpoint that covers it.
	type sample struct {
		index     uint64
		submitted time.Time
	}
	var mu sync.Mutex
	var pending []sample
	var covered []time.Duration
	stopWatch := make(chan struct{})
	watchDone := make(chan struct{})
	var maxGap time.Duration
	go func() {
		defer close(watchDone)
		var lastSize uint64
		lastChange := time.Now()
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(2 * time.Millisecond):
			}
			_, size := l.Checkpoint()
			now := time.Now()
			if size != lastSize {
				maxGap = max(maxGap, now.Sub(lastChange))
				lastSize, lastChange = size, now
			}
			mu.Lock()
			kept := pending[:0]
			for _, s := range pending {
				if s.index < size {
					covered = append(covered, now.Sub(s.submitted))
				} else {
					kept = append(kept, s)
				}
			}
			pending = kept
			mu.Unlock()
		}
	}()

	b.ResetTimer()
	start := time.Now()
	cpu0 := proccpu.Used()
	cps0, _ := ts.checkpoints()
	var wg sync.WaitGroup
	for range appenders * depth {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				rec := records[i%len(records)]
				if keyed {
					rec.IdempotencyKey = "bench-" + strconv.Itoa(i)
				}
				t0 := time.Now()
				r, err := l.Append(ctx, rec)
				if err != nil {
					b.Error(err)
					return
				}
				latencies[i] = time.Since(t0)
				if i%100 == 0 {
					mu.Lock()
					pending = append(pending, sample{r.Index, t0})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := proccpu.Used() - cpu0
	cps, cpBytes := ts.checkpoints()
	cps -= cps0
	b.StopTimer()
	// Wait for a checkpoint to cover everything, then stop the watcher.
	for waited := time.Duration(0); ; waited += 5 * time.Millisecond {
		if _, size := l.Checkpoint(); size >= uint64(b.N) {
			break
		}
		if waited > 30*time.Second {
			b.Fatalf("no checkpoint covers the %d entries after 30 s", b.N)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(5 * time.Millisecond)
	close(stopWatch)
	<-watchDone

	slices.Sort(latencies)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "µs-CPU/append")
	b.ReportMetric(100*cpu.Seconds()/elapsed.Seconds(), "%CPU")
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "ms-p99")
	if len(covered) > 0 {
		slices.Sort(covered)
		b.ReportMetric(float64(covered[len(covered)*99/100].Milliseconds()), "ms-checkpointed-p99")
	}
	b.ReportMetric(float64(maxGap.Milliseconds()), "ms-max-checkpoint-gap")
	b.ReportMetric(float64(cps)/elapsed.Seconds(), "checkpoints/s")
	if cps > 0 {
		b.ReportMetric(float64(cpBytes)/float64(cps+cps0), "B/checkpoint")
	}
	if n := batches.Load(); n > 0 {
		b.ReportMetric(float64(batched.Load())/float64(n), "entries/batch")
	}
	ts.mu.Lock()
	slices.Sort(ts.commits)
	if n := len(ts.commits); n > 0 {
		b.ReportMetric(float64(ts.commits[n/2].Microseconds())/1000, "ms-commit-p50")
		b.ReportMetric(float64(ts.commits[n*99/100].Microseconds())/1000, "ms-commit-p99")
	}
	slices.Sort(ts.cpStores)
	if n := len(ts.cpStores); n > 0 {
		b.ReportMetric(float64(ts.cpStores[n*99/100].Microseconds())/1000, "ms-checkpoint-store-p99")
	}
	ts.mu.Unlock()
	if rss := procStatus("VmHWM:"); rss > 0 {
		b.ReportMetric(float64(rss)/(1<<20), "MiB-peak-RSS")
	}
	// The resident set at the end, split: anonymous memory (the heap) and
	// file pages (badger's mapped tables and value-log files, which the
	// kernel can reclaim).
	b.ReportMetric(float64(procStatus("RssAnon:"))/(1<<20), "MiB-anon-end")
	b.ReportMetric(float64(procStatus("RssFile:"))/(1<<20), "MiB-file-end")
}

// timedStore records how long each Commit takes.
type timedStore struct {
	ledger.Store
	mu       sync.Mutex
	commits  []time.Duration
	gaps     []time.Duration
	last     time.Time
	cps      int             // checkpoints stored
	cpBytes  int             // their signed notes' bytes
	cpStores []time.Duration // how long each AddCheckpoint took
}

func (s *timedStore) Commit(ctx context.Context, b ledger.Batch) error {
	t0 := time.Now()
	err := s.Store.Commit(ctx, b)
	d := time.Since(t0)
	s.mu.Lock()
	s.commits = append(s.commits, d)
	if !s.last.IsZero() {
		s.gaps = append(s.gaps, t0.Sub(s.last))
	}
	s.last = time.Now()
	s.mu.Unlock()
	return err
}

func (s *timedStore) AddCheckpoint(ctx context.Context, size uint64, signed []byte) error {
	t0 := time.Now()
	err := s.Store.AddCheckpoint(ctx, size, signed)
	if err == nil {
		d := time.Since(t0)
		s.mu.Lock()
		s.cps++
		s.cpBytes += len(signed)
		s.cpStores = append(s.cpStores, d)
		s.mu.Unlock()
	}
	return err
}

// checkpoints returns the number of checkpoints stored and their bytes.
func (s *timedStore) checkpoints() (n, bytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cps, s.cpBytes
}

// procStatus reads a size field of /proc/self/status ("VmHWM:" for the
// peak resident set) in bytes, or 0.
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkInclusionProof measures an inclusion proof by index at tree
// size 1,000,000, read from the tiles of a badger store. The tree is built
// by committing batches straight to the store (proofs read tiles, not
// entries, so the entries are 600 bytes of filler); it takes about a
// minute. Run it with
//
//	go test -run '^$' -bench InclusionProof -benchtime 20000x ./ledger/
func BenchmarkInclusionProof(b *testing.B) {
	const size = 1_000_000
	ctx := context.Background()
	s, err := badger.Open(ctx, b.TempDir(), badger.Options{Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	e := ledger.NewEdge()
	const batch = 500
	filler := make([]byte, 600)
	for start := uint64(0); start < size; start += batch {
		bt := ledger.Batch{Start: start}
		for i := range uint64(batch) {
			entry := append(strconv.AppendUint(nil, start+i, 10), filler...)
			bt.Entries = append(bt.Entries, entry)
			bt.LeafHashes = append(bt.LeafHashes, leafHash(entry))
		}
		if bt.Tiles, err = e.AppendLeaves(bt.LeafHashes); err != nil {
			b.Fatal(err)
		}
		if err := s.Commit(ctx, bt); err != nil {
			b.Fatal(err)
		}
	}
	root := e.Root()
	if got, err := ledger.RootFromTiles(ctx, s, size); err != nil || !bytes.Equal(got, root) {
		b.Fatalf("root from tiles %x, %v; want %x", got, err, root)
	}
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		index := uint64(i*7919) % size
		t0 := time.Now()
		// A fresh reader each time: no tile is cached between proofs.
		p, err := ledger.InclusionProofFromTiles(ctx, s, index, size)
		latencies = append(latencies, time.Since(t0))
		if err != nil {
			b.Fatal(fmt.Errorf("proof %d: %w", index, err))
		}
		if i%1000 == 0 {
			lh := leafHash(append(strconv.AppendUint(nil, index, 10), filler...))
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, index, size, lh[:], p, root); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds()), "µs-p50")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds()), "µs-p99")
}

func leafHash(entry []byte) [ledger.HashSize]byte {
	return [ledger.HashSize]byte(rfc6962.DefaultHasher.HashLeaf(entry))
}
