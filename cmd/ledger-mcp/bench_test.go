package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/mcpgate"
)

// BenchmarkGatewayCall measures what the gateway adds to an allowed
// tools/call (docs/performance.md "MCP gateway"): one agent calls the
// tool echo of an in-process upstream over streamable HTTP, either
// directly (direct) or through the ledger-mcp binary (gateway), which
// minimizes the call, has ledgerd (its binary, on badger) decide it,
// verifies the signed answer, forwards the call and records its outcome.
// ledgerd runs with its default settings except what the gateway needs:
// the mediator "gateway", catalog_dir and policy_dir (one policy allowing
// bench.echo); the gateway with approvals off.
//
// Each sub-benchmark makes b.N sequential calls and reports their p50 and
// p99 latency. ledgerd-decide is ledgerd's part alone: the gateway's
// decide request (minimized as the gateway does) sent by a client of the
// benchmark's own, each answer verified. gateway reports too the CPU time (utime+stime of
// /proc/PID/stat, 10 ms ticks) of the ledger-mcp process and of ledgerd
// per call, read once every outcome of the calls is recorded, and the
// gateway's peak RSS so far (VmHWM).
// gateway-parallel makes the calls from 4×GOMAXPROCS goroutines of the one
// agent session and reports calls/s. -count repeats each sub-benchmark
// in place; for direct and gateway runs that alternate, run the process
// six times (each starts its own ledgerd and gateway), then benchstat:
//
//	for i in 1 2 3 4 5 6; do
//		go test -run '^$' -bench GatewayCall -benchtime 1000x ./cmd/ledger-mcp/
//	done | tee gateway.txt
//	benchstat gateway.txt
//
// With LEDGER_MCP_CPUPROFILE=FILE set, the gateway writes its CPU profile
// to FILE when it stops (the last parent run's).
//
// The gateway commits with its default, the hiding commitment, writing
// each call's disclosure (synced) to a directory beside its config;
// LEDGER_MCP_BENCH_COMMITMENT=v1 makes it commit with version 1 instead,
// and ledgerd-decide minimizes the same way (docs/performance.md "Hiding
// commitment through the gateway" alternates the two).
func BenchmarkGatewayCall(b *testing.B) {
	if testing.Short() {
		b.Skip("starts ledgerd and the gateway")
	}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average: %s", strings.TrimSpace(string(la)))
	}
	up, _ := startEcho(b)
	catalog, policies := echoCatalog(b, toolPins(b, up.URL))
	l := startLedgerWith(b, catalog, policies, nil)
	cfg, token := writeGatewayConfig(b, l, catalog, map[string]any{"bench": map[string]any{"url": up.URL}}, nil)
	v1 := benchV1(b)
	if v1 {
		editConfig(b, cfg, func(m map[string]any) {
			m["commitment"] = "v1"
			delete(m, "disclosures")
		})
	}
	b.Logf("commitment: v1 %v", v1)
	g := startGateway(b, cfg, token)
	b.Cleanup(func() { g.stop(b); l.stop(b) })
	b.Logf("upstream %s, ledgerd %s (pid %d), gateway %s (pid %d)", up.URL, l.url, l.cmd.Process.Pid, g.url, g.cmd.Process.Pid)

	// ledgerd alone: the gateway's decide request, from a client in this
	// process, for the share of the added latency that is ledgerd's.
	b.Run("ledgerd-decide", func(b *testing.B) { measureDecide(b, l, catalog) })
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		direct := connectAt(b, up.URL, version)
		agent := g.agentAt(b, version, nil)
		// Warm up both paths: the gateway's session to the upstream,
		// connections, ledgerd's first decisions.
		for range 50 {
			benchCall(b, direct, "echo")
			benchCall(b, agent, "bench.echo")
		}
		b.Run("proto="+version+"/direct", func(b *testing.B) {
			measureCalls(b, direct, "echo", nil, nil)
		})
		b.Run("proto="+version+"/gateway", func(b *testing.B) {
			measureCalls(b, agent, "bench.echo", g, l)
		})
		b.Run("proto="+version+"/gateway-parallel", func(b *testing.B) {
			measureParallel(b, agent, "bench.echo", g, l)
		})
	}
}

// benchV1 says whether LEDGER_MCP_BENCH_COMMITMENT asks for version 1.
func benchV1(b testing.TB) bool {
	switch v := os.Getenv("LEDGER_MCP_BENCH_COMMITMENT"); v {
	case "", "hiding":
		return false
	case "v1":
		return true
	default:
		b.Fatalf("LEDGER_MCP_BENCH_COMMITMENT=%q: want hiding or v1", v)
		return false
	}
}

// startEcho serves an MCP server with one tool, echo, over streamable
// HTTP, and counts the connections it accepts.
func startEcho(b testing.TB) (*httptest.Server, *atomic.Int64) {
	s := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ServerOptions{Logger: discardSDKLog})
	s.AddTool(&mcp.Tool{Name: "echo", Description: "Answer the text sent.", InputSchema: stringSchema([]string{"text"}, "text")},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Text string }
			json.Unmarshal(req.Params.Arguments, &a)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil
		})
	srv := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	conns := new(atomic.Int64)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	b.Cleanup(srv.Close)
	return srv, conns
}

var discardSDKLog = slog.New(slog.DiscardHandler)

// echoCatalog declares bench.echo (its text a payload field, pinned) and
// allows every call of it.
func echoCatalog(t testing.TB, pins map[string]string) (catalog, policies string) {
	dir := t.TempDir()
	catalog, policies = filepath.Join(dir, "declarations"), filepath.Join(dir, "policies")
	writeFiles(t, catalog, map[string]string{"echo.json": `{"declaration":1,"action":"bench.echo","tool":{"server":"bench","name":"echo","definition_digest":"` +
		pins["echo"] + `"},"fields":{"text":{"type":"string","tier":"payload"}}}`})
	writeFiles(t, policies, map[string]string{"bench.cedar": `@id("bench.echo-allowed")
permit (principal, action == Action::"bench.echo", resource);
`})
	return catalog, policies
}

// toolPins lists the tools of the server at url as the gateway will see
// them and returns each one's definition digest.
func toolPins(t testing.TB, url string) map[string]string {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "pin", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := map[string]string{}
	for tool, err := range s.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		d, err := mcpgate.ToolDigest(tool)
		if err != nil {
			t.Fatal(err)
		}
		out[tool.Name] = d.String()
	}
	return out
}

// connectAt connects an agent straight to the server at url.
func connectAt(t testing.TB, url, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "bench-agent", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var echoArgs = map[string]any{"text": "hello from the benchmark, example.com"}

// benchCall makes one call that must succeed.
func benchCall(t testing.TB, s *mcp.ClientSession, tool string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: echoArgs})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError || len(res.Content) != 1 {
		b, _ := json.Marshal(res.Content)
		t.Fatalf("%s: refused or failed: %s", tool, b)
	}
}

// measureCalls makes b.N sequential calls and reports their latency and,
// with g and l, the gateway's and ledgerd's CPU time per call.
func measureCalls(b *testing.B, s *mcp.ClientSession, tool string, g *gateway, l *ledger) {
	lat := make([]time.Duration, 0, b.N)
	before := cpuMark(b, g, l)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		benchCall(b, s, tool)
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportLatency(b, lat)
	reportCPU(b, before, b.N, g, l)
}

// measureDecide asks ledgerd to decide the call the gateway would, b.N
// times in sequence, each answer verified as the gateway does, and
// reports their latency and ledgerd's CPU time per decision.
func measureDecide(b *testing.B, l *ledger, catalog string) {
	raw, err := os.ReadFile(filepath.Join(catalog, "echo.json"))
	if err != nil {
		b.Fatal(err)
	}
	decl, err := declare.Parse(raw)
	if err != nil {
		b.Fatal(err)
	}
	args, _ := json.Marshal(echoArgs)
	c, err := client.New(l.url, l.token, l.vkey)
	if err != nil {
		b.Fatal(err)
	}
	var opts declare.Options
	if !benchV1(b) {
		opts.Openings = commit.RandomOpenings()
	}
	lat := make([]time.Duration, 0, b.N)
	cpu0, appends0 := procCPU(b, l.cmd.Process.Pid), l.appends(b)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		min, err := decl.Minimize(args, opts)
		if err != nil {
			b.Fatal(err)
		}
		d, err := c.Decide(context.Background(), client.Request{Principal: "agent:notes-bot", Action: decl.Action,
			Params: min.Params, Tiers: min.Tiers, Attributes: min.Attributes})
		if err != nil || d.Decision != entry.Allow {
			b.Fatalf("decide: %v", err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	if got := l.appends(b) - appends0; got != int64(b.N) {
		b.Fatalf("ledgerd appended %d entries for %d decisions", got, b.N)
	}
	reportLatency(b, lat)
	b.ReportMetric(ms(procCPU(b, l.cmd.Process.Pid)-cpu0)/float64(b.N), "ledgerd-cpu-ms/op")
}

// measureParallel makes b.N calls from 4×GOMAXPROCS goroutines.
func measureParallel(b *testing.B, s *mcp.ClientSession, tool string, g *gateway, l *ledger) {
	b.SetParallelism(4)
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	before := cpuMark(b, g, l)
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			t0 := time.Now()
			benchCall(b, s, tool)
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
	reportLatency(b, lat)
	reportCPU(b, before, b.N, g, l)
}

func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
}

// percentile is the nearest-rank q-quantile of sorted.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// mark is the processes' CPU time and ledgerd's appends at a moment.
type mark struct {
	gw, ledgerd time.Duration
	appends     int64
}

func cpuMark(b *testing.B, g *gateway, l *ledger) mark {
	if g == nil {
		return mark{}
	}
	return mark{gw: procCPU(b, g.cmd.Process.Pid), ledgerd: procCPU(b, l.cmd.Process.Pid), appends: l.appends(b)}
}

// reportCPU waits until ledgerd has appended a decision and an outcome
// for each of the n calls (outcomes are recorded after the agent has its
// answer), then reports each process's CPU time per call.
func reportCPU(b *testing.B, before mark, n int, g *gateway, l *ledger) {
	if g == nil {
		return
	}
	want := before.appends + 2*int64(n)
	deadline := time.Now().Add(60 * time.Second)
	for l.appends(b) < want {
		if time.Now().After(deadline) {
			b.Fatalf("ledgerd appended %d of the %d entries of the calls within 60 s", l.appends(b)-before.appends, 2*n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	after := cpuMark(b, g, l)
	b.ReportMetric(ms(after.gw-before.gw)/float64(n), "gw-cpu-ms/op")
	b.ReportMetric(ms(after.ledgerd-before.ledgerd)/float64(n), "ledgerd-cpu-ms/op")
	b.ReportMetric(float64(peakRSS(b, g.cmd.Process.Pid))/(1<<20), "gw-peak-rss-MiB")
}

// peakRSS is a process's peak resident set size so far (VmHWM of
// /proc/PID/status).
func peakRSS(t testing.TB, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("/proc/%d/status: %q", pid, line)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/%d/status has no VmHWM", pid)
	return 0
}

// appends is ledgerd's count of appends acknowledged (not replayed).
func (l *ledger) appends(t testing.TB) int64 {
	resp, err := http.Get(l.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `ledgerd_appends_total{replayed="false"} `); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("ledgerd's /metrics has no ledgerd_appends_total")
	return 0
}

// procCPU is a process's user plus system CPU time, from /proc/PID/stat
// (fields 14 and 15, in clock ticks of 1/100 s, USER_HZ on Linux).
func procCPU(t testing.TB, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime is field 14, stime 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if i < 0 || err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}
