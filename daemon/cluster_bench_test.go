package daemon

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/internal/proccpu"
)

// Issue 29 item 4: several instances on one PostgreSQL database, in this
// process (docs/performance.md "Several instances on PostgreSQL"). They
// need PostgreSQL (internal/pgtest): without it they are skipped, saying
// how to run them (failed under LEDGER_CI=1).

// benchClients is how many clients send at once, as bench/append.lua's
// wrk runs and server's BenchmarkHTTPDecideVsAppend.
const benchClients = 64

// benchCluster starts three instances on one new database: a sequences,
// b and c follow it.
func benchCluster(b *testing.B) (f *apitest.ClusterFixture, seq *instance, followers []*instance) {
	b.Helper()
	f = apitest.NewClusterFixture(b)
	seq = startInstance(b, f.Config(b, "a", "3s"))
	apitest.WaitFor(b, "a to sequence", func() bool { return readyzCode(seq.url+"/readyz?role=sequencer") == 200 })
	for _, name := range []string{"b", "c"} {
		s := startInstance(b, f.Config(b, name, "3s"))
		apitest.WaitFor(b, name+" to follow a", func() bool { return readyzCode(s.url+"/readyz") == 200 })
		followers = append(followers, s)
	}
	return f, seq, followers
}

func readyzCode(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// BenchmarkClusterAppend sends appends (bench/append.lua's body) from 64
// clients alternately straight to the sequencer and through a follower,
// b.N of each, in four rounds each, in this one sitting, and reports
// appends/s of each, their ratio (issue 29: through a follower at least
// 0.8 of straight to the sequencer), the CPU per append of this
// process, which runs the three instances and the clients, and that of
// the PostgreSQL server (Linux only). Run it with
//
//	go test ./daemon/ -run '^$' -bench BenchmarkClusterAppend -benchtime 4000x
func BenchmarkClusterAppend(b *testing.B) {
	f, seq, followers := benchCluster(b)
	client := benchClient()
	var n atomic.Int64 // numbers the bodies, unique in the run
	send := func(url string, count int) (time.Duration, cpuTimes) {
		return benchRequests(b, count, func() error {
			i := int(n.Add(1))
			req, _ := http.NewRequest("POST", url+"/v1/entries", strings.NewReader(appendLuaBody(i)))
			req.Header.Set("Authorization", "Bearer "+f.Token)
			req.Header.Set("Content-Type", "application/json")
			return expect(client.Do(req))(http.StatusCreated)
		})
	}
	// A warm-up of each, so that both have their connections.
	send(seq.url, benchClients)
	send(followers[0].url, benchClients)
	b.ResetTimer()
	const rounds = 4
	var seqTime, fwdTime time.Duration
	var seqCPU, fwdCPU cpuTimes
	for r := range rounds {
		count := b.N / rounds
		if r == rounds-1 {
			count = b.N - count*(rounds-1)
		}
		el, cpu := send(seq.url, count)
		seqTime, seqCPU = seqTime+el, seqCPU.add(cpu)
		el, cpu = send(followers[0].url, count)
		fwdTime, fwdCPU = fwdTime+el, fwdCPU.add(cpu)
	}
	b.StopTimer()
	seqRate, fwdRate := float64(b.N)/seqTime.Seconds(), float64(b.N)/fwdTime.Seconds()
	b.ReportMetric(seqRate, "seq-appends/s")
	b.ReportMetric(fwdRate, "fwd-appends/s")
	b.ReportMetric(fwdRate/seqRate, "fwd/seq")
	seqCPU.report(b, "seq-", b.N)
	fwdCPU.report(b, "fwd-", b.N)
	b.ReportMetric(0, "ns/op")
}

// BenchmarkClusterReads reads a log of 1,300 entries from 64 clients,
// spread round-robin over 1, 2 and 3 instances (the sequencer first,
// then its followers), and reports reads/s of each, the CPU per read of
// this process (the instances and the clients) and of PostgreSQL. A read is, in turn, GET /checkpoint, a full hash tile, a
// full entry bundle, an entry, an inclusion proof (/v1/inclusion) and a
// tlog-proof (/v1/proofs), of entries spread over the log's five full
// tiles; every instance has read each of them once before (its cache
// warm: the working set fits in it). Run it with
//
//	go test ./daemon/ -run '^$' -bench BenchmarkClusterReads -benchtime 20000x
func BenchmarkClusterReads(b *testing.B) {
	f, seq, followers := benchCluster(b)
	client := benchClient()
	const size = 1300
	var n atomic.Int64
	benchRequests(b, size, func() error {
		req, _ := http.NewRequest("POST", seq.url+"/v1/entries", strings.NewReader(appendLuaBody(int(n.Add(1)))))
		req.Header.Set("Authorization", "Bearer "+f.Token)
		return expect(client.Do(req))(http.StatusCreated)
	})
	all := append([]*instance{seq}, followers...)
	for _, s := range all {
		apitest.WaitFor(b, "the instances to have a checkpoint of the whole log", func() bool {
			return strings.Split(apitest.Get(b, s.url+"/checkpoint"), "\n")[1] == fmt.Sprint(size)
		})
	}
	full := size / 256
	paths := func(i int) string {
		switch e := (i * 7919) % (full * 256); i % 6 {
		case 0:
			return "/checkpoint"
		case 1:
			return fmt.Sprintf("/tile/0/%03d", e%full)
		case 2:
			return fmt.Sprintf("/tile/entries/%03d", e%full)
		case 3:
			return fmt.Sprintf("/v1/entries/%d", e)
		case 4:
			return fmt.Sprintf("/v1/inclusion?index=%d", e)
		default:
			return fmt.Sprintf("/v1/proofs/%d", e)
		}
	}
	for _, s := range all {
		var next atomic.Int64
		benchRequests(b, 6*full*256, func() error {
			resp, err := client.Get(s.url + paths(int(next.Add(1))))
			return expect(resp, err)(http.StatusOK)
		})
	}
	for k := 1; k <= len(all); k++ {
		b.Run(fmt.Sprintf("instances=%d", k), func(b *testing.B) {
			var next atomic.Int64
			el, cpu := benchRequests(b, b.N, func() error {
				i := int(next.Add(1))
				resp, err := client.Get(all[i%k].url + paths(i))
				return expect(resp, err)(http.StatusOK)
			})
			b.ReportMetric(float64(b.N)/el.Seconds(), "reads/s")
			cpu.report(b, "", b.N)
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchClient keeps a connection for each of the clients to each
// instance.
func benchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchClients}, Timeout: time.Minute}
}

// benchRequests makes count requests with do from benchClients
// goroutines, and returns how long they took and the CPU this process
// and the database used meanwhile. The first error fails the benchmark.
func benchRequests(b *testing.B, count int, do func() error) (elapsed time.Duration, cpu cpuTimes) {
	var left atomic.Int64
	left.Store(int64(count))
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), measureCPU()
	for range benchClients {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := do(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed, cpu1 := time.Since(start), measureCPU()
	return elapsed, cpuTimes{cpu1.process - cpu0.process, cpu1.db - cpu0.db}
}

// cpuTimes are the CPU times of this process, which runs the instances
// and the clients, and of the PostgreSQL server's processes.
type cpuTimes struct{ process, db time.Duration }

func measureCPU() cpuTimes { return cpuTimes{proccpu.Used(), databaseCPU()} }

func (c cpuTimes) add(d cpuTimes) cpuTimes { return cpuTimes{c.process + d.process, c.db + d.db} }

// report reports c per request, of n.
func (c cpuTimes) report(b *testing.B, prefix string, n int) {
	b.ReportMetric(float64(c.process.Microseconds())/float64(n), prefix+"cpu-µs/req")
	b.ReportMetric(float64(c.db.Microseconds())/float64(n), prefix+"db-cpu-µs/req")
}

// expect reads an answer whole (so that its connection is kept) and
// returns a check of its status.
func expect(resp *http.Response, err error) func(status int) error {
	return func(status int) error {
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != status {
			return fmt.Errorf("%s %s: status %d, want %d: %s", resp.Request.Method, resp.Request.URL, resp.StatusCode, status, body)
		}
		return nil
	}
}

// appendLuaBody is the body bench/append.lua sends, for counter n.
func appendLuaBody(n int) string {
	return fmt.Sprintf(`{"principal":"agent-%d","action":"make_payment","decision":"allow","policies":["payments.limit"],`+
		`"params_digest":"sha256:%064x","params_size":64,`+
		`"tiers_digest":"sha256:0609cd08e13b2f4b07d5f0e3a86b4f7a4c9cbe2b4b8d4f4f3a4f8d0b3e2c9829",`+
		`"attributes":{"amount_minor":%d,"currency":"EUR","payee_known":true,"memo_size":%d,`+
		`"recipient":{"recipient_domain":"example.com"},"route":"/v1/payments/{id}","note":"%s"}}`,
		n%64, n, n, n%300, strings.Repeat("x", 120))
}
