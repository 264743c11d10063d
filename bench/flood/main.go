// Command flood measures how a flood of silent connections delays a
// well-behaved client of ledgerd: it opens connections that send nothing
// at -rate a second from -flood-from, each held until the server closes it
// (or -hold passes), and meanwhile a client from -client-from asks for
// -path every -interval (whether or not the previous request has been
// answered), each on a new connection unless -keepalive, with a timeout
// of -timeout. At the end it prints the
// client's latency percentiles and the flood's counts. bench/flood.sh
// runs it against a fresh ledgerd.
//
//	go run ./bench/flood -addr 127.0.0.1:8080 -rate 900 -duration 20s
//
// Loopback only: every 127.x.y.z address is the machine's own, so the
// flood and the client can come from different sources (-client-from
// 127.0.0.2) or from the same one (-client-from 127.0.0.1).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "ledgerd's address")
	rate := flag.Int("rate", 900, "silent connections opened a second")
	floodFrom := flag.String("flood-from", "127.0.0.1", "the flood's source address, or the first of them")
	sources := flag.Int("flood-sources", 1, "how many source addresses the flood comes from: -flood-from and those after it, in turn")
	clientFrom := flag.String("client-from", "127.0.0.2", "the client's source address")
	duration := flag.Duration("duration", 20*time.Second, "how long the flood and the client run")
	warmup := flag.Duration("warmup", 3*time.Second, "how long the flood runs before the client's requests count")
	interval := flag.Duration("interval", 50*time.Millisecond, "the time between the starts of two of the client's requests")
	path := flag.String("path", "/v1/checkpoint", "what the client asks for")
	keepalive := flag.Bool("keepalive", false, "the client reuses its connection (else a new one per request)")
	timeout := flag.Duration("timeout", 10*time.Second, "the client's timeout for one request")
	hold := flag.Duration("hold", 15*time.Second, "the longest the flood holds a connection the server does not close")
	flag.Parse()
	first, err := netip.ParseAddr(*floodFrom)
	if flag.NArg() != 0 || *rate < 0 || *sources < 1 || err != nil {
		flag.Usage()
		os.Exit(2)
	}
	from := []netip.Addr{first}
	for len(from) < *sources {
		from = append(from, from[len(from)-1].Next())
	}

	// The flood goes on until the client's last request is answered.
	floodCtx, stopFlood := context.WithCancel(context.Background())
	defer stopFlood()
	ctx, cancel := context.WithTimeout(floodCtx, *warmup+*duration)
	defer cancel()
	var f flood
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.run(floodCtx, *addr, from, *rate, *hold)
	}()

	select {
	case <-time.After(*warmup):
	case <-ctx.Done():
	}
	tr := &http.Transport{
		DialContext:       (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(*clientFrom)}}).DialContext,
		DisableKeepAlives: !*keepalive,
	}
	client := &http.Client{Transport: tr, Timeout: *timeout}
	// The client's requests start on time whatever the previous ones
	// take, so that a slow answer does not thin the sample.
	var (
		mu       sync.Mutex
		lat      []time.Duration
		failures = map[string]int{}
		example  = map[string]string{} // the first error of each kind
		requests sync.WaitGroup
	)
	for tick := time.NewTicker(*interval); ctx.Err() == nil; <-tick.C {
		requests.Add(1)
		go func() {
			defer requests.Done()
			start := time.Now()
			err := get(client, "http://"+*addr+*path)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				k := kind(err)
				if failures[k]++; failures[k] == 1 {
					example[k] = err.Error()
				}
				return
			}
			lat = append(lat, time.Since(start))
		}()
	}
	requests.Wait()
	stopFlood()
	wg.Wait()

	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(100 * time.Microsecond)
	}
	fmt.Printf("flood: %d silent connections/s from %v (%d addresses) for %v (+%v warm-up): %d opened, %d failed to open, %d closed by the server (after %v on average), %d held until the end\n",
		*rate, first, *sources, *duration, *warmup, f.opened.Load(), f.failed.Load(), f.closed.Load(), f.meanHold(), f.held.Load())
	fmt.Printf("client from %s, GET %s every %v (keep-alive %v): %d answered, %d failed %v\n",
		*clientFrom, *path, *interval, *keepalive, len(lat), sum(failures), failures)
	for k, e := range example {
		fmt.Printf("first %s failure: %s\n", k, e)
	}
	fmt.Printf("latency of the answered: p50 %v  p90 %v  p99 %v  max %v\n", pct(0.50), pct(0.90), pct(0.99), pct(1))
}

// get asks for url and reads the answer, which must be 200.
func get(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// kind names a client's failure for the report.
func kind(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "closed"
	default:
		return "other"
	}
}

func sum(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// flood opens silent connections and counts what becomes of them.
type flood struct {
	opened, failed, closed, held atomic.Int64
	holdNanos                    atomic.Int64 // of those closed by the server
	wg                           sync.WaitGroup
}

// run opens rate connections a second to addr, from each of the
// addresses from in turn, until ctx ends, in batches every 10 ms, then
// waits for every connection to be closed or dropped.
func (f *flood) run(ctx context.Context, addr string, from []netip.Addr, rate int, hold time.Duration) {
	dialers := make([]*net.Dialer, len(from))
	for i, a := range from {
		dialers[i] = &net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, 0)), Timeout: 5 * time.Second}
	}
	const step = 10 * time.Millisecond
	start := time.Now()
	sent := 0
	for tick := time.NewTicker(step); ctx.Err() == nil; <-tick.C {
		due := int(time.Since(start).Seconds() * float64(rate))
		for ; sent < due; sent++ {
			f.wg.Add(1)
			go f.one(ctx, dialers[sent%len(dialers)], addr, hold)
		}
	}
	f.wg.Wait()
}

func (f *flood) one(ctx context.Context, d *net.Dialer, addr string, hold time.Duration) {
	defer f.wg.Done()
	c, err := d.Dial("tcp", addr)
	if err != nil {
		f.failed.Add(1)
		return
	}
	f.opened.Add(1)
	opened := time.Now()
	// Closing with a reset leaves no TIME_WAIT behind on the client side,
	// whose ports thousands of connections a second would use up.
	c.(*net.TCPConn).SetLinger(0)
	defer c.Close()
	c.SetReadDeadline(opened.Add(hold))
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Now()) })
	defer stop()
	_, err = io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		f.held.Add(1)
		return
	}
	f.closed.Add(1)
	f.holdNanos.Add(int64(time.Since(opened)))
}

func (f *flood) meanHold() time.Duration {
	n := f.closed.Load()
	if n == 0 {
		return 0
	}
	return (time.Duration(f.holdNanos.Load() / n)).Round(time.Millisecond)
}
