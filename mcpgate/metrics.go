package mcpgate

import (
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// Metrics are the gateway's counters, in a Prometheus registry of its own
// (never the default one: a process may run several gateways) served by
// promhttp. Label values are tool names (declared identifiers),
// decisions, results and refusal reasons: never argument values.
type Metrics struct {
	reg         *prometheus.Registry
	handler     http.Handler
	decisions   *prometheus.CounterVec // by decision
	outcomes    *prometheus.CounterVec // by result
	refused     *prometheus.CounterVec // by reason
	pinMismatch *prometheus.CounterVec // by tool
	forward     prometheus.Summary     // sum and count only
}

func newMetrics() *Metrics {
	counter := func(name, help, label string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
	}
	m := &Metrics{
		reg:         prometheus.NewRegistry(),
		decisions:   counter("ledger_mcp_decisions_total", "Decisions the ledger made on calls, by decision.", "decision"),
		outcomes:    counter("ledger_mcp_outcomes_total", "Forwarded calls, by the outcome recorded.", "result"),
		refused:     counter("ledger_mcp_refused_total", "Calls not forwarded, by reason.", "reason"),
		pinMismatch: counter("ledger_mcp_pin_mismatch_total", "Times a tool's definition was found not to match its pin, by tool.", "tool"),
		forward: prometheus.NewSummary(prometheus.SummaryOpts{Name: "ledger_mcp_forward_seconds",
			Help: "Time spent in forwarded calls."}),
	}
	m.reg.MustRegister(m.decisions, m.outcomes, m.refused, m.pinMismatch, m.forward)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

func (m *Metrics) add(series *prometheus.CounterVec, label string) {
	series.WithLabelValues(label).Inc()
}

func (m *Metrics) observeForward(d time.Duration) {
	m.forward.Observe(d.Seconds())
}

// Refused reports the refusals counted for reason.
func (m *Metrics) Refused(reason string) uint64 {
	families, _ := m.reg.Gather()
	for _, f := range families {
		if f.GetName() != "ledger_mcp_refused_total" {
			continue
		}
		for _, s := range f.Metric {
			if s.Label[0].GetValue() == reason {
				return uint64(s.GetCounter().GetValue())
			}
		}
	}
	return 0
}

// WriteTo writes the exposition in the text format.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	families, err := m.reg.Gather()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, f := range families {
		k, err := expfmt.MetricFamilyToText(w, f)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// ServeHTTP serves the exposition.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.handler.ServeHTTP(w, r)
}
