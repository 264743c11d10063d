package postgres_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lcommit "github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
	"github.com/decisionledger/ledger/storage/postgres"
)

// BenchmarkAppendStores measures durable appends through ledger.Append
// from 64 appenders, each a closed loop (append, wait for the receipt,
// append again), with the entries of ledger's BenchmarkAppend (~300-byte
// attributes) and default ledger options (every entry signed, every batch
// durable before its receipts), on a badger store in a temporary
// directory and on a PostgreSQL store (a fresh database on internal/pgtest's
// server). The two are sub-benchmarks of one run, so that benchstat puts
// them side by side (-col /store). -count runs all of one before the
// other; to alternate, run the test binary several times:
//
//	go test -c -o stores.test ./storage/postgres/
//	for i in 1 2 3 4 5 6; do
//	  LEDGER_CI=1 ./stores.test -test.run '^$' -test.bench AppendStores -test.benchtime 50000x
//	done
//
// Without PostgreSQL the postgres half skips (fails with LEDGER_CI=1).
// Each reports appends/s, the append latency median and p99, entries per
// batch, and the store's Commit median and p99.
func BenchmarkAppendStores(b *testing.B) {
	b.Run("store=badger", func(b *testing.B) {
		s, err := badger.Open(b.Context(), b.TempDir(), badger.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchmarkAppends(b, s, 64)
	})
	b.Run("store=postgres", func(b *testing.B) {
		url := pgtest.Shared(b).NewDatabase(b)
		s, err := postgres.Open(b.Context(), url, postgres.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchmarkAppends(b, s, 64)
	})
}

// benchmarkAppends appends b.N entries to a new ledger on store from
// appenders goroutines in closed loops.
func benchmarkAppends(b *testing.B, store ledger.Store, appenders int) {
	ctx := context.Background()
	skey, _, err := ledger.GenerateKey("ledger.example.com/bench")
	if err != nil {
		b.Fatal(err)
	}
	key, err := ledger.ParseKey([]byte(skey), ledger.KeyOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ts := &timedStore{Store: store}
	var batches, batched atomic.Int64
	l, err := ledger.Open(ctx, ts, key, ledger.Options{Logger: slog.New(slog.DiscardHandler), OnBatch: func(n int) {
		batches.Add(1)
		batched.Add(int64(n))
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	records := make([]ledger.Record, 1000)
	for i := range records {
		records[i] = benchRecord(b, i)
	}
	latencies := make([]time.Duration, b.N)
	var next atomic.Int64

	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range appenders {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				if _, err := l.Append(ctx, records[i%len(records)]); err != nil {
					b.Error(err)
					return
				}
				latencies[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()

	slices.Sort(latencies)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "ms-p99")
	if n := batches.Load(); n > 0 {
		b.ReportMetric(float64(batched.Load())/float64(n), "entries/batch")
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if n := len(ts.commits); n > 0 {
		slices.Sort(ts.commits)
		b.ReportMetric(float64(ts.commits[n/2].Microseconds())/1000, "ms-commit-p50")
		b.ReportMetric(float64(ts.commits[n*99/100].Microseconds())/1000, "ms-commit-p99")
	}
}

// benchRecord is ledger's BenchmarkAppend record: about 300 bytes of
// attributes.
func benchRecord(b *testing.B, i int) ledger.Record {
	b.Helper()
	c, err := lcommit.Params(fmt.Appendf(nil, `{"to":"user%d@example.com","subject":"report %d","amount_minor":%d}`, i, i, i*100))
	if err != nil {
		b.Fatal(err)
	}
	attrs := fmt.Sprintf(`{"recipient_domain":"example.com","amount_minor":%d,"currency":"EUR","payee_known":true,`+
		`"endpoint_host":"api.example.org","route_shape":"/v1/invoices/{id}","resource_dir":"/records/2026/11",`+
		`"attachment_count":2,"body_size":48213,"purpose":"monthly-billing-run","urgent":false}`, i*100)
	return ledger.Record{
		Mediator: "mediator-1", Principal: fmt.Sprintf("agent-%d", i%7), Action: "send_email",
		Decision: entry.Allow, Policies: []string{"mail.domains", "mail.allow"},
		Params: c, Tiers: sha256.Sum256([]byte("tiers")),
		Attributes: []byte(attrs),
	}
}

// timedStore records how long each Commit takes.
type timedStore struct {
	ledger.Store
	mu      sync.Mutex
	commits []time.Duration
}

func (s *timedStore) Commit(ctx context.Context, b ledger.Batch) error {
	t0 := time.Now()
	err := s.Store.Commit(ctx, b)
	d := time.Since(t0)
	s.mu.Lock()
	s.commits = append(s.commits, d)
	s.mu.Unlock()
	return err
}
