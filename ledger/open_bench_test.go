package ledger_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/proccpu"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
)

// BenchmarkOpen measures opening a badger store of 100,000 and of
// 1,000,000 entries: badger.Open plus ledger.Open, to the ready ledger
// (sequencer started), with default options, and reports the median and
// the largest of the opens' times and the process's CPU time per open
// (getrusage, from the start of badger.Open to the return of
// ledger.Open). Each store is built once and
// kept under $LEDGER_BENCH_DIR (default: a directory in the system's temp
// directory, left there for the next run), as about 8% approval entries
// among decisions like BenchmarkAppend's, committed through the Store
// directly and closed with a signed checkpoint and a clean Close. Run it
// with
//
//	go test -run '^$' -bench Open -benchtime 10x ./ledger/
//
// LEDGER_BENCH_OPEN_SIZES, a comma-separated list of entry counts,
// replaces the two sizes: "10000000" builds and opens the store of ten
// million entries that bench/at-size.sh then serves with ledgerd (about
// ten times the 1M store's build time, and 11 GB of disk).
//
// The first build of the 1M store takes about a minute (signing). With
// LEDGER_BENCH_COLD=1 the page cache is dropped before each open (root
// only: /proc/sys/vm/drop_caches), which every other process on the
// machine feels too.
func BenchmarkOpen(b *testing.B) {
	for _, n := range benchOpenSizes(b) {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) { benchmarkOpen(b, n) })
	}
}

func benchmarkOpen(b *testing.B, n int) {
	ctx := context.Background()
	dir, key := openBenchStore(b, n)
	cold := os.Getenv("LEDGER_BENCH_COLD") == "1"
	var cpu time.Duration
	open := func() time.Duration {
		cpu0 := proccpu.Used()
		start := time.Now()
		s, err := badger.Open(ctx, dir, badger.Options{Logger: discardLogger()})
		if err != nil {
			b.Fatal(err)
		}
		l, err := ledger.Open(ctx, s, key, ledger.Options{CheckpointInterval: -1, Logger: discardLogger()})
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		cpu += proccpu.Used() - cpu0
		if got := l.Size(); got != uint64(n) {
			b.Fatalf("opened %d entries, want %d", got, n)
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		return took
	}
	// A store left by a ledger's Close holds the approval snapshot for
	// its size; one built by an older version gets it now.
	b.Logf("first open: %s", open().Round(time.Millisecond))
	cpu = 0
	var times []time.Duration
	for b.Loop() {
		b.StopTimer()
		if cold {
			dropCaches(b)
		}
		times = append(times, open())
		b.StartTimer()
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms/open-median")
	b.ReportMetric(float64(times[len(times)-1].Microseconds())/1000, "ms/open-max")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(len(times)), "ms-CPU/open")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkReadAtSize reads BenchmarkOpen's cached stores (the same sizes,
// LEDGER_BENCH_OPEN_SIZES) at random indices through the opened ledger:
// each op is one Entry and one InclusionProof at the store's size, of a
// fresh random index, and it reports each one's p50 and p99. The
// ledger caches no entry and no tile between reads, so the page cache is
// what a read meets (warm after the first pass; cold with
// LEDGER_BENCH_COLD=1, which drops it once before the reads).
//
//	LEDGER_BENCH_OPEN_SIZES=10000000 go test -run '^$' -bench ReadAtSize -benchtime 20000x ./ledger/
func BenchmarkReadAtSize(b *testing.B) {
	for _, n := range benchOpenSizes(b) {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			ctx := context.Background()
			dir, key := openBenchStore(b, n)
			s, err := badger.Open(ctx, dir, badger.Options{Logger: discardLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			l, err := ledger.Open(ctx, s, key, ledger.Options{CheckpointInterval: -1, Logger: discardLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			if os.Getenv("LEDGER_BENCH_COLD") == "1" {
				dropCaches(b)
			}
			size := l.Size()
			rng := rand.New(rand.NewPCG(uint64(n), 29))
			var entries, proofs []time.Duration
			for b.Loop() {
				index := rng.Uint64N(size)
				t0 := time.Now()
				if _, err := l.Entry(ctx, index); err != nil {
					b.Fatalf("entry %d: %v", index, err)
				}
				t1 := time.Now()
				if _, err := l.InclusionProof(ctx, index, size); err != nil {
					b.Fatalf("proof of %d: %v", index, err)
				}
				entries, proofs = append(entries, t1.Sub(t0)), append(proofs, time.Since(t1))
			}
			for _, m := range []struct {
				name string
				d    []time.Duration
			}{{"entry", entries}, {"proof", proofs}} {
				slices.Sort(m.d)
				b.ReportMetric(float64(m.d[len(m.d)/2].Nanoseconds())/1e3, "µs-"+m.name+"-p50")
				b.ReportMetric(float64(m.d[len(m.d)*99/100].Nanoseconds())/1e3, "µs-"+m.name+"-p99")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchOpenSizes are the store sizes of BenchmarkOpen and
// BenchmarkReadAtSize: LEDGER_BENCH_OPEN_SIZES, or 100,000 and 1,000,000.
func benchOpenSizes(b *testing.B) []int {
	v := os.Getenv("LEDGER_BENCH_OPEN_SIZES")
	if v == "" {
		return []int{100_000, 1_000_000}
	}
	var sizes []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			b.Fatalf("LEDGER_BENCH_OPEN_SIZES: %q is not an entry count", f)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

func dropCaches(b *testing.B) {
	// Written pages are not dropped: write them out first.
	if err := exec.Command("sync").Run(); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
		b.Fatalf("dropping the page cache (LEDGER_BENCH_COLD=1 needs root): %v", err)
	}
}

// benchRoot returns the directory that keeps the benchmarks' cached
// stores (LEDGER_BENCH_DIR, or def under the temporary directory), and the
// key kept there in the file keyFile, generated (mode 0600) on first use.
func benchRoot(b *testing.B, def, keyFile string) (string, *ledger.Key) {
	b.Helper()
	root := os.Getenv("LEDGER_BENCH_DIR")
	if root == "" {
		root = filepath.Join(os.TempDir(), def)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		b.Fatal(err)
	}
	keyFile = filepath.Join(root, keyFile)
	skey, err := os.ReadFile(keyFile)
	if errors.Is(err, fs.ErrNotExist) {
		var s string
		if s, _, err = ledger.GenerateKey("ledger.example.com/bench"); err == nil {
			skey = []byte(s)
			err = os.WriteFile(keyFile, skey, 0o600)
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	key, err := ledger.ParseKey(skey, ledger.KeyOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return root, key
}

// openBenchStore returns the directory of a closed badger store of n
// entries and the key that signed it, building it if it is not cached.
func openBenchStore(b *testing.B, n int) (string, *ledger.Key) {
	b.Helper()
	root, key := benchRoot(b, "ledger-bench-open", "key")
	name := "store-" + strconv.Itoa(n)
	if !benchApprovals {
		name += "-plain"
	}
	dir := filepath.Join(root, name)
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return dir, key
	}
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
	started := time.Now()
	if err := buildBenchStore(dir, key, n); err != nil {
		b.Fatalf("building the store of %d entries: %v", n, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o600); err != nil {
		b.Fatal(err)
	}
	b.Logf("built a store of %d entries in %s, in %s", n, dir, time.Since(started).Round(time.Second))
	return dir, key
}

// buildBenchStore commits n signed entries to a new badger store in dir,
// in batches of 512, after the empty tree's checkpoint (a log has one
// before its first entry: Open refuses entries without a checkpoint),
// then opens a ledger on it to sign the checkpoint.
// Every 50th entry from 1 on is a needs_approval decision, and 3, 6 and 9
// entries after it come its verdict, consumption and outcome: about 8% of
// the entries are the approval lifecycle's, the rest decisions of ~600
// bytes.
func buildBenchStore(dir string, key *ledger.Key, n int) error {
	ctx := context.Background()
	s, err := badger.Open(ctx, dir, badger.Options{Logger: discardLogger()})
	if err != nil {
		return err
	}
	defer s.Close()
	first, err := ledger.Open(ctx, s, key, ledger.Options{CheckpointInterval: -1, Logger: discardLogger()})
	if err != nil {
		return err
	}
	if err := first.Close(); err != nil {
		return err
	}
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	edge := ledger.NewEdge()
	var prev commit.Digest
	requests := map[uint64]benchRequest{} // by the index of the request
	const batchSize = 512
	messages := make([][]byte, 0, batchSize)
	for start := 0; start < n; start += batchSize {
		messages = messages[:0]
		for i := start; i < min(n, start+batchSize); i++ {
			e, err := benchEntry(i, requests)
			if err != nil {
				return err
			}
			e.Origin, e.KeyID, e.Index, e.Prev = key.Name(), key.ID(), uint64(i), prev
			e.Time = t0.Add(time.Duration(i) * time.Millisecond)
			m, err := e.SignedMessage()
			if err != nil {
				return fmt.Errorf("entry %d: %w", i, err)
			}
			prev = sha256.Sum256(m)
			if e.Decision == entry.NeedsApproval {
				requests[uint64(i)] = benchRequest{prev, uint64(i), e.Principal, e.Params}
			}
			messages = append(messages, m)
		}
		batch := ledger.Batch{Start: uint64(start), Entries: make([][]byte, len(messages)), LeafHashes: make([][ledger.HashSize]byte, len(messages))}
		var wg sync.WaitGroup
		errs := make([]error, len(messages))
		workers := runtime.GOMAXPROCS(0)
		for w := range workers {
			wg.Go(func() {
				for i := w; i < len(messages); i += workers {
					batch.Entries[i], errs[i] = entry.SignedEntry(messages[i], key.Sign(messages[i]))
					batch.LeafHashes[i] = entry.LeafHash(batch.Entries[i])
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		if batch.Tiles, err = edge.AppendLeaves(batch.LeafHashes); err != nil {
			return err
		}
		if err := s.Commit(ctx, batch); err != nil {
			return err
		}
	}
	l, err := ledger.Open(ctx, s, key, ledger.Options{CheckpointInterval: -1, Logger: discardLogger()})
	if err != nil {
		return err
	}
	return l.Close()
}

// benchApprovals: the benchmark's stores hold the approval lifecycles
// (every 50th entry a request), unless LEDGER_BENCH_NO_APPROVALS=1, which
// makes them of decisions alone (in store-N-plain): the lifecycle state
// of an approval stays in memory (docs/approvals.md), and 2 % of the
// entries is far more approvals than most logs hold.
var benchApprovals = os.Getenv("LEDGER_BENCH_NO_APPROVALS") != "1"

// benchRequest is an approval request of the benchmark's log.
type benchRequest struct {
	id        commit.Digest
	index     uint64
	principal string
	params    commit.Commitment
}

// benchEntry returns entry i of the benchmark's log, its chain fields
// unset.
func benchEntry(i int, requests map[uint64]benchRequest) (*entry.Entry, error) {
	if i == 0 {
		return &entry.Entry{Kind: entry.KindApprovalConfig, PendingTTL: time.Hour, ExecutionTTL: time.Hour}, nil
	}
	if i > 9 {
		at := uint64(i) - uint64(i%50)
		if r, ok := requests[at+1]; ok && i%50 >= 4 && i%50 <= 10 {
			switch i%50 - 1 {
			case 3:
				return &entry.Entry{Kind: entry.KindApproval, ApprovalID: r.id, Request: r.index, Approver: "approver-1",
					Verdict: entry.Approve, PreviewDigest: sha256.Sum256([]byte("preview"))}, nil
			case 6:
				return &entry.Entry{Kind: entry.KindConsumption, ApprovalID: r.id, Request: r.index, Mediator: "mediator-1",
					Principal: r.principal, Action: "send_email", Params: r.params}, nil
			case 9:
				delete(requests, r.index)
				return &entry.Entry{Kind: entry.KindOutcome, ApprovalID: r.id, Consumption: r.index + 6, Mediator: "mediator-1",
					Result: entry.Succeeded}, nil
			}
		}
	}
	rec, err := makeRecord(i)
	if err != nil {
		return nil, err
	}
	e := &entry.Entry{Mediator: rec.Mediator, Principal: rec.Principal, Action: rec.Action, Decision: rec.Decision,
		Policies: entry.SortPolicies(rec.Policies), Params: rec.Params, Tiers: rec.Tiers}
	if i%50 == 1 && benchApprovals {
		e.Decision = entry.NeedsApproval
	}
	if err := e.SetAttributes(rec.Attributes); err != nil {
		return nil, err
	}
	return e, nil
}
