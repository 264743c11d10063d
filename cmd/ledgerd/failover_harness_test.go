//go:build linux

package main

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/verify"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// The harness of the cluster tests with real processes
// (failover_e2e_test.go): ledgerd instances on one PostgreSQL database,
// closed-loop appenders that keep an independent record of every
// acknowledgement, a poller that keeps every signed checkpoint any
// instance serves, and the final check of the log against both.

// clusterLedgerd is the ledgerd binary the cluster tests run.
func clusterLedgerd(t *testing.T) string { return built(t, ".") }

// testCluster is ledgerd instances sharing one signing key, one mediator
// token and one PostgreSQL database.
type testCluster struct {
	t     *testing.T
	bin   string
	dir   string
	token string
	vkey  string
	key   *verify.Key
	seed  uint64
	nodes []*proc
	// hc gives up on an append after 5 s, as a mediator would, so that
	// an appender whose request hangs on a frozen instance moves on;
	// patient waits for the answer (postPatient).
	hc, patient *http.Client
}

// proc is one ledgerd instance: its config and log file stay across
// restarts, and so does its address (the advertise_url the others forward
// to).
type proc struct {
	name    string
	addr    string
	config  string
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	starts int
}

func (n *proc) url() string { return "http://" + n.addr }

// newCluster makes the config of instances named names on database
// dbURL: one "ledgerd init" for the key and the token, then each
// instance's config, the same apart from listen, store_dir and cluster's
// instance and advertise_url, with extra members added at the top
// (configExtra) and in cluster (clusterExtra: lease_ttl, say). Nothing is
// started. On failure, the cleanup prints the seed and the end of each
// instance's log.
func newCluster(t *testing.T, dbURL string, seed uint64, configExtra, clusterExtra map[string]any, names ...string) *testCluster {
	t.Helper()
	c := &testCluster{t: t, bin: clusterLedgerd(t), dir: t.TempDir(), seed: seed,
		hc:      &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		patient: &http.Client{Timeout: 60 * time.Second}}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.kill()
		}
		c.hc.CloseIdleConnections()
		c.patient.CloseIdleConnections()
		if t.Failed() {
			t.Logf("seed %d (LEDGER_CLUSTER_SEED=%d reproduces the test's random choices)", seed, seed)
			for _, n := range c.nodes {
				t.Logf("--- the end of instance %s's log (%s, %d starts):\n%s", n.name, n.addr, n.starts, tail(n.logPath, 100))
			}
		}
	})
	initDir := filepath.Join(c.dir, "init")
	out, err := exec.Command(c.bin, "init", "--name", "ledger.example.org/cluster", "--data", initDir).CombinedOutput()
	if err != nil {
		t.Fatalf("ledgerd init: %v\n%s", err, out)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, `mediator "local" token (shown once, stored only as a hash): `); ok {
			c.token = rest
		}
		if rest, ok := strings.CutPrefix(line, "verifier key: "); ok {
			c.vkey = rest
		}
	}
	if c.token == "" || c.vkey == "" {
		t.Fatalf("ledgerd init did not show a token and a verifier key:\n%s", out)
	}
	if c.key, err = verify.ParseKey(c.vkey); err != nil {
		t.Fatal(err)
	}
	var base map[string]any
	b, err := os.ReadFile(filepath.Join(initDir, configName))
	if err != nil || json.Unmarshal(b, &base) != nil {
		t.Fatalf("reading the config ledgerd init made: %v\n%s", err, b)
	}
	base["key_file"] = filepath.Join(initDir, keyName)
	base["store"] = dbURL
	for k, v := range configExtra {
		base[k] = v
	}
	for _, name := range names {
		n := &proc{name: name, addr: stableAddr(t), logPath: filepath.Join(c.dir, name+".log")}
		storeDir := filepath.Join(c.dir, name)
		if err := os.Mkdir(storeDir, 0o700); err != nil {
			t.Fatal(err)
		}
		cl := map[string]any{"instance": name, "advertise_url": n.url()}
		for k, v := range clusterExtra {
			cl[k] = v
		}
		cfg := map[string]any{}
		for k, v := range base {
			cfg[k] = v
		}
		cfg["listen"], cfg["store_dir"], cfg["cluster"] = n.addr, storeDir, cl
		b, _ := json.MarshalIndent(cfg, "", "  ")
		n.config = filepath.Join(storeDir, configName)
		if err := os.WriteFile(n.config, b, 0o600); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, n)
	}
	return c
}

// stableAddr is a free loopback address whose port lies below the
// kernel's ephemeral range, so that no client connection of the test takes
// it while the instance listening there is down.
func stableAddr(t *testing.T) string {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				low = v
			}
		}
	}
	if low <= 11000 {
		return apitest.FreeAddr(t)
	}
	for range 200 {
		addr := fmt.Sprintf("127.0.0.1:%d", 10000+rand.IntN(low-10000))
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			return addr
		}
	}
	t.Fatal("no free port below the ephemeral range")
	return ""
}

// start starts n's ledgerd, its output appended to n's log file; it does
// not wait for it to serve (waitReady does).
func (c *testCluster) start(n *proc) {
	c.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		c.t.Fatalf("instance %s started twice", n.name)
	}
	f, err := os.OpenFile(n.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "=== test: start %d of instance %s at %s\n", n.starts+1, n.name, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(c.bin, "serve", "--config", n.config)
	cmd.Env = append(os.Environ(), "GOMEMLIMIT=160MiB")
	cmd.Stdout, cmd.Stderr = f, f
	// A test binary that dies does not leave ledgerd behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	n.cmd, n.exited = cmd, exited
	n.starts++
}

// kill ends n's ledgerd with SIGKILL, if it runs, and waits for it.
func (n *proc) kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Kill()
	<-n.exited
	n.cmd, n.exited = nil, nil
}

// signal sends sig to n's ledgerd.
func (n *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		t.Fatalf("instance %s does not run", n.name)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%v to instance %s: %v", sig, n.name, err)
	}
}

// running reports whether n's ledgerd runs (it has not exited).
func (n *proc) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// readyAnswer is GET /readyz's answer.
type readyAnswer struct {
	status    int
	Ready     bool   `json:"ready"`
	Role      string `json:"role"`
	Instance  string `json:"instance"`
	Sequencer string `json:"sequencer"`
	Epoch     uint64 `json:"epoch"`
}

// readyz asks n's /readyz (with ?role=sequencer if sequencer); status 0
// when n does not answer.
func (c *testCluster) readyz(n *proc, sequencer bool) readyAnswer {
	u := n.url() + "/readyz"
	if sequencer {
		u += "?role=sequencer"
	}
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(u)
	if err != nil {
		return readyAnswer{}
	}
	defer resp.Body.Close()
	r := readyAnswer{status: resp.StatusCode}
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &r)
	return r
}

// waitReady waits until n's /readyz answers 200, failing the test if n's
// ledgerd exits.
func (c *testCluster) waitReady(n *proc) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("instance %s's /readyz to answer 200", n.name), 30*time.Second, func() bool {
		if !n.running() {
			c.t.Fatalf("instance %s exited", n.name)
		}
		return c.readyz(n, false).status == http.StatusOK
	})
}

// sequencer waits until one of nodes answers /readyz?role=sequencer with
// 200 and an epoch above after, and returns it and its epoch.
func (c *testCluster) sequencer(nodes []*proc, after uint64, within time.Duration) (*proc, uint64) {
	c.t.Helper()
	var found *proc
	var epoch uint64
	c.waitFor("a sequencer", within, func() bool {
		for _, n := range nodes {
			if r := c.readyz(n, true); r.status == http.StatusOK && r.Epoch > after {
				found, epoch = n, r.Epoch
				return true
			}
		}
		return false
	})
	return found, epoch
}

// waitFor polls cond every 10 ms until it holds, failing the test after
// within.
func (c *testCluster) waitFor(what string, within time.Duration, cond func() bool) {
	c.t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %v waiting for %s", within, what)
		}
	}
}

// others is c's nodes except n.
func (c *testCluster) others(n *proc) []*proc {
	var o []*proc
	for _, m := range c.nodes {
		if m != n {
			o = append(o, m)
		}
	}
	return o
}

// tail is the last lines of the log at path, leaving out the refusals of
// single appends (counted instead), which would crowd out the instance's
// own events.
func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var kept []string
	left := 0
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if strings.Contains(line, `"msg":"append failed"`) || strings.Contains(line, `"msg":"append not answered`) {
			left++
			continue
		}
		kept = append(kept, line)
	}
	if len(kept) > lines {
		kept = kept[len(kept)-lines:]
	}
	return fmt.Sprintf("(%d lines about single appends left out)\n%s", left, strings.Join(kept, "\n"))
}

// ackRecord is an acknowledged append, as the client saw it.
type ackRecord struct {
	key    string
	index  uint64
	leaf   string // leaf_hash, hex
	entry  []byte // the signed entry, as answered
	status int    // 201, or 200 for a replay
	node   string // the instance that answered
	sent   time.Time
	at     time.Time
}

// appendAnswer is one append attempt's outcome.
type appendAnswer struct {
	node       string
	key        string
	start, end time.Time
	status     int    // 0: no HTTP answer
	err        error  // the transport's error, when status is 0
	code       string // the error code of a refusal
	retryAfter string
	replayed   bool
	receipt    *appendReceipt // of a 200 or 201
}

// appendLoad is closed-loop appenders: each appends entries with unique
// idempotency keys (the key also in the entry's attributes, so that the
// log itself shows a key appended twice), retrying the same key after any
// failure, on the instance pick chooses for the attempt, until stop.
type appendLoad struct {
	c    *testCluster
	pick func(appender, attempt int) *proc
	// observe, if set, sees every answer (from the appenders' goroutines).
	observe func(appendAnswer)

	mu       sync.Mutex
	acks     map[string]ackRecord // by key
	byIndex  map[uint64]string    // key by index
	problems []string             // acknowledgements contradicting others
	statuses map[string]int       // answers counted by "status code"
	lastSent time.Time            // the latest start of an acknowledged attempt

	// inflight counts the appends sent to each instance and not yet
	// answered, by name.
	inflight map[string]*atomic.Int64

	stopping atomic.Bool
	wg       sync.WaitGroup
}

// newLoad starts appenders appenders.
func (c *testCluster) newLoad(appenders int, pick func(appender, attempt int) *proc, observe func(appendAnswer)) *appendLoad {
	l := &appendLoad{c: c, pick: pick, observe: observe, acks: map[string]ackRecord{}, byIndex: map[uint64]string{}, statuses: map[string]int{},
		inflight: map[string]*atomic.Int64{}}
	for _, n := range c.nodes {
		l.inflight[n.name] = new(atomic.Int64)
	}
	for g := range appenders {
		l.wg.Go(func() { l.run(g) })
	}
	c.t.Cleanup(l.stop)
	return l
}

func (l *appendLoad) run(g int) {
	for i := 0; !l.stopping.Load(); i++ {
		key := fmt.Sprintf("a%02d-%06d", g, i)
		body := clusterBody(key)
		for attempt := 0; !l.stopping.Load(); attempt++ {
			n := l.pick(g, attempt)
			l.inflight[n.name].Add(1)
			a := l.c.post(n, key, body)
			l.inflight[n.name].Add(-1)
			if l.observe != nil {
				l.observe(a)
			}
			if l.record(a) {
				break
			}
			// Paced, not timed: the retry goes out at once on another
			// instance, or after a short pause on the same one.
			time.Sleep(time.Duration(10+rand.IntN(40)) * time.Millisecond)
		}
	}
}

// record counts a and keeps it if it is an acknowledgement, checking it
// against the earlier ones; it reports whether a acknowledged the key.
func (l *appendLoad) record(a appendAnswer) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case a.status == 0:
		l.statuses["no answer"]++
	case a.code != "":
		l.statuses[fmt.Sprintf("%d %s", a.status, a.code)]++
	default:
		l.statuses[strconv.Itoa(a.status)]++
	}
	ak, ok := a.ack()
	if !ok {
		return false
	}
	l.keep(ak)
	return true
}

// keep records an acknowledgement; the caller holds l.mu.
func (l *appendLoad) keep(a ackRecord) {
	if prev, ok := l.acks[a.key]; ok && prev.index != a.index {
		l.problems = append(l.problems, fmt.Sprintf("key %s acknowledged at index %d (%d by %s) and at index %d (%d by %s)",
			a.key, prev.index, prev.status, prev.node, a.index, a.status, a.node))
	}
	if k, ok := l.byIndex[a.index]; ok && k != a.key {
		l.problems = append(l.problems, fmt.Sprintf("index %d acknowledged for key %s and for key %s (%d by %s)", a.index, k, a.key, a.status, a.node))
	}
	if _, ok := l.acks[a.key]; !ok {
		l.acks[a.key] = a
	}
	l.byIndex[a.index] = a.key
	if a.sent.After(l.lastSent) {
		l.lastSent = a.sent
	}
}

// firstAckSentAfter is the earliest acknowledgement of an attempt that
// started after t, if there is one yet: after a kill at t, one that only
// the new sequencer can have given.
func (l *appendLoad) firstAckSentAfter(t time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.lastSent.After(t) {
		return time.Time{}, false
	}
	var first time.Time
	for _, a := range l.acks {
		if a.sent.After(t) && (first.IsZero() || a.at.Before(first)) {
			first = a.at
		}
	}
	return first, true
}

// stop stops the appenders and waits for them.
func (l *appendLoad) stop() {
	l.stopping.Store(true)
	l.wg.Wait()
}

// count is the number of acknowledged keys.
func (l *appendLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks)
}

// waitAcks waits until n more keys than now are acknowledged.
func (l *appendLoad) waitAcks(what string, n int, within time.Duration) {
	l.c.t.Helper()
	want := l.count() + n
	l.c.waitFor(fmt.Sprintf("%d more acknowledgements (%s)", n, what), within, func() bool { return l.count() >= want })
}

// summary is the counts of answers, sorted.
func (l *appendLoad) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	for k, v := range l.statuses {
		parts = append(parts, fmt.Sprintf("%s: %d", k, v))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// ack is a's acknowledgement, if it is one (201, or 200 replayed).
func (a appendAnswer) ack() (ackRecord, bool) {
	if a.receipt == nil {
		return ackRecord{}, false
	}
	return ackRecord{key: a.key, index: a.receipt.Index, leaf: a.receipt.LeafHash, entry: a.receipt.Entry,
		status: a.status, node: a.node, sent: a.start, at: a.end}, true
}

// clusterBody is an append whose attributes and parameters carry key.
func clusterBody(key string) string {
	c, _ := commit.Params(fmt.Appendf(nil, `{"request":%q,"payee":"billing@example.com"}`, key))
	tiers := commit.Digest(sha256.Sum256([]byte("tiers")))
	return fmt.Sprintf(`{"principal":"agent-1","action":"make_payment","decision":"allow","policies":["payments.limit"],`+
		`"params_digest":"%s","params_size":%d,"tiers_digest":"%s","attributes":{"request":%q}}`, c.Digest, c.Size, tiers, key)
}

// appendReceipt is an append's 200 or 201 answer.
type appendReceipt struct {
	Index    uint64          `json:"index"`
	LeafHash string          `json:"leaf_hash"`
	Entry    json.RawMessage `json:"entry"`
}

// post appends body with Idempotency-Key key on n, and returns the
// answer, with the receipt of an acknowledgement; it gives up after 5 s.
func (c *testCluster) post(n *proc, key, body string) appendAnswer {
	return c.postWith(c.hc, n, key, body)
}

// postPatient is post waiting up to 60 s for the answer.
func (c *testCluster) postPatient(n *proc, key, body string) appendAnswer {
	return c.postWith(c.patient, n, key, body)
}

func (c *testCluster) postWith(hc *http.Client, n *proc, key, body string) appendAnswer {
	a := appendAnswer{node: n.name, key: key, start: time.Now()}
	req, _ := http.NewRequest("POST", n.url()+"/v1/entries", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Idempotency-Key", key)
	resp, err := hc.Do(req)
	if err != nil {
		a.end, a.err = time.Now(), err
		return a
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	a.end = time.Now()
	if err != nil {
		a.err = err
		return a
	}
	a.status, a.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	a.replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		a.code = errorCode(b)
		if a.code == "" {
			a.code = "(no error code)"
		}
		return a
	}
	var r appendReceipt
	if err := json.Unmarshal(b, &r); err != nil || r.LeafHash == "" || len(r.Entry) == 0 {
		a.code = "(unreadable receipt)"
		c.t.Errorf("instance %s answered %d with an unreadable receipt for key %s: %v\n%s", n.name, resp.StatusCode, key, err, b)
		return a
	}
	a.receipt = &r
	return a
}

// cpPoller keeps every distinct signed checkpoint that any instance
// serves at GET /v1/checkpoint, polled while it runs.
type cpPoller struct {
	c        *testCluster
	mu       sync.Mutex
	seen     map[string]string // signed note -> the instance that served it first
	stopping atomic.Bool
	wg       sync.WaitGroup
}

func (c *testCluster) pollCheckpoints() *cpPoller {
	p := &cpPoller{c: c, seen: map[string]string{}}
	client := &http.Client{Timeout: 2 * time.Second}
	for _, n := range c.nodes {
		p.wg.Go(func() {
			for !p.stopping.Load() {
				if resp, err := client.Get(n.url() + "/v1/checkpoint"); err == nil {
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode == http.StatusOK {
						p.mu.Lock()
						if _, ok := p.seen[string(b)]; !ok {
							p.seen[string(b)] = n.name
						}
						p.mu.Unlock()
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	c.t.Cleanup(p.stop)
	return p
}

func (p *cpPoller) stop() {
	p.stopping.Store(true)
	p.wg.Wait()
}

// finalLog is the final log: what checkLog learned from a verified export.
type finalLog struct {
	size    uint64
	entries [][]byte
}

// checkLog stops the load and the checkpoint poller, and checks the log
// against them: an export of the whole log, downloaded from instance
// from, verifies with the verifier key alone; every acknowledged key's
// entry is at its acknowledged index, with its leaf hash, byte for byte;
// no key is in the log twice; every checkpoint observed is signed by the
// key, the same root for the same size, and consistent with the final
// tree (a consistency proof from from, checked here). It also replays
// every acknowledged key on the instances in turn: each answers 200 with
// the same index.
func (c *testCluster) checkLog(l *appendLoad, cps *cpPoller, from *proc) finalLog {
	t := c.t
	t.Helper()
	l.stop()
	cps.stop()
	l.mu.Lock()
	problems := slices.Clone(l.problems)
	acks := make([]ackRecord, 0, len(l.acks))
	for _, a := range l.acks {
		acks = append(acks, a)
	}
	l.mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	slices.SortFunc(acks, func(a, b ackRecord) int { return cmp.Compare(a.index, b.index) })
	var want uint64
	if len(acks) > 0 {
		want = acks[len(acks)-1].index + 1
	}
	// The observed checkpoints, each opened with the key.
	type observed struct {
		size uint64
		root []byte
		node string
	}
	var obs []observed
	for signed, node := range cps.seen {
		cp, err := c.key.Checkpoint([]byte(signed))
		if err != nil {
			t.Errorf("instance %s served a checkpoint the key does not verify: %v\n%s", node, err, signed)
			continue
		}
		obs = append(obs, observed{cp.Size, cp.Hash, node})
		want = max(want, cp.Size)
	}
	slices.SortFunc(obs, func(a, b observed) int { return cmp.Compare(a.size, b.size) })

	// The final tree: a checkpoint covering every acknowledgement and
	// every checkpoint observed.
	var size uint64
	c.waitFor(fmt.Sprintf("a checkpoint of size %d or more on instance %s", want, from.name), 30*time.Second, func() bool {
		resp, err := c.hc.Get(from.url() + "/v1/checkpoint")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cp, err := c.key.Checkpoint(b)
		if err != nil || cp.Size < want {
			return false
		}
		size = cp.Size
		return true
	})
	resp, err := c.hc.Get(fmt.Sprintf("%s/v1/export?start=0&end=%d&tree_size=%d", from.url(), size, size))
	if err != nil {
		t.Fatal(err)
	}
	export, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("export of [0, %d) from instance %s: %d %v\n%.500s", size, from.name, resp.StatusCode, err, export)
	}
	entries := make([][]byte, size)
	report, err := verify.VerifyExport(bytes.NewReader(export), c.key, verify.ExportOptions{
		OnEntry: func(index uint64, e []byte) { entries[index] = e }})
	if err != nil {
		t.Fatalf("the export of [0, %d) does not verify: %v", size, err)
	}
	if report.Start != 0 || report.End != size || report.Checkpoint.Size != size {
		t.Fatalf("export of [0, %d) covers [%d, %d) at size %d", size, report.Start, report.End, report.Checkpoint.Size)
	}
	root := report.Checkpoint.Hash

	// Every acknowledgement holds.
	lost := 0
	for _, a := range acks {
		leaf := rfc6962.DefaultHasher.HashLeaf(entries[a.index])
		if hex.EncodeToString(leaf) != a.leaf || !bytes.Equal(entries[a.index], a.entry) {
			if lost++; lost <= 10 {
				t.Errorf("acknowledged entry lost: key %s acknowledged at index %d (%d by instance %s at %s, leaf %s), the log holds leaf %x there:\n%s",
					a.key, a.index, a.status, a.node, a.at.UTC().Format(time.RFC3339Nano), a.leaf, leaf, entries[a.index])
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged entries lost", lost, len(acks))
	}
	// No key twice in the log.
	where := map[string]uint64{}
	for i, e := range entries {
		var v struct {
			Attributes struct {
				Request string `json:"request"`
			} `json:"attributes"`
		}
		if err := json.Unmarshal(e, &v); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if v.Attributes.Request == "" {
			continue // not an appender's
		}
		if j, ok := where[v.Attributes.Request]; ok {
			t.Errorf("key %s appended twice: at index %d and %d", v.Attributes.Request, j, i)
		}
		where[v.Attributes.Request] = uint64(i)
	}
	// Every checkpoint observed is consistent with every later one: the
	// same root for the same size, and a prefix of the final tree.
	proved := map[uint64]bool{}
	for i, o := range obs {
		if i > 0 && obs[i-1].size == o.size && !bytes.Equal(obs[i-1].root, o.root) {
			t.Errorf("two checkpoints of size %d with different roots (from instances %s and %s)", o.size, obs[i-1].node, o.node)
		}
		if proved[o.size] {
			continue
		}
		proved[o.size] = true
		if o.size == size {
			if !bytes.Equal(o.root, root) {
				t.Errorf("the checkpoint of size %d from instance %s has another root than the export's", o.size, o.node)
			}
			continue
		}
		var p apitest.Proof
		resp, err := c.hc.Get(fmt.Sprintf("%s/v1/consistency?size1=%d&tree_size=%d", from.url(), o.size, size))
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("consistency proof %d -> %d from instance %s: %d %v", o.size, size, from.name, resp.StatusCode, err)
		}
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, o.size, size, p.Hashes, o.root, root); err != nil {
			t.Errorf("the checkpoint of size %d (from instance %s) is not consistent with the final tree of size %d: %v", o.size, o.node, size, err)
		}
	}
	// Idempotency across instances: each acknowledged key, sent again to
	// the instances in turn, is answered 200 with the same index.
	var running []*proc
	for _, n := range c.nodes {
		if n.running() {
			running = append(running, n)
		}
	}
	var next atomic.Int64
	var mu sync.Mutex
	var wrong []string
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(acks); i = int(next.Add(1) - 1) {
				a := acks[i]
				var got appendAnswer
				for attempt := range 20 {
					got = c.post(running[(i+attempt)%len(running)], a.key, clusterBody(a.key))
					if got.status != http.StatusServiceUnavailable && got.status != 0 {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				if got.status != http.StatusOK || !got.replayed || got.receipt == nil || got.receipt.Index != a.index {
					mu.Lock()
					wrong = append(wrong, fmt.Sprintf("key %s (index %d) again on instance %s: %d %s replayed=%v %v", a.key, a.index, got.node, got.status, got.code, got.replayed, got.err))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for i, w := range wrong {
		if i == 10 {
			t.Errorf("... %d replays wrong in all", len(wrong))
			break
		}
		t.Error(w)
	}
	var sizes []uint64
	for _, o := range obs {
		if len(sizes) == 0 || sizes[len(sizes)-1] != o.size {
			sizes = append(sizes, o.size)
		}
	}
	t.Logf("final log: %d entries, %d acknowledged keys, checkpoints of %d sizes observed (%v); answers: %s",
		size, len(acks), len(sizes), sizes, l.summary())
	return finalLog{size: size, entries: entries}
}
