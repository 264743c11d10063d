// Package metrics is ledgerd's series (docs/api.md, GET /metrics), in a
// Prometheus registry of their own served by promhttp: the counters and
// histograms package server counts as things happen, and the gauges read
// from their sources at each scrape.
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/decisionledger/ledger/witness"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Series are ledgerd's series, in a Prometheus registry of their own
// (never the default one: a process may run several servers, as the
// tests do) served by promhttp. The counters and histograms count as
// things happen; the gauges (tree size, checkpoint age, connections, the
// witnesses' and the cluster's series) are read from their sources at
// each scrape. Label values are error codes and configured names, never
// request values.
type Series struct {
	reg     *prometheus.Registry
	handler http.Handler

	appendSeconds    prometheus.Histogram
	batchEntries     prometheus.Histogram
	appended         prometheus.Counter     // ledgerd_appends_total{replayed="false"}
	replayed         prometheus.Counter     // ledgerd_appends_total{replayed="true"}
	rejects          *prometheus.CounterVec // by error code
	storeDamage      prometheus.Counter     // reads that found the store damaged
	decisions        *prometheus.CounterVec // by decision value
	reloadsOK        prometheus.Counter     // policy reloads
	reloadsFailed    prometheus.Counter
	configReloadsOK  prometheus.Counter
	configReloadsBad prometheus.Counter
	previousTokens   *prometheus.CounterVec // requests authenticated with a previous token, by mediator

	// The sources of the series read at each scrape (collect), set as
	// the server is wired; nil (or "") writes none of their series.
	mu             sync.Mutex
	policySet      string // the digest of the set in force
	treeSize       func() uint64
	checkpointTime func() time.Time
	connections    func() (open int, reclaimed, refused uint64) // connlimit.Listener.Stats
	witnesses      func() witness.Snapshot                      // the witnesses' series (collectWitnessSnapshot)
}

// The series read at each scrape.
var (
	policySetDesc = prometheus.NewDesc("ledgerd_policy_set_info",
		"The policy set in force, by digest.", []string{"policy_set"}, nil)
	treeSizeDesc = prometheus.NewDesc("ledgerd_tree_size",
		"Durable entries.", nil, nil)
	connectionsOpenDesc = prometheus.NewDesc("ledgerd_connections_open",
		"Client connections open (at most max_connections).", nil, nil)
	connectionsReclaimedDesc = prometheus.NewDesc("ledgerd_connections_reclaimed_total",
		"Connections without a request closed to make room for a new one at max_connections or max_connections_per_source.", nil, nil)
	connectionsRefusedDesc = prometheus.NewDesc("ledgerd_connections_refused_total",
		"New connections closed at once because their source had max_connections_per_source connections, all busy with requests.", nil, nil)
	checkpointAgeDesc = prometheus.NewDesc("ledgerd_checkpoint_age_seconds",
		"Time since the latest checkpoint was signed or loaded.", nil, nil)
)

// New makes the series, in a registry of their own.
func New() *Series {
	m := &Series{reg: prometheus.NewRegistry()}
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	m.appendSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ledgerd_append_seconds",
		Help:    "Time from receiving an append to its durable receipt.",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}})
	m.batchEntries = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ledgerd_batch_entries",
		Help:    "Entries per group commit.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}})
	appends := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ledgerd_appends_total",
		Help: "Appends acknowledged, by whether they replayed an idempotency key."}, []string{"replayed"})
	m.appended, m.replayed = appends.WithLabelValues("false"), appends.WithLabelValues("true")
	m.rejects = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ledgerd_rejects_total",
		Help: "Requests refused, by error code."}, []string{"code"})
	m.storeDamage = prometheus.NewCounter(prometheus.CounterOpts{Name: "ledgerd_store_damage_total",
		Help: "Requests that found the store damaged (ledger.ErrCorrupt: its records contradict themselves, or it lost something they say it holds), answered 500; ledgerd fsck names the damage."})
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ledgerd_decisions_total",
		Help: "Decisions the ledger made and recorded (POST /v1/decide, replays excluded), by decision."}, []string{"decision"})
	for _, d := range []string{"allow", "deny", "needs_approval"} {
		m.decisions.WithLabelValues(d)
	}
	policyReloads := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ledgerd_policy_reloads_total",
		Help: "Policy reloads (SIGHUP), by result: ok (in force, or unchanged) or failed (refused; the set in force stays)."}, []string{"result"})
	m.reloadsOK, m.reloadsFailed = policyReloads.WithLabelValues("ok"), policyReloads.WithLabelValues("failed")
	configReloads := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ledgerd_config_reloads_total",
		Help: "Config reloads (SIGHUP), by result: ok (the config's credentials in force) or failed (the config was refused; the credentials in force stay)."}, []string{"result"})
	m.configReloadsOK, m.configReloadsBad = configReloads.WithLabelValues("ok"), configReloads.WithLabelValues("failed")
	// Mediator names come from the config, never from a request.
	m.previousTokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ledgerd_previous_token_requests_total",
		Help: "Requests authenticated with a mediator's previous token (ledgerd token rotate --overlap), by mediator: once it stops growing, the mediator's clients use the new token."}, []string{"mediator"})
	m.reg.MustRegister(m.appendSeconds, m.batchEntries, appends, m.rejects, m.storeDamage, m.decisions,
		policyReloads, configReloads, m.previousTokens, (*scrapeTime)(m))
	return m
}

// PreviousTokenRequest counts a request of mediator's authenticated with
// its previous token (config previous_token_sha256).
func (m *Series) PreviousTokenRequest(mediator string) {
	m.previousTokens.WithLabelValues(mediator).Inc()
}

// ObserveAppend counts an append acknowledged d after it was received,
// replayed if its idempotency key named an entry appended before.
func (m *Series) ObserveAppend(d time.Duration, replayed bool) {
	m.appendSeconds.Observe(d.Seconds())
	if replayed {
		m.replayed.Inc()
	} else {
		m.appended.Inc()
	}
}

// ObserveBatch counts a group commit of n entries (ledger.Options.OnBatch).
func (m *Series) ObserveBatch(n int) {
	m.batchEntries.Observe(float64(n))
}

// Reject counts a request refused with code.
func (m *Series) Reject(code string) {
	m.rejects.WithLabelValues(code).Inc()
}

// Damage counts a request that found the store damaged.
func (m *Series) Damage() {
	m.storeDamage.Inc()
}

// ObserveDecision counts a decision the ledger made (not a replay).
func (m *Series) ObserveDecision(decision string) {
	m.decisions.WithLabelValues(decision).Inc()
}

// PolicyReload counts a policy reload, put in force (or unchanged) or
// refused.
func (m *Series) PolicyReload(ok bool) {
	if ok {
		m.reloadsOK.Inc()
	} else {
		m.reloadsFailed.Inc()
	}
}

// ConfigReload counts a config reload (SIGHUP): credentials put in force,
// or a config refused.
func (m *Series) ConfigReload(ok bool) {
	if ok {
		m.configReloadsOK.Inc()
	} else {
		m.configReloadsBad.Inc()
	}
}

// SetPolicySet names the policy set in force (ledgerd_policy_set_info).
func (m *Series) SetPolicySet(digest string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.policySet = digest
}

// ServeHTTP serves the exposition (GET /metrics).
func (m *Series) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.handler.ServeHTTP(w, r)
}

// SetLog names the sources of the tree's size and the checkpoint's age
// (ledgerd_tree_size, ledgerd_checkpoint_age_seconds), read at each
// scrape. package server's New sets its ledger's, but for a cluster's,
// whose series follow the instance's role.
func (m *Series) SetLog(size func() uint64, checkpointTime func() time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.treeSize, m.checkpointTime = size, checkpointTime
}

// SetWitnesses names the source of the witnesses' series, read at each
// scrape: package server's New sets its witnesses', but for a
// cluster's.
func (m *Series) SetWitnesses(snapshot func() witness.Snapshot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.witnesses = snapshot
}

// SetConnections names the source of the connections' series
// (ledgerd_connections_*), read at each scrape: the listener's
// (connlimit.Listener.Stats).
func (m *Series) SetConnections(stats func() (open int, reclaimed, refused uint64)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.connections = stats
}

// MustRegister adds collectors of series of the command's own (a
// cluster's) to the registry; it panics as prometheus.MustRegister does.
func (m *Series) MustRegister(cs ...prometheus.Collector) {
	m.reg.MustRegister(cs...)
}

// scrapeTime collects the series metrics reads from their sources at
// each scrape.
type scrapeTime Series

func (*scrapeTime) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{policySetDesc, treeSizeDesc, connectionsOpenDesc,
		connectionsReclaimedDesc, connectionsRefusedDesc, checkpointAgeDesc} {
		ch <- d
	}
	for _, d := range witnessDescs {
		ch <- d
	}
}

func (s *scrapeTime) Collect(ch chan<- prometheus.Metric) {
	m := (*Series)(s)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.policySet != "" {
		ch <- prometheus.MustNewConstMetric(policySetDesc, prometheus.GaugeValue, 1, m.policySet)
	}
	if m.treeSize != nil {
		ch <- prometheus.MustNewConstMetric(treeSizeDesc, prometheus.GaugeValue, float64(m.treeSize()))
	}
	if m.connections != nil {
		open, reclaimed, refused := m.connections()
		ch <- prometheus.MustNewConstMetric(connectionsOpenDesc, prometheus.GaugeValue, float64(open))
		ch <- prometheus.MustNewConstMetric(connectionsReclaimedDesc, prometheus.CounterValue, float64(reclaimed))
		ch <- prometheus.MustNewConstMetric(connectionsRefusedDesc, prometheus.CounterValue, float64(refused))
	}
	if m.witnesses != nil {
		collectWitnessSnapshot(ch, m.witnesses())
	}
	if m.checkpointTime != nil {
		if t := m.checkpointTime(); !t.IsZero() {
			ch <- prometheus.MustNewConstMetric(checkpointAgeDesc, prometheus.GaugeValue, time.Since(t).Seconds())
		}
	}
}

// The witnesses' series (collectWitnessSnapshot).
var (
	witnessesNeededDesc = prometheus.NewDesc("ledgerd_witnesses_needed",
		"Cosignatures a checkpoint should gather (witnesses_needed).", nil, nil)
	checkpointCosignaturesDesc = prometheus.NewDesc("ledgerd_checkpoint_cosignatures",
		"Valid witness cosignatures held for the latest checkpoint.", nil, nil)
	witnessCosignedSizeDesc = prometheus.NewDesc("ledgerd_witness_cosigned_size",
		"The largest tree size of this log each witness cosigned, as far as ledgerd knows (0 until it cosigns).", []string{"witness"}, nil)
	witnessLagDesc = prometheus.NewDesc("ledgerd_witness_lag_entries",
		"Entries the latest checkpoint has beyond the tree the witness last cosigned.", []string{"witness"}, nil)
	witnessFailuresDesc = prometheus.NewDesc("ledgerd_witness_failures_total",
		"Failed submissions to each witness, by kind.", []string{"witness", "kind"}, nil)
	witnessLastSuccessDesc = prometheus.NewDesc("ledgerd_witness_last_success_timestamp_seconds",
		"When each witness last returned a valid cosignature (Unix time; 0: never since the start).", []string{"witness"}, nil)

	witnessDescs = []*prometheus.Desc{witnessesNeededDesc, checkpointCosignaturesDesc, witnessCosignedSizeDesc,
		witnessLagDesc, witnessFailuresDesc, witnessLastSuccessDesc}
)

// collectWitnessSnapshot sends the witnesses' series of s to ch; nothing
// without witnesses.
func collectWitnessSnapshot(ch chan<- prometheus.Metric, s witness.Snapshot) {
	if len(s.Witnesses) == 0 {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(witnessesNeededDesc, float64(s.Needed))
	gauge(checkpointCosignaturesDesc, float64(s.Held))
	for _, w := range s.Witnesses {
		gauge(witnessCosignedSizeDesc, float64(w.Cosigned), w.Name)
		gauge(witnessLagDesc, float64(w.Lag), w.Name)
	}
	if s.Following {
		// A follower submits nothing: it has no failures nor successes.
		return
	}
	for _, w := range s.Witnesses {
		for _, k := range witness.FailureKinds() {
			ch <- prometheus.MustNewConstMetric(witnessFailuresDesc, prometheus.CounterValue, float64(w.Failures[k]), w.Name, k)
		}
		var t float64
		if !w.LastSuccess.IsZero() {
			t = float64(w.LastSuccess.UnixMilli()) / 1000
		}
		gauge(witnessLastSuccessDesc, t, w.Name)
	}
}
