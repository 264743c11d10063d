package ledger_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
	"pgregory.net/rapid"
)

func testKey(t testing.TB) *ledger.Key {
	t.Helper()
	skey, _, err := ledger.GenerateKey("ledger.example.com/test")
	if err != nil {
		t.Fatal(err)
	}
	k, err := ledger.ParseKey([]byte(skey), ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testRecord(t testing.TB, i int) ledger.Record {
	t.Helper()
	r, err := makeRecord(i)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// makeRecord returns a realistic record: about 300 bytes of attributes.
func makeRecord(i int) (ledger.Record, error) {
	params := fmt.Sprintf(`{"to":"user%d@example.com","subject":"report %d","amount_minor":%d}`, i, i, i*100)
	c, err := commit.Params([]byte(params))
	if err != nil {
		return ledger.Record{}, err
	}
	attrs := fmt.Sprintf(`{"recipient_domain":"example.com","amount_minor":%d,"currency":"EUR","payee_known":true,`+
		`"endpoint_host":"api.example.org","route_shape":"/v1/invoices/{id}","resource_dir":"/records/2026/11",`+
		`"attachment_count":2,"body_size":48213,"purpose":"monthly-billing-run","urgent":false}`, i*100)
	return ledger.Record{
		Mediator: "mediator-1", Principal: fmt.Sprintf("agent-%d", i%7), Action: "send_email",
		Decision: entry.Allow, Policies: []string{"mail.domains", "mail.allow"},
		Params: c, Tiers: sha256.Sum256([]byte("tiers")),
		Attributes: []byte(attrs),
	}, nil
}

func openTest(t testing.TB, s ledger.Store, k *ledger.Key) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), s, k, ledger.Options{CheckpointInterval: -1, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// openUnpaced is openTest committing as soon as the store is free
// (MinCommitInterval -1): appendN's eight appenders then wait for no
// 1 ms pacing, in which the property test spent 8 of its 20 s idle.
func openUnpaced(t testing.TB, s ledger.Store, k *ledger.Key) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), s, k, ledger.Options{CheckpointInterval: -1, MinCommitInterval: -1, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// appendN appends n records from up to 8 goroutines at once.
func appendN(t testing.TB, l *ledger.Ledger, from, n int) []ledger.Receipt {
	t.Helper()
	receipts := make([]ledger.Receipt, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			receipts[i], errs[i] = l.Append(context.Background(), testRecord(t, from+i))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return receipts
}

// checkLog verifies everything stored with code we did not write: every
// checkpoint with note and formats/log, every inclusion and consistency
// proof with merkle/proof, and the entries' signatures and chain.
func checkLog(t testing.TB, l *ledger.Ledger, k *ledger.Key, checkpoints map[uint64][]byte, draw func(max uint64) uint64) {
	t.Helper()
	ctx := context.Background()
	v, err := note.NewVerifier(k.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	roots := map[uint64][]byte{}
	for size, signed := range checkpoints {
		cp, _, _, err := log.ParseCheckpoint(signed, k.Name(), v)
		if err != nil {
			t.Fatalf("checkpoint %d: %v", size, err)
		}
		if _, err := note.Open(signed, note.VerifierList(v)); err != nil {
			t.Fatalf("checkpoint %d: note.Open: %v", size, err)
		}
		if cp.Size != size {
			t.Fatalf("checkpoint for %d says size %d", size, cp.Size)
		}
		roots[size] = cp.Hash
	}
	var prev commit.Digest
	leafHashes := make([][]byte, l.Size())
	for i := range l.Size() {
		b, err := l.Entry(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		e, err := entry.Parse(b)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if e.Index != i || e.Prev != prev {
			t.Fatalf("entry %d: index %d, prev %s, want prev %s", i, e.Index, e.Prev, prev)
		}
		if err := e.Verify(k.ID(), k.Public()); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		prev, _ = e.Hash()
		lh := entry.LeafHash(b)
		leafHashes[i] = lh[:]
	}
	for size, root := range roots {
		for range 5 {
			if size == 0 {
				break
			}
			index := draw(size - 1)
			p, err := l.InclusionProof(ctx, index, size)
			if err != nil {
				t.Fatalf("inclusion proof (%d, %d): %v", index, size, err)
			}
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, index, size, leafHashes[index], p, root); err != nil {
				t.Fatalf("inclusion proof (%d, %d) does not verify: %v", index, size, err)
			}
			var lh [ledger.HashSize]byte
			copy(lh[:], leafHashes[index])
			gotIndex, p2, err := l.InclusionProofByHash(ctx, lh, size)
			if err != nil || gotIndex != index || proof.VerifyInclusion(rfc6962.DefaultHasher, index, size, leafHashes[index], p2, root) != nil {
				t.Fatalf("inclusion proof by hash (%d, %d): %d, %v", index, size, gotIndex, err)
			}
		}
		for size1, root1 := range roots {
			if size1 > size {
				continue
			}
			p, err := l.ConsistencyProof(ctx, size1, size)
			if err != nil {
				t.Fatalf("consistency proof (%d, %d): %v", size1, size, err)
			}
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, size1, size, p, root1, root); err != nil {
				t.Fatalf("consistency proof (%d, %d) does not verify: %v", size1, size, err)
			}
		}
	}
}

// TestPropertyProofsVerify: for random append sequences (batch shapes,
// checkpoint moments, reopenings), every checkpoint, inclusion proof and
// consistency proof verifies with code we did not write. The ledger
// commits unpaced: batches of one to eight entries, as the eight
// appenders happen to queue, where the 1 ms pacing made most of them
// eight.
func TestPropertyProofsVerify(t *testing.T) {
	t.Parallel() // CPU and a memory store of its own; nothing timed
	k := testKey(t)
	rapid.Check(t, func(rt *rapid.T) {
		s := memory.New()
		l := openUnpaced(t, s, k)
		checkpoints := map[uint64][]byte{}
		total := 0
		steps := rapid.IntRange(1, 8).Draw(rt, "steps")
		for range steps {
			n := rapid.SampledFrom([]int{1, 2, 3, 7, 64, 255, 256, 257, 600}).Draw(rt, "appends")
			appendN(t, l, total, n)
			total += n
			if rapid.Bool().Draw(rt, "publish") {
				cp, err := l.Publish(context.Background())
				if err != nil {
					rt.Fatal(err)
				}
				checkpoints[l.Size()] = cp
			}
			if rapid.IntRange(0, 4).Draw(rt, "reopen") == 0 {
				if err := l.Close(); err != nil {
					rt.Fatal(err)
				}
				cp, size := l.Checkpoint()
				checkpoints[size] = cp
				l = openUnpaced(t, s, k)
			}
		}
		cp, err := l.Publish(context.Background())
		if err != nil {
			rt.Fatal(err)
		}
		checkpoints[uint64(total)] = cp
		if l.Size() != uint64(total) {
			rt.Fatalf("size %d after %d appends", l.Size(), total)
		}
		checkLog(t, l, k, checkpoints, func(max uint64) uint64 {
			return rapid.Uint64Range(0, max).Draw(rt, "index")
		})
		l.Close()
	})
}

func TestAppendRefusesInvalidRecords(t *testing.T) {
	k := testKey(t)
	l := openTest(t, memory.New(), k)
	defer l.Close()
	bad := map[string]func(*ledger.Record){
		"repeated-policy": func(r *ledger.Record) { r.Policies = []string{"a", "a"} },
		"attributes-dup":  func(r *ledger.Record) { r.Attributes = []byte(`{"a":1,"a":2}`) },
		"attributes-list": func(r *ledger.Record) { r.Attributes = []byte(`[1]`) },
		"decision":        func(r *ledger.Record) { r.Decision = "perhaps" },
		"no-mediator":     func(r *ledger.Record) { r.Mediator = "" },
		"params-size":     func(r *ledger.Record) { r.Params.Size = 0 },
		// Each part within its bound, the whole beyond MaxEntryBytes: it
		// must be refused before sequencing, or signing it would fail the
		// batch and stop the ledger.
		"entry-too-large": func(r *ledger.Record) {
			r.Policies = nil
			for i := range 70 {
				r.Policies = append(r.Policies, fmt.Sprintf("p%02d-%s", i, strings.Repeat("y", 1000)))
			}
		},
	}
	for name, mutate := range bad {
		r := testRecord(t, 1)
		mutate(&r)
		if _, err := l.Append(context.Background(), r); !errors.Is(err, ledger.ErrInvalidRecord) {
			t.Errorf("%s: got %v, want ErrInvalidRecord", name, err)
		}
	}
	if l.Size() != 0 || l.Failure() != nil {
		t.Errorf("size %d, failure %v after refused records", l.Size(), l.Failure())
	}
	// Policies arrive in any order and are stored sorted.
	rec, err := l.Append(context.Background(), testRecord(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := entry.Parse(rec.Entry)
	if e.Policies[0] != "mail.allow" {
		t.Errorf("policies %v", e.Policies)
	}
}

func TestProofSizeBounds(t *testing.T) {
	k := testKey(t)
	l := openTest(t, memory.New(), k)
	defer l.Close()
	appendN(t, l, 0, 10)
	ctx := context.Background()
	if _, err := l.InclusionProof(ctx, 0, 5); !errors.Is(err, ledger.ErrSize) {
		t.Errorf("proof beyond the checkpoint: %v", err)
	}
	if _, err := l.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.InclusionProof(ctx, 10, 10); !errors.Is(err, ledger.ErrSize) {
		t.Errorf("index beyond size: %v", err)
	}
	if _, err := l.ConsistencyProof(ctx, 6, 5); !errors.Is(err, ledger.ErrSize) {
		t.Errorf("size1 > size2: %v", err)
	}
	if _, err := l.ConsistencyProof(ctx, 5, 11); !errors.Is(err, ledger.ErrSize) {
		t.Errorf("size2 beyond checkpoint: %v", err)
	}
	if _, _, err := l.InclusionProofByHash(ctx, [ledger.HashSize]byte{1}, 10); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("unknown leaf: %v", err)
	}
}

// Entry times never go backwards, whatever the clock does.
func TestTimesMonotonic(t *testing.T) {
	k := testKey(t)
	var mu sync.Mutex
	clock := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(-time.Second)
		return clock
	}
	l, err := ledger.Open(context.Background(), memory.New(), k, ledger.Options{CheckpointInterval: -1, Now: now, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	receipts := appendN(t, l, 0, 20)
	var last time.Time
	for i := range receipts {
		b, _ := l.Entry(context.Background(), uint64(i))
		e, _ := entry.Parse(b)
		if e.Time.Before(last) {
			t.Fatalf("entry %d time %v before %v", i, e.Time, last)
		}
		last = e.Time
	}
}

func TestQueueFull(t *testing.T) {
	k := testKey(t)
	s := &slowStore{Store: memory.New(), delay: 50 * time.Millisecond}
	l, err := ledger.Open(context.Background(), s, k, ledger.Options{CheckpointInterval: -1, QueueSize: 4, MaxBatch: 1, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var full, ok int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Append(context.Background(), testRecord(t, i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, ledger.ErrQueueFull):
				full++
			case err == nil:
				ok++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if full == 0 || uint64(ok) != l.Size() {
		t.Errorf("%d appended, %d refused, size %d", ok, full, l.Size())
	}
}

// A storage failure stops appends: nothing is acknowledged that is not
// durable, and no index is reused.
func TestStoreFailureStopsAppends(t *testing.T) {
	k := testKey(t)
	s := &failingStore{Store: memory.New()}
	l := openTest(t, s, k)
	defer l.Close()
	appendN(t, l, 0, 3)
	s.fail = true
	if _, err := l.Append(context.Background(), testRecord(t, 9)); !errors.Is(err, ledger.ErrClosed) {
		t.Fatalf("got %v", err)
	}
	s.fail = false
	if _, err := l.Append(context.Background(), testRecord(t, 10)); !errors.Is(err, ledger.ErrClosed) {
		t.Fatalf("append after failure: %v", err)
	}
	if l.Size() != 3 {
		t.Errorf("size %d", l.Size())
	}
}

type slowStore struct {
	ledger.Store
	delay time.Duration
}

func (s *slowStore) Commit(ctx context.Context, b ledger.Batch) error {
	time.Sleep(s.delay)
	return s.Store.Commit(ctx, b)
}

type failingStore struct {
	ledger.Store
	fail bool
}

func (s *failingStore) Commit(ctx context.Context, b ledger.Batch) error {
	if s.fail {
		return errors.New("disk on fire")
	}
	return s.Store.Commit(ctx, b)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Checkpoints are published while batches are committed: the store's
// writes must be serialized (its contract), and no publish may fail.
func TestPublishDuringAppends(t *testing.T) {
	ctx := context.Background()
	s, err := badger.Open(ctx, t.TempDir(), badger.Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k := testKey(t)
	l := openTest(t, s, k)
	defer l.Close()
	done := make(chan struct{})
	publishErr := make(chan error, 1)
	go func() {
		defer close(publishErr)
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := l.Publish(ctx); err != nil {
				publishErr <- err
				return
			}
		}
	}()
	appendN(t, l, 0, 2000)
	close(done)
	if err := <-publishErr; err != nil {
		t.Fatalf("Publish during appends: %v", err)
	}
}

// Retries with an idempotency key never append twice: in sequence, at the
// same moment, and across a restart; a key reused for another decision is
// refused.
func TestIdempotencyKeys(t *testing.T) {
	ctx := context.Background()
	k := testKey(t)
	s := memory.New()
	l := openTest(t, s, k)
	rec := testRecord(t, 1)
	rec.IdempotencyKey = "req-0001"
	first, err := l.Append(ctx, rec)
	if err != nil || first.Replayed {
		t.Fatalf("first append: %+v %v", first, err)
	}
	again, err := l.Append(ctx, rec)
	if err != nil || !again.Replayed || again.Index != first.Index || !bytes.Equal(again.Entry, first.Entry) {
		t.Fatalf("retry: %+v %v", again, err)
	}
	other := testRecord(t, 2)
	other.IdempotencyKey = "req-0001"
	if _, err := l.Append(ctx, other); !errors.Is(err, ledger.ErrIdempotencyConflict) {
		t.Fatalf("key reused for another decision: %v", err)
	}
	// Another mediator's key of the same text is another key.
	otherMediator := rec
	otherMediator.Mediator = "mediator-2"
	if r, err := l.Append(ctx, otherMediator); err != nil || r.Replayed {
		t.Fatalf("same key, other mediator: %+v %v", r, err)
	}
	// Concurrent retries: one entry, one receipt for all.
	burst := testRecord(t, 3)
	burst.IdempotencyKey = "req-burst"
	receipts := make([]ledger.Receipt, 32)
	var wg sync.WaitGroup
	for i := range receipts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if receipts[i], err = l.Append(ctx, burst); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	fresh := 0
	for _, r := range receipts {
		if r.Index != receipts[0].Index {
			t.Fatalf("concurrent retries got indices %d and %d", receipts[0].Index, r.Index)
		}
		if !r.Replayed {
			fresh++
		}
	}
	if fresh != 1 || l.Size() != 3 {
		t.Fatalf("%d receipts not replayed, size %d; want 1 and 3", fresh, l.Size())
	}
	// Across a restart.
	l.Close()
	l = openTest(t, s.Reopen(), k)
	defer l.Close()
	if r, err := l.Append(ctx, rec); err != nil || !r.Replayed || r.Index != first.Index {
		t.Fatalf("retry after restart: %+v %v", r, err)
	}
	bad := testRecord(t, 4)
	bad.IdempotencyKey = "has space"
	if _, err := l.Append(ctx, bad); !errors.Is(err, ledger.ErrInvalidRecord) {
		t.Fatalf("invalid key: %v", err)
	}
	if l.Size() != 3 {
		t.Fatalf("size %d", l.Size())
	}
}

// The batch bounds hold: no commit exceeds MaxBatch entries, and with
// MaxBatchWait an idle committer waits for the batch to grow (or fill)
// instead of committing its first record alone.
func TestBatchBounds(t *testing.T) {
	k := testKey(t)
	var mu sync.Mutex
	var sizes []int
	onBatch := func(n int) { mu.Lock(); sizes = append(sizes, n); mu.Unlock() }

	l, err := ledger.Open(context.Background(), memory.New(), k, ledger.Options{CheckpointInterval: -1, Logger: discardLogger(),
		MaxBatch: 4, OnBatch: onBatch})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 0, 200)
	l.Close()
	mu.Lock()
	for _, n := range sizes {
		if n > 4 {
			t.Errorf("a batch of %d entries with MaxBatch 4", n)
		}
	}
	sizes = nil
	mu.Unlock()

	const wait = 400 * time.Millisecond
	l, err = ledger.Open(context.Background(), memory.New(), k, ledger.Options{CheckpointInterval: -1, Logger: discardLogger(),
		MaxBatch: 8, MaxBatchWait: wait, OnBatch: onBatch})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t0 := time.Now()
	if _, err := l.Append(context.Background(), testRecord(t, 0)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < wait {
		t.Errorf("a lone append returned after %v, before MaxBatchWait %v", d, wait)
	}
	// Eight at once fill the batch: one commit, without waiting it out.
	t0 = time.Now()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := l.Append(context.Background(), testRecord(t, 1+i)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) != 2 || sizes[1] != 8 {
		t.Errorf("batches %v; want [1 8]", sizes)
	}
	if d := time.Since(t0); d >= wait {
		t.Errorf("a full batch took %v: the committer waited out MaxBatchWait %v", d, wait)
	}
}

// After a batch of more than one entry, the next commit starts no sooner
// than MinCommitInterval after it, unless its batch fills; a lone caller
// is never delayed.
func TestMinCommitInterval(t *testing.T) {
	k := testKey(t)
	const interval = 400 * time.Millisecond
	var mu sync.Mutex
	var sizes []int
	s := &slowStore{Store: memory.New(), delay: 50 * time.Millisecond}
	l, err := ledger.Open(context.Background(), s, k, ledger.Options{CheckpointInterval: -1, Logger: discardLogger(),
		MaxBatch: 4, MinCommitInterval: interval, OnBatch: func(n int) { mu.Lock(); sizes = append(sizes, n); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	next := 0
	concurrently := func(n int) time.Duration {
		t0 := time.Now()
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				if _, err := l.Append(context.Background(), testRecord(t, i)); err != nil {
					t.Error(err)
				}
			}(next)
			next++
		}
		wg.Wait()
		return time.Since(t0)
	}
	lastSize := func() int { mu.Lock(); defer mu.Unlock(); return sizes[len(sizes)-1] }

	// While the first commits, the other three queue: a batch of several.
	concurrently(4)
	if lastSize() < 2 {
		t.Skipf("batches %v: no batch of several entries to pace after", sizes)
	}
	// Four more fill a batch, which commits without waiting.
	if d := concurrently(4); d >= interval {
		t.Errorf("a full batch took %v: it waited for MinCommitInterval %v", d, interval)
	}
	// A lone append waits for the interval after a batch of several...
	if d := concurrently(1); d < interval/2 {
		t.Errorf("a commit %v after a batch of four; MinCommitInterval is %v", d, interval)
	}
	// ...but not after a batch of one.
	if d := concurrently(1); d >= interval/2 {
		t.Errorf("a lone append after a lone append took %v", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := len(sizes); sizes[n-3] != 4 || sizes[n-2] != 1 || sizes[n-1] != 1 {
		t.Errorf("batches %v; want them to end 4 1 1", sizes)
	}
}

// MaxBatchBytes bounds batches too, and what a batch counts against it is
// never less than the entries it stores.
func TestBatchBytes(t *testing.T) {
	k := testKey(t)
	var mu sync.Mutex
	var sizes []int
	l, err := ledger.Open(context.Background(), memory.New(), k, ledger.Options{CheckpointInterval: -1, Logger: discardLogger(),
		MaxBatchBytes: 1, OnBatch: func(n int) { mu.Lock(); sizes = append(sizes, n); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 0, 100)
	l.Close()
	for _, n := range sizes {
		if n != 1 {
			t.Fatalf("batches %v with MaxBatchBytes 1", sizes)
		}
	}

	n, counted, err := l.CountedBytes(testRecord(t, 7))
	if err != nil || n > counted || counted > n+64 {
		t.Errorf("a %d-byte entry counted as %d bytes (%v)", n, counted, err)
	}
}
