package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/internal/proccpu"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
)

// BenchmarkHTTPAppendWitnesses is BenchmarkHTTPAppend's load with a
// checkpoint signed every 100 ms (the default rate under load), in three
// sub-benchmarks, each on its own server: without witnesses; with two at
// the default witness_interval (1 s: each is sent the latest checkpoint at
// most once a second), as deployed; and with two sent every checkpoint
// (a witness interval of 20 ms), ten times that load. Appends must not
// slow down when checkpoints go to witnesses (docs/performance.md
// "Witnesses"). The witnesses are two litewitness processes when
// litewitness, witnessctl and ssh-agent are installed, else two
// in-process fake witnesses; litewitness and its ssh-agent then run on
// the same cores as the benchmark, which a deployment's witnesses do not.
// Like ledgerd, it sets the default memory limit (badger.MemoryLimit)
// unless GOMEMLIMIT is set. Alternate the sub-benchmarks by running the
// command several times, not with -count (which repeats each in a row):
//
//	go test -run '^$' -bench HTTPAppendWitnesses -benchtime 20000x -count 1 ./cmd/ledgerd/
//
// µs-CPU/append is this process's CPU time (server and clients, not the
// litewitness processes) per append; cosigned/op is the checkpoints both
// witnesses cosigned during the run, to show they were at work.
func BenchmarkHTTPAppendWitnesses(b *testing.B) {
	badger.SetMemoryLimit()
	real := apitest.FindTool("LEDGER_LITEWITNESS", "litewitness") != "" && apitest.FindTool("LEDGER_WITNESSCTL", "witnessctl") != "" &&
		apitest.FindTool("LEDGER_SSH_AGENT", "ssh-agent") != ""
	for _, run := range []struct {
		name     string
		n        int
		interval string // witness_interval; "" is the test servers' 20 ms
	}{
		{"witnesses=0", 0, ""},
		{"witnesses=2/interval=1s", 2, "1s"},
		{"witnesses=2/interval=20ms", 2, ""},
	} {
		n := run.n
		b.Run(run.name, func(b *testing.B) {
			var s *testServer
			switch {
			case n == 0:
				s = startServerWith(b, nil)
			case real:
				agent := apitest.StartSSHAgent(b)
				s = startServerWith(b, func(c *config.Config) {
					c.WitnessInterval = run.interval
					key, err := ledger.LoadKey(c.KeyFile, ledger.KeyOptions{})
					if err != nil {
						b.Fatal(err)
					}
					for i := range n {
						w := apitest.NewLiteWitness(b, agent, fmt.Sprintf("witness-%d.example.org", i), key.Name(), key.VerifierKey())
						c.Witnesses = append(c.Witnesses, config.WitnessConfig{Name: fmt.Sprintf("w%d", i), URL: w.URL(), Key: w.VKey})
					}
				})
			default:
				s = startServerWith(b, func(c *config.Config) {
					c.WitnessInterval = run.interval
					addFakeWitnesses(b, c, n)
				})
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				t := time.NewTicker(100 * time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-t.C:
						s.l.Publish(ctx)
					}
				}
			}()
			bodies := make([]string, 1000)
			for i := range bodies {
				bodies[i] = apitest.AppendBody(i)
			}
			cpu := proccpu.Used()
			benchmarkPost(b, s.url+"/v1/entries", s.token, bodies, "appends/s")
			b.ReportMetric(float64((proccpu.Used()-cpu).Microseconds())/float64(b.N), "µs-CPU/append")
			cancel()
			<-done
			cosigned := 0
			if w := s.srv.wit; w != nil {
				_, size := s.l.Checkpoint()
				for i := range size + 1 {
					if _, n := w.Cosignatures(context.Background(), i); n == 2 {
						cosigned++
					}
				}
			}
			b.ReportMetric(float64(cosigned), "cosigned/op")
		})
	}
}
