package ledger_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// The crash test runs this test binary again as a child that appends
// under concurrent load to a badger store and reports, one line each, every
// receipt and every checkpoint it was given:
//
//	ack <index> <leaf hash hex>
//	cp <size> <base64 signed checkpoint>
//
// The parent kills it with SIGKILL at a random moment, reopens the store
// and checks that nothing acknowledged was lost or changed.
const crashChildEnv = "LEDGER_CRASH_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	os.Exit(m.Run())
}

func crashChild(dir string) {
	ctx := context.Background()
	key, err := ledger.LoadKey(filepath.Join(dir, "key"), ledger.KeyOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	s, err := badger.Open(ctx, filepath.Join(dir, "db"), badger.Options{Logger: discardLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	l, err := ledger.Open(ctx, s, key, ledger.Options{CheckpointInterval: 20 * time.Millisecond, Logger: discardLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format, args...)
		out.Flush()
	}
	go func() {
		var last uint64
		for {
			time.Sleep(5 * time.Millisecond)
			if cp, size := l.Checkpoint(); size > last {
				last = size
				say("cp %d %s\n", size, base64.StdEncoding.EncodeToString(cp))
			}
		}
	}()
	base := int(l.Size())
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				r, err := l.Append(ctx, crashRecord(base+w*1_000_000+i))
				if err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				say("ack %d %s\n", r.Index, hex.EncodeToString(r.LeafHash[:]))
			}
		}()
	}
	wg.Wait()
}

func crashRecord(i int) ledger.Record {
	r, err := makeRecord(i % 1000)
	if err != nil {
		panic(err)
	}
	r.Principal = "agent-" + strconv.Itoa(i)
	return r
}

func entryLeafHashHex(b []byte) string {
	lh := entry.LeafHash(b)
	return hex.EncodeToString(lh[:])
}

// TestCrash kills an appending child with SIGKILL at random moments (20
// times in short mode, 40 otherwise, LEDGER_CRASH_KILLS if set) and checks
// after each kill that every acknowledged entry is present and unchanged,
// that the entries, chain and tree verify, and that the next checkpoint is
// consistent with every checkpoint published before.
func TestCrash(t *testing.T) {
	t.Parallel() // it waits on its child, and asserts nothing of time
	iterations := 40
	if testing.Short() {
		iterations = 20
	}
	if n, err := strconv.Atoi(os.Getenv("LEDGER_CRASH_KILLS")); err == nil && n > 0 {
		iterations = n
	}
	start := time.Now()
	dir := t.TempDir()
	skey, _, err := ledger.GenerateKey("ledger.example.com/crash")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "key"), []byte(skey), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := ledger.LoadKey(filepath.Join(dir, "key"), ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := note.NewVerifier(key.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	acked := map[uint64]string{} // index -> leaf hash hex
	roots := map[uint64][]byte{} // checkpoint size -> root
	// unchecked: the roots the next reopened log is to be proved
	// consistent with, those published since the last check and that
	// check's own; consistency being transitive, it is then consistent
	// with every root published before.
	unchecked := map[uint64][]byte{}
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))

	for iter := range iterations {
		var fresh []uint64 // acknowledged in this iteration
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Kill at a random moment once the child is appending.
		var deadline <-chan time.Time
		killed := false
		for line := range lines {
			if deadline == nil {
				deadline = time.After(time.Duration(rng.IntN(150)) * time.Millisecond)
			}
			if !killed {
				select {
				case <-deadline:
					cmd.Process.Kill() // SIGKILL
					killed = true
				default:
				}
			}
			f := strings.Fields(line)
			switch {
			case len(f) == 3 && f[0] == "ack":
				i, _ := strconv.ParseUint(f[1], 10, 64)
				if old, ok := acked[i]; ok && old != f[2] {
					t.Fatalf("iteration %d: index %d acknowledged twice with different entries", iter, i)
				}
				acked[i] = f[2]
				fresh = append(fresh, i)
			case len(f) == 3 && f[0] == "cp":
				signed, _ := base64.StdEncoding.DecodeString(f[2])
				cp, _, _, err := log.ParseCheckpoint(signed, key.Name(), verifier)
				if err != nil {
					t.Fatalf("iteration %d: checkpoint: %v", iter, err)
				}
				if old, ok := roots[cp.Size]; ok && !bytes.Equal(old, cp.Hash) {
					t.Fatalf("iteration %d: two checkpoints of size %d with different roots", iter, cp.Size)
				}
				roots[cp.Size], unchecked[cp.Size] = cp.Hash, cp.Hash
			}
		}
		if !killed {
			cmd.Process.Kill()
		}
		cmd.Wait()
		if strings.TrimSpace(stderr.String()) != "" {
			t.Fatalf("iteration %d: child said: %s", iter, stderr.String())
		}
		checkAfterCrash(t, iter, dir, key, acked, fresh, roots, unchecked)
	}
	t.Logf("%d kills in %v, %d entries acknowledged, %d checkpoints", iterations, time.Since(start).Round(time.Millisecond), len(acked), len(roots))
}

// checkAfterCrash reopens the store and checks that every acknowledged
// entry is stored unchanged (all of them read in one pass with
// ReadEntries, those of fresh, acknowledged since the last kill, also one
// by one with Entry: a lookup by index is what recovery could break), that
// the log opens fully verified, and that its next checkpoint is consistent
// with those of unchecked, which it then replaces.
func checkAfterCrash(t *testing.T, iter int, dir string, key *ledger.Key, acked map[uint64]string, fresh []uint64, roots, unchecked map[uint64][]byte) {
	t.Helper()
	ctx := context.Background()
	s, err := badger.Open(ctx, filepath.Join(dir, "db"), badger.Options{Logger: discardLogger()})
	if err != nil {
		t.Fatalf("iteration %d: reopening store: %v", iter, err)
	}
	defer s.Close()
	// Full open: every stored entry rehashed against tiles and checkpoint.
	l, err := ledger.Open(ctx, s, key, ledger.Options{CheckpointInterval: -1, Logger: discardLogger()})
	if err != nil {
		t.Fatalf("iteration %d: Open: %v", iter, err)
	}
	defer l.Close()
	stored := make([]string, l.Size())
	err = s.ReadEntries(ctx, 0, l.Size(), func(i uint64, b []byte) error {
		stored[i] = entryLeafHashHex(b)
		return nil
	})
	if err != nil {
		t.Fatalf("iteration %d: reading entries 0 to %d: %v", iter, l.Size(), err)
	}
	for i, want := range acked {
		if i >= uint64(len(stored)) {
			t.Fatalf("iteration %d: acknowledged entry %d lost: the log has %d", iter, i, len(stored))
		}
		if stored[i] != want {
			t.Fatalf("iteration %d: acknowledged entry %d changed", iter, i)
		}
	}
	// The leaf-hash index, whose entries after its last run Open rebuilds
	// from the frames: a kill may land between a run's write and its
	// mark.
	for i, want := range acked {
		var lh [ledger.HashSize]byte
		if _, err := hex.Decode(lh[:], []byte(want)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.IndexOf(ctx, lh); err != nil || got != i {
			t.Fatalf("iteration %d: IndexOf(leaf hash of acknowledged entry %d) = %d, %v", iter, i, got, err)
		}
	}
	for _, i := range fresh {
		b, err := l.Entry(ctx, i)
		if err != nil {
			t.Fatalf("iteration %d: acknowledged entry %d lost: %v", iter, i, err)
		}
		if lh := entryLeafHashHex(b); lh != acked[i] {
			t.Fatalf("iteration %d: acknowledged entry %d changed", iter, i)
		}
	}
	cp, err := l.Publish(ctx)
	if err != nil {
		t.Fatalf("iteration %d: Publish: %v", iter, err)
	}
	if cp == nil {
		return
	}
	v, _ := note.NewVerifier(key.VerifierKey())
	latest, _, _, err := log.ParseCheckpoint(cp, key.Name(), v)
	if err != nil {
		t.Fatal(err)
	}
	for size, root := range unchecked {
		p, err := l.ConsistencyProof(ctx, size, latest.Size)
		if err != nil {
			t.Fatalf("iteration %d: consistency proof %d -> %d: %v", iter, size, latest.Size, err)
		}
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, size, latest.Size, p, root, latest.Hash); err != nil {
			t.Fatalf("iteration %d: checkpoint %d is not consistent with the new one (%d): %v", iter, size, latest.Size, err)
		}
	}
	if old, ok := roots[latest.Size]; ok && !bytes.Equal(old, latest.Hash) {
		t.Fatalf("iteration %d: the checkpoint of size %d after reopening has another root than the one published before", iter, latest.Size)
	}
	roots[latest.Size] = latest.Hash
	clear(unchecked)
	unchecked[latest.Size] = latest.Hash
	if iter == 0 || iter%20 == 19 {
		checkLog(t, l, key, map[uint64][]byte{latest.Size: cp}, func(max uint64) uint64 { return max / 2 })
	}
}
