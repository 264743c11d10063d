package server

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/internal/proccpu"
	"github.com/decisionledger/ledger/storage/badger"
)

// BenchmarkHTTPAppend appends over loopback HTTP from 64 concurrent
// clients, each in a closed loop, to a server on a badger store with
// default settings, and reports appends/s and the latency median and p99
// (request sent to durable receipt received). Like ledgerd, it sets the
// default memory limit (badger.MemoryLimit) unless GOMEMLIMIT is set. Run
// it with
//
//	go test -run '^$' -bench HTTPAppend -benchtime 100000x ./cmd/ledgerd/
func BenchmarkHTTPAppend(b *testing.B) {
	badger.SetMemoryLimit()
	s := startServerWith(b, nil)
	bodies := make([]string, 1000)
	for i := range bodies {
		bodies[i] = apitest.AppendBody(i)
	}
	benchmarkPost(b, s.url+"/v1/entries", s.token, bodies, "appends/s")
}

// benchmarkPost posts bodies in turn to url, b.N requests from 64
// closed-loop clients over keep-alive connections, each answer read
// whole, and reports requests per second (as unit), the median and
// 99th-percentile latencies, and the process's CPU time per request
// (cpu-µs/req: user and system, server and clients together).
func benchmarkPost(b *testing.B, url, token string, bodies []string, unit string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	const clients = 64
	latencies := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu := time.Now(), proccpu.Used()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				req, _ := http.NewRequest("POST", url, strings.NewReader(bodies[i%len(bodies)]))
				req.Header.Set("Authorization", "Bearer "+token)
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				// Read the body whole, so the connection is reused.
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				latencies[i] = time.Since(t0)
				if resp.StatusCode != http.StatusCreated {
					b.Errorf("status %d: %s", resp.StatusCode, body)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed, used := time.Since(start), proccpu.Used()-cpu
	b.StopTimer()
	slices.Sort(latencies)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), unit)
	// The clients run in this process too: their share is in it.
	b.ReportMetric(float64(used.Microseconds())/float64(b.N), "cpu-µs/req")
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "ms-p99")
}

// BenchmarkDecodeAppendRequest decodes the body bench/append.lua sends.
func BenchmarkDecodeAppendRequest(b *testing.B) {
	body := []byte(`{"principal":"agent-7","action":"make_payment","decision":"allow","policies":["payments.limit"],` +
		`"params_digest":"sha256:00000000000000000000000000000000000000000000000000000000075bcd15","params_size":64,` +
		`"tiers_digest":"sha256:0609cd08e13b2f4b07d5f0e3a86b4f7a4c9cbe2b4b8d4f4f3a4f8d0b3e2c9829",` +
		`"attributes":{"amount_minor":123456789,"currency":"EUR","payee_known":true,"memo_size":201,` +
		`"recipient":{"recipient_domain":"example.com"},"route":"/v1/payments/{id}","note":"` + strings.Repeat("x", 120) + `"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, problem := decodeAppendRequest(body); problem != "" {
			b.Fatal(problem)
		}
	}
}
