package mcpgate

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Metrics are the gateway's counters in the Prometheus text format,
// written by hand as ledgerd's are: a handful of series do not justify a
// client library. Label values are tool names (declared identifiers),
// decisions, results and refusal reasons: never argument values.
type Metrics struct {
	mu          sync.Mutex
	decisions   map[string]uint64 // by decision
	outcomes    map[string]uint64 // by result
	refused     map[string]uint64 // by reason
	pinMismatch map[string]uint64 // by tool
	forwardSum  float64
	forwardN    uint64
}

func newMetrics() *Metrics {
	return &Metrics{decisions: map[string]uint64{}, outcomes: map[string]uint64{}, refused: map[string]uint64{},
		pinMismatch: map[string]uint64{}}
}

func (m *Metrics) add(series *map[string]uint64, label string) {
	m.mu.Lock()
	(*series)[label]++
	m.mu.Unlock()
}

func (m *Metrics) observeForward(d time.Duration) {
	m.mu.Lock()
	m.forwardSum += d.Seconds()
	m.forwardN++
	m.mu.Unlock()
}

// Refused reports the refusals counted for reason.
func (m *Metrics) Refused(reason string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused[reason]
}

// WriteTo writes the exposition.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	p := func(format string, args ...any) {
		k, _ := fmt.Fprintf(w, format, args...)
		n += int64(k)
	}
	series := func(name, help, label string, values map[string]uint64) {
		p("# HELP %s %s\n# TYPE %s counter\n", name, help, name)
		for _, k := range slices.Sorted(maps.Keys(values)) {
			p("%s{%s=%q} %d\n", name, label, k, values[k])
		}
	}
	series("ledger_mcp_decisions_total", "Decisions the ledger made on calls, by decision.", "decision", m.decisions)
	series("ledger_mcp_outcomes_total", "Forwarded calls, by the outcome recorded.", "result", m.outcomes)
	series("ledger_mcp_refused_total", "Calls not forwarded, by reason.", "reason", m.refused)
	series("ledger_mcp_pin_mismatch_total", "Times a tool's definition was found not to match its pin, by tool.", "tool", m.pinMismatch)
	p("# HELP ledger_mcp_forward_seconds Time spent in forwarded calls.\n# TYPE ledger_mcp_forward_seconds summary\n")
	p("ledger_mcp_forward_seconds_sum %g\nledger_mcp_forward_seconds_count %d\n", m.forwardSum, m.forwardN)
	return n, nil
}

// ServeHTTP serves the exposition.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	m.WriteTo(w)
}
