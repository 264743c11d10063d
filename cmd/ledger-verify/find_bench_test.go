//go:build unix

package main

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/proccpu"
	"github.com/decisionledger/ledger/verify"
	tlog "github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// The benchmark of find against export runs only when asked for: it
// reads an export of a million entries several times (minutes), so it is
// no part of the ordinary test run or of CI.
var (
	findBenchEntries = flag.Int("find-bench-entries", 0, "BenchmarkFindExport: entries in its export (0 skips it)")
	findBenchRounds  = flag.Int("find-bench-rounds", 3, "BenchmarkFindExport: rounds of export then find (alternating which goes first)")
)

// findBenchArgs are find's filters in the benchmark: principal agent-7's
// deny decisions, 1 entry in 700 of the export (benchExport).
var findBenchArgs = []string{"--principal", "agent-7", "--decision", "deny"}

// BenchmarkFindExport compares ledger-verify find with ledger-verify
// export on the same file, in this process, in alternating rounds: both
// verify every entry, and find also tests each against its filters and
// keeps the matches. It reports the medians of the entries/s of each, of
// their ratio per round (find-pct-of-export; the goal is at least 80),
// and of the process CPU per entry of each. The export is built once and
// kept under the user cache directory (benchExport):
//
//	go test -run '^$' -bench FindExport -benchtime 1x -timeout 60m ./cmd/ledger-verify/ -args -find-bench-entries 1000000
func BenchmarkFindExport(b *testing.B) {
	n := *findBenchEntries
	if n <= 0 {
		b.Skip("give -find-bench-entries N (e.g. 1000000) to build or reuse an export of N entries and run it")
	}
	path := benchExport(b, n)
	keyArgs := []string{"--key-file", path + ".vkey"}
	timed := func(args []string) (rate, cpuPerEntry float64) {
		var stderr bytes.Buffer
		cpu0, t0 := proccpu.Used(), time.Now()
		code := run(args, nil, io.Discard, &stderr)
		elapsed, cpu1 := time.Since(t0), proccpu.Used()
		if code != exitOK {
			b.Fatalf("ledger-verify %v: exit status %d: %s", args, code, stderr.Bytes())
		}
		return float64(n) / elapsed.Seconds(), float64((cpu1 - cpu0).Microseconds()) / float64(n)
	}
	exportArgs := slices.Concat([]string{"export"}, keyArgs, []string{path})
	findArgs := slices.Concat([]string{"find"}, keyArgs, findBenchArgs, []string{path})
	var exportRates, findRates, ratios, exportCPU, findCPU []float64
	for round := range *findBenchRounds {
		var er, ec, fr, fc float64
		if round%2 == 0 {
			er, ec = timed(exportArgs)
			fr, fc = timed(findArgs)
		} else {
			fr, fc = timed(findArgs)
			er, ec = timed(exportArgs)
		}
		b.Logf("round %d: export %.0f entries/s (%.1f CPU µs/entry), find %.0f entries/s (%.1f CPU µs/entry): %.1f %%",
			round+1, er, ec, fr, fc, 100*fr/er)
		exportRates, findRates, ratios = append(exportRates, er), append(findRates, fr), append(ratios, fr/er)
		exportCPU, findCPU = append(exportCPU, ec), append(findCPU, fc)
	}
	b.ReportMetric(median(exportRates), "export-entries/s")
	b.ReportMetric(median(findRates), "find-entries/s")
	b.ReportMetric(100*median(ratios), "find-pct-of-export")
	b.ReportMetric(median(exportCPU), "export-cpu-µs/entry")
	b.ReportMetric(median(findCPU), "find-cpu-µs/entry")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// benchExport returns the path of an export of n entries, with its
// verifier key in path+".vkey", built on first use and kept in the user
// cache directory (os.UserCacheDir, e.g. ~/.cache/decisionledger) as
// find-bench-N-v1.ledger; delete it to build it again. Entries are those
// of verify's BenchmarkVerifyExport (~300 bytes of attributes) with
// principals agent-0 to agent-99 (index mod 100) and a deny decision at
// every index divisible by 7 (allow otherwise), so that findBenchArgs
// match the indexes i with i mod 100 = 7 and i mod 7 = 0.
func benchExport(b *testing.B, n int) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	dir = filepath.Join(dir, "decisionledger")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("find-bench-%d-v1.ledger", n))
	if _, err := os.Stat(path + ".vkey"); err == nil {
		b.Logf("using the export %s", path)
		return path
	}
	t0 := time.Now()
	if err := writeBenchExport(path, n); err != nil {
		b.Fatal(err)
	}
	b.Logf("built the export %s of %d entries in %v", path, n, time.Since(t0).Round(time.Second))
	return path
}

// writeBenchExport writes the export of benchExport without holding its
// entries: they are signed in chunks on every core and their frames
// written to a temporary file while their leaf hashes build the tree,
// and the export is then the header part with the checkpoint, the entry
// frames copied after it, and the end frame. The key file is written
// last, so that an interrupted build is not taken for a finished one.
func writeBenchExport(path string, n int) error {
	const name = "ledger.example.com/bench"
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		return err
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		return err
	}
	raw, _ := base64.StdEncoding.DecodeString(skey[len(skey)-44:])
	priv := ed25519.NewKeyFromSeed(raw[1:])
	keyID := fmt.Sprintf("%s+%08x", name, signer.KeyHash())
	c, _ := commit.Params([]byte(`{"to":"a@example.com","amount_minor":100}`))
	attrs := []byte(`{"amount_minor":125000,"attachment_count":2,"body_size":48213,"currency":"EUR","endpoint_host":"api.example.org","payee_known":true,"purpose":"monthly-billing-run","recipient_domain":"example.com","resource_dir":"/records/2026/11","route_shape":"/v1/invoices/{id}","urgent":false}`)

	framesFile, err := os.CreateTemp(filepath.Dir(path), "frames-*")
	if err != nil {
		return err
	}
	defer os.Remove(framesFile.Name())
	defer framesFile.Close()
	frames := bufio.NewWriterSize(framesFile, 1<<20)
	rng := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0)
	var prev commit.Digest
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const chunk = 4096
	es, messages, signed := make([]*entry.Entry, chunk), make([][]byte, chunk), make([][]byte, chunk)
	workers := runtime.GOMAXPROCS(0)
	for start := 0; start < n; start += chunk {
		m := min(chunk, n-start)
		for j := range m {
			i := start + j
			d := entry.Allow
			if i%7 == 0 {
				d = entry.Deny
			}
			e := &entry.Entry{Origin: name, Index: uint64(i), Time: t0.Add(time.Duration(i) * time.Millisecond),
				Mediator: "mediator-1", Principal: "agent-" + strconv.Itoa(i%100), Action: "send_email", Decision: d,
				Policies: []string{"mail.allow"}, Params: c, Tiers: sha256.Sum256([]byte("tiers")),
				Attributes: attrs, Prev: prev, KeyID: keyID}
			msg, err := e.SignedMessage()
			if err != nil {
				return err
			}
			es[j], messages[j], prev = e, msg, sha256.Sum256(msg)
		}
		var wg sync.WaitGroup
		errs := make([]error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := w; j < m; j += workers {
					es[j].Signature = ed25519.Sign(priv, messages[j])
					b, err := es[j].Marshal()
					if err != nil {
						errs[w] = err
					}
					signed[j] = b
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		for _, e := range signed[:m] {
			fmt.Fprintf(frames, "entry %d\n", len(e))
			frames.Write(e)
			frames.WriteByte('\n')
			rng.Append(rfc6962.DefaultHasher.HashLeaf(e), nil)
		}
	}
	if err := frames.Flush(); err != nil {
		return err
	}
	root := rfc6962.DefaultHasher.EmptyRoot()
	if n > 0 {
		if root, err = rng.GetRootHash(nil); err != nil {
			return err
		}
	}
	cp, err := note.Sign(&note.Note{Text: string(tlog.Checkpoint{Origin: name, Size: uint64(n), Hash: root}.Marshal())}, signer)
	if err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer out.Close()
	bw := bufio.NewWriterSize(out, 1<<20)
	frame := func(tag string, p []byte) {
		fmt.Fprintf(bw, "%s %d\n", tag, len(p))
		bw.Write(p)
		bw.WriteByte('\n')
	}
	bw.WriteString(verify.ExportHeader)
	frame("checkpoint", cp)
	frame("range", []byte("0 "+strconv.Itoa(n)))
	frame("left", nil)
	frame("right", nil)
	if _, err := framesFile.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.Copy(bw, framesFile); err != nil {
		return err
	}
	frame("end", nil)
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return err
	}
	return os.WriteFile(path+".vkey", []byte(vkey+"\n"), 0o644)
}
