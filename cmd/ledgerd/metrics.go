package main

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"
)

// metrics is the Prometheus text exposition of a few counters, gauges and
// histograms. It is written by hand rather than with the Prometheus client
// library: five series do not justify that library's dependency tree in a
// daemon whose dependencies are meant to be few. Label values are error
// codes, never request values.
type metrics struct {
	mu             sync.Mutex
	appendSeconds  histogram
	batchEntries   histogram
	rejects        map[string]uint64 // by error code
	storeDamage    uint64            // reads that found the store damaged
	appended       uint64
	replayed       uint64
	treeSize       func() uint64
	checkpointTime func() time.Time
	connections    func() (open int, reclaimed, refused uint64) // connLimiter.stats
	decisions      map[string]uint64                            // by decision value
	reloadsOK      uint64
	reloadsFailed  uint64
	configReloads  [2]uint64         // failed, ok
	previousTokens map[string]uint64 // requests authenticated with a previous token, by mediator
	policySet      string            // the digest of the set in force; "" if none
	witnesses      func(io.Writer)   // the witnesses' series; nil without witnesses
	cluster        func(io.Writer)   // the cluster's series (cluster.go); nil for a single ledgerd
}

type histogram struct {
	bounds []float64
	counts []uint64 // len(bounds)+1, the last for +Inf
	sum    float64
	count  uint64
}

func newHistogram(bounds ...float64) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	h.counts[sort.SearchFloat64s(h.bounds, v)]++
	h.sum += v
	h.count++
}

func (h *histogram) write(w io.Writer, name, help string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		fmt.Fprintf(w, "%s_bucket{le=\"%s\"} %d\n", name, strconv.FormatFloat(b, 'g', -1, 64), cum)
	}
	cum += h.counts[len(h.bounds)]
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %g\n%s_count %d\n", name, cum, name, h.sum, name, h.count)
}

func newMetrics() *metrics {
	return &metrics{
		appendSeconds:  newHistogram(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
		batchEntries:   newHistogram(1, 2, 4, 8, 16, 32, 64, 128, 256),
		rejects:        map[string]uint64{},
		decisions:      map[string]uint64{},
		previousTokens: map[string]uint64{},
	}
}

// previousTokenRequest counts a request of mediator's authenticated with
// its previous token (config previous_token_sha256).
func (m *metrics) previousTokenRequest(mediator string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.previousTokens[mediator]++
}

func (m *metrics) observeAppend(d time.Duration, replayed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.appendSeconds.observe(d.Seconds())
	if replayed {
		m.replayed++
	} else {
		m.appended++
	}
}

func (m *metrics) observeBatch(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.batchEntries.observe(float64(n))
}

func (m *metrics) reject(code string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rejects[code]++
}

// damage counts a request that found the store damaged.
func (m *metrics) damage() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.storeDamage++
}

// observeDecision counts a decision the ledger made (not a replay).
func (m *metrics) observeDecision(decision string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.decisions[decision]++
}

// policyReload counts a policy reload, put in force (or unchanged) or
// refused.
func (m *metrics) policyReload(ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ok {
		m.reloadsOK++
	} else {
		m.reloadsFailed++
	}
}

// configReload counts a config reload (SIGHUP): credentials put in force,
// or a config refused.
func (m *metrics) configReload(ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ok {
		m.configReloads[1]++
	} else {
		m.configReloads[0]++
	}
}

func (m *metrics) setPolicySet(digest string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.policySet = digest
}

func (m *metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	m.mu.Lock()
	defer m.mu.Unlock()
	m.appendSeconds.write(w, "ledgerd_append_seconds", "Time from receiving an append to its durable receipt.")
	m.batchEntries.write(w, "ledgerd_batch_entries", "Entries per group commit.")
	fmt.Fprintf(w, "# HELP ledgerd_appends_total Appends acknowledged, by whether they replayed an idempotency key.\n# TYPE ledgerd_appends_total counter\n")
	fmt.Fprintf(w, "ledgerd_appends_total{replayed=\"false\"} %d\nledgerd_appends_total{replayed=\"true\"} %d\n", m.appended, m.replayed)
	fmt.Fprintf(w, "# HELP ledgerd_rejects_total Requests refused, by error code.\n# TYPE ledgerd_rejects_total counter\n")
	codes := make([]string, 0, len(m.rejects))
	for c := range m.rejects {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	for _, c := range codes {
		fmt.Fprintf(w, "ledgerd_rejects_total{code=%q} %d\n", c, m.rejects[c])
	}
	fmt.Fprintf(w, "# HELP ledgerd_store_damage_total Requests that found the store damaged (ledger.ErrCorrupt: its records contradict themselves, or it lost something they say it holds), answered 500; ledgerd fsck names the damage.\n# TYPE ledgerd_store_damage_total counter\nledgerd_store_damage_total %d\n", m.storeDamage)
	fmt.Fprintf(w, "# HELP ledgerd_decisions_total Decisions the ledger made and recorded (POST /v1/decide, replays excluded), by decision.\n# TYPE ledgerd_decisions_total counter\n")
	for _, d := range []string{"allow", "deny", "needs_approval"} {
		fmt.Fprintf(w, "ledgerd_decisions_total{decision=%q} %d\n", d, m.decisions[d])
	}
	fmt.Fprintf(w, "# HELP ledgerd_policy_reloads_total Policy reloads (SIGHUP), by result: ok (in force, or unchanged) or failed (refused; the set in force stays).\n# TYPE ledgerd_policy_reloads_total counter\n")
	fmt.Fprintf(w, "ledgerd_policy_reloads_total{result=\"ok\"} %d\nledgerd_policy_reloads_total{result=\"failed\"} %d\n", m.reloadsOK, m.reloadsFailed)
	fmt.Fprintf(w, "# HELP ledgerd_config_reloads_total Config reloads (SIGHUP), by result: ok (the config's credentials in force) or failed (the config was refused; the credentials in force stay).\n# TYPE ledgerd_config_reloads_total counter\n")
	fmt.Fprintf(w, "ledgerd_config_reloads_total{result=\"ok\"} %d\nledgerd_config_reloads_total{result=\"failed\"} %d\n", m.configReloads[1], m.configReloads[0])
	// Mediator names come from the config, never from a request.
	fmt.Fprintf(w, "# HELP ledgerd_previous_token_requests_total Requests authenticated with a mediator's previous token (ledgerd token rotate --overlap), by mediator: once it stops growing, the mediator's clients use the new token.\n# TYPE ledgerd_previous_token_requests_total counter\n")
	for _, name := range slices.Sorted(maps.Keys(m.previousTokens)) {
		fmt.Fprintf(w, "ledgerd_previous_token_requests_total{mediator=%q} %d\n", name, m.previousTokens[name])
	}
	if m.policySet != "" {
		fmt.Fprintf(w, "# HELP ledgerd_policy_set_info The policy set in force, by digest.\n# TYPE ledgerd_policy_set_info gauge\nledgerd_policy_set_info{policy_set=%q} 1\n", m.policySet)
	}
	if m.treeSize != nil {
		fmt.Fprintf(w, "# HELP ledgerd_tree_size Durable entries.\n# TYPE ledgerd_tree_size gauge\nledgerd_tree_size %d\n", m.treeSize())
	}
	if m.connections != nil {
		open, reclaimed, refused := m.connections()
		fmt.Fprintf(w, "# HELP ledgerd_connections_open Client connections open (at most max_connections).\n# TYPE ledgerd_connections_open gauge\nledgerd_connections_open %d\n", open)
		fmt.Fprintf(w, "# HELP ledgerd_connections_reclaimed_total Connections without a request closed to make room for a new one at max_connections or max_connections_per_source.\n# TYPE ledgerd_connections_reclaimed_total counter\nledgerd_connections_reclaimed_total %d\n", reclaimed)
		fmt.Fprintf(w, "# HELP ledgerd_connections_refused_total New connections closed at once because their source had max_connections_per_source connections, all busy with requests.\n# TYPE ledgerd_connections_refused_total counter\nledgerd_connections_refused_total %d\n", refused)
	}
	if m.witnesses != nil {
		m.witnesses(w)
	}
	if m.cluster != nil {
		m.cluster(w)
	}
	if m.checkpointTime != nil {
		if t := m.checkpointTime(); !t.IsZero() {
			fmt.Fprintf(w, "# HELP ledgerd_checkpoint_age_seconds Time since the latest checkpoint was signed or loaded.\n# TYPE ledgerd_checkpoint_age_seconds gauge\nledgerd_checkpoint_age_seconds %g\n", time.Since(t).Seconds())
		}
	}
}
