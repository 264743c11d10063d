//go:build linux

package main

import (
	"flag"
	"io"
	"os"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/proccpu"
	"github.com/decisionledger/ledger/internal/progress"
	"github.com/decisionledger/ledger/internal/ptytest"
)

var progressBenchEntries = flag.Int("progress-bench-entries", 0, "BenchmarkProgressExport: entries in its export (0 skips it)")

// BenchmarkProgressExport measures what the progress meter costs
// ledger-verify export: the same export verified with stderr on a
// pseudo-terminal, with LEDGER_PROGRESS=off (no meter, no hook) and unset
// (the meter counting every entry, reading the clock some twenty times a
// second and drawing four), in alternating rounds. It reports the medians
// of each one's entries/s and CPU µs per entry, and of the per-round
// ratio of the metered run's throughput to the unmetered one's. The export
// is benchExport's (kept under the user cache directory):
//
//	go test -run '^$' -bench ProgressExport -benchtime 1x -timeout 30m ./cmd/ledger-verify/ -args -progress-bench-entries 200000 -find-bench-rounds 5
func BenchmarkProgressExport(b *testing.B) {
	n := *progressBenchEntries
	if n <= 0 {
		b.Skip("give -progress-bench-entries N to build or reuse an export of N entries and run it")
	}
	path := benchExport(b, n)
	args := []string{"export", "--key-file", path + ".vkey", path}
	pty := ptytest.Open(b)
	timed := func(mode string) (rate, cpuPerEntry float64) {
		os.Setenv(progress.Env, mode)
		defer os.Unsetenv(progress.Env)
		cpu0, t0 := proccpu.Used(), time.Now()
		code := run(args, nil, io.Discard, pty.Terminal)
		elapsed, cpu1 := time.Since(t0), proccpu.Used()
		if code != exitOK {
			b.Fatalf("ledger-verify export: exit status %d", code)
		}
		return float64(n) / elapsed.Seconds(), float64((cpu1 - cpu0).Microseconds()) / float64(n)
	}
	var offRates, onRates, ratios, offCPU, onCPU []float64
	for round := range *findBenchRounds {
		var fr, fc, or, oc float64
		if round%2 == 0 {
			fr, fc = timed("off")
			or, oc = timed("auto")
		} else {
			or, oc = timed("auto")
			fr, fc = timed("off")
		}
		b.Logf("round %d: off %.0f entries/s (%.2f CPU µs/entry), metered %.0f entries/s (%.2f CPU µs/entry): %.1f %%",
			round+1, fr, fc, or, oc, 100*or/fr)
		offRates, onRates, ratios = append(offRates, fr), append(onRates, or), append(ratios, or/fr)
		offCPU, onCPU = append(offCPU, fc), append(onCPU, oc)
	}
	b.Logf("the terminal received %d bytes", len(pty.Output()))
	b.ReportMetric(median(offRates), "off-entries/s")
	b.ReportMetric(median(onRates), "metered-entries/s")
	b.ReportMetric(100*median(ratios), "metered-pct-of-off")
	b.ReportMetric(median(offCPU), "off-cpu-µs/entry")
	b.ReportMetric(median(onCPU), "metered-cpu-µs/entry")
}
