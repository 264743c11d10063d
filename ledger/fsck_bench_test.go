package ledger_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/proccpu"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
)

// BenchmarkFsck measures ledger.Fsck over a badger store on disk of
// $LEDGER_BENCH_FSCK_ENTRIES entries (default 200,000), without entry
// signatures (the default) and with them, on every core. The store is
// built once, by appending through a ledger as ledgerd does (~300-byte
// attributes, as BenchmarkAppend), and kept under $LEDGER_BENCH_DIR
// (default: the system's temp directory) for the next run. Run it with
//
//	go test -run '^$' -bench Fsck -benchtime 3x ./ledger/
//
// It reports entries/s and the process's CPU per entry (user and system,
// from getrusage), which is steadier than a rate on a shared machine.
func BenchmarkFsck(b *testing.B) {
	n := 200_000
	if v := os.Getenv("LEDGER_BENCH_FSCK_ENTRIES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("LEDGER_BENCH_FSCK_ENTRIES=%q: not a number of entries", v)
		}
	}
	dir, key := fsckBenchStore(b, n)
	ctx := context.Background()
	s, err := badger.Open(ctx, dir, badger.Options{Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, signatures := range []bool{false, true} {
		b.Run(fmt.Sprintf("entries=%d/signatures=%v", n, signatures), func(b *testing.B) {
			var elapsed time.Duration
			cpu0 := proccpu.Used()
			for b.Loop() {
				rep, err := ledger.Fsck(ctx, s, key, ledger.FsckOptions{Signatures: signatures})
				if err != nil {
					b.Fatal(err)
				}
				if rep.Checked != uint64(n) {
					b.Fatalf("checked %d entries, want %d", rep.Checked, n)
				}
				elapsed += rep.Elapsed
			}
			cpu := proccpu.Used() - cpu0
			b.ReportMetric(float64(n)*float64(b.N)/elapsed.Seconds(), "entries/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(n)/float64(b.N), "µs-cpu/entry")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// fsckBenchStore returns the directory of a closed badger store of n
// entries and its key, building it if it is not cached.
func fsckBenchStore(b *testing.B, n int) (string, *ledger.Key) {
	b.Helper()
	root, key := benchRoot(b, "ledger-bench-fsck", "fsck-key")
	dir := filepath.Join(root, "fsck-store-"+strconv.Itoa(n))
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return dir, key
	}
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
	started := time.Now()
	ctx := context.Background()
	s, err := badger.Open(ctx, dir, badger.Options{Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	l, err := ledger.Open(ctx, s, key, ledger.Options{Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	records := make([]ledger.Record, 1000)
	for i := range records {
		records[i] = testRecord(b, i)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 256 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if _, err := l.Append(ctx, records[i%len(records)]); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if b.Failed() {
		b.FailNow()
	}
	if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o600); err != nil {
		b.Fatal(err)
	}
	b.Logf("built a store of %d entries in %s, in %s", n, dir, time.Since(started).Round(time.Second))
	return dir, key
}

// BenchmarkAppendDuringFsck measures appends as BenchmarkAppend does (64
// appenders, four appends in flight each) to a badger store that holds the
// $LEDGER_BENCH_FSCK_ENTRIES entries of BenchmarkFsck's store (a copy),
// without (fsck=false) and with (fsck=true) online checks (Ledger.Fsck
// with one worker, as ledgerd runs them) one after another throughout.
// Run the two alternately, with
//
//	go test -run '^$' -bench AppendDuringFsck -benchtime 50000x -count 6 ./ledger/
//
// It reports appends/s, the process's CPU per append, and the entries/s
// of the online checks.
func BenchmarkAppendDuringFsck(b *testing.B) {
	n := 200_000
	if v := os.Getenv("LEDGER_BENCH_FSCK_ENTRIES"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	src, key := fsckBenchStore(b, n)
	dir := filepath.Join(b.TempDir(), "store")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		b.Fatal(err)
	}
	badger.SetMemoryLimit()
	ctx := context.Background()
	s, err := badger.Open(ctx, dir, badger.Options{Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	l, err := ledger.Open(ctx, s, key, ledger.Options{Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	records := make([]ledger.Record, 1000)
	for i := range records {
		records[i] = testRecord(b, i)
	}
	for _, withFsck := range []bool{false, true} {
		b.Run(fmt.Sprintf("fsck=%v", withFsck), func(b *testing.B) {
			stop := make(chan struct{})
			fsckDone := make(chan struct{})
			var checked atomic.Uint64
			var fsckTime atomic.Int64
			go func() {
				defer close(fsckDone)
				for withFsck {
					select {
					case <-stop:
						return
					default:
					}
					rep, err := l.Fsck(ctx, ledger.FsckOptions{Workers: 1})
					if err != nil {
						b.Error(err)
						return
					}
					checked.Add(rep.Checked)
					fsckTime.Add(int64(rep.Elapsed))
				}
			}()
			cpu0 := proccpu.Used()
			start := time.Now()
			var next atomic.Int64
			var wg sync.WaitGroup
			for range 64 * 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1)) - 1
						if i >= b.N {
							return
						}
						if _, err := l.Append(ctx, records[i%len(records)]); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			cpu := proccpu.Used() - cpu0
			close(stop)
			<-fsckDone
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "µs-cpu/append")
			if withFsck && fsckTime.Load() > 0 {
				b.ReportMetric(float64(checked.Load())/time.Duration(fsckTime.Load()).Seconds(), "fsck-entries/s")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}
