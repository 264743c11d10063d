package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/referencecalls"
)

// BenchmarkHTTPDecideVsAppend compares, in one run on one server with the
// reference catalog and policies, POST /v1/decide (the ledger evaluates
// the reference set, then appends) with POST /v1/entries of the same calls
// carrying the mediator's decision: 64 clients over loopback HTTP. The
// issue's floor is decide ≥ 85% of append throughput; bench/decide-wrk.sh
// measures the same with wrk in a separate process.
func BenchmarkHTTPDecideVsAppend(b *testing.B) {
	s := policyServer(b, referencePolicies)
	decls, err := referencecalls.Declarations(corpusDir)
	if err != nil {
		b.Fatal(err)
	}
	var decide, appendBodies []string
	for i, c := range referencecalls.Table() {
		c.Principal = fmt.Sprintf("agent-%d", i)
		res, err := referencecalls.Minimize(decls, c)
		if err != nil {
			b.Fatal(err)
		}
		body := decideRequestBody(c.Principal, c.Action, res)
		decide = append(decide, body)
		policies := `"policies":["` + strings.Join(c.Determining, `","`) + `"],`
		if len(c.Determining) == 0 {
			policies = `"policies":[],`
		}
		appendBodies = append(appendBodies, `{"decision":"`+string(c.Decision)+`",`+policies+body[1:])
	}
	for _, bc := range []struct {
		path   string
		bodies []string
	}{{"/v1/entries", appendBodies}, {"/v1/decide", decide}} {
		b.Run(strings.TrimPrefix(bc.path, "/v1/"), func(b *testing.B) {
			benchmarkPost(b, s.url+bc.path, s.token, bc.bodies)
		})
	}
}

func benchmarkPost(b *testing.B, url, token string, bodies []string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	const clients = 64
	latencies := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
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
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(latencies)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "requests/s")
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "ms-p50")
}
