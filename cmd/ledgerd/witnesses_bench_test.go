package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
)

// BenchmarkHTTPAppendWitnesses is BenchmarkHTTPAppend's load with a
// checkpoint signed every 100 ms (the default rate under load since issue
// 17, ten times the former), each sent to the witnesses (the test servers'
// witness interval is 20 ms, not witness_interval's 1 s), without
// witnesses and with two, each sub-benchmark on its own server: appends
// must not slow down when checkpoints go to witnesses (docs/performance.md
// "Witnesses"). The witnesses are two litewitness processes when
// litewitness, witnessctl and ssh-agent are installed, else two
// in-process fake witnesses. Like ledgerd, it sets the default memory
// limit (badger.MemoryLimit) unless GOMEMLIMIT is set. -count alternates
// the two:
//
//	go test -run '^$' -bench HTTPAppendWitnesses -benchtime 20000x -count 6 ./cmd/ledgerd/
//
// cosigned/op is the checkpoints both witnesses cosigned during the run,
// to show they were at work.
func BenchmarkHTTPAppendWitnesses(b *testing.B) {
	badger.SetMemoryLimit()
	real := findTool("LEDGER_LITEWITNESS", "litewitness") != "" && findTool("LEDGER_WITNESSCTL", "witnessctl") != "" &&
		findTool("LEDGER_SSH_AGENT", "ssh-agent") != ""
	for _, n := range []int{0, 2} {
		b.Run(fmt.Sprintf("witnesses=%d", n), func(b *testing.B) {
			var s *testServer
			switch {
			case n == 0:
				s = startServerWith(b, nil)
			case real:
				agent := startSSHAgent(b)
				s = startServerWith(b, func(c *Config) {
					key, err := ledger.LoadKey(c.KeyFile, ledger.KeyOptions{})
					if err != nil {
						b.Fatal(err)
					}
					for i := range n {
						w := newLiteWitness(b, agent, fmt.Sprintf("witness-%d.example.org", i), key.Name(), key.VerifierKey())
						c.Witnesses = append(c.Witnesses, WitnessConfig{Name: fmt.Sprintf("w%d", i), URL: w.url(), Key: w.vkey})
					}
				})
			default:
				s, _ = witnessServer(b, n)
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
				bodies[i] = appendBody(i)
			}
			benchmarkPost(b, s.url+"/v1/entries", s.token, bodies, "appends/s")
			cancel()
			<-done
			cosigned := 0
			if w := s.srv.wit; w != nil {
				w.mu.Lock()
				for _, lines := range w.cosigs {
					if lines[0] != nil && lines[1] != nil {
						cosigned++
					}
				}
				w.mu.Unlock()
			}
			b.ReportMetric(float64(cosigned), "cosigned/op")
		})
	}
}
