package mcpgate

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetricsExposition: after a few counted calls, the gateway's
// /metrics, served over HTTP, holds exactly the families and series of
// testdata/metrics.txt (the hand-written exposition's, with the same
// calls): names, types, HELP texts, labels and values. WriteTo writes
// the same, Refused reads a count without adding a series, and
// docs/mcp.md's table names the same families with their labels.
func TestMetricsExposition(t *testing.T) {
	m := newMetrics()
	m.add(m.decisions, "allow")
	m.add(m.decisions, "needs_approval")
	m.add(m.outcomes, "success")
	m.add(m.refused, "undeclared")
	m.add(m.refused, "undeclared")
	m.add(m.refused, "pin_mismatch")
	m.add(m.pinMismatch, "notes.write_note")
	m.observeForward(250 * time.Millisecond)
	m.observeForward(500 * time.Millisecond)
	if got := m.Refused("undeclared"); got != 2 {
		t.Errorf("Refused(undeclared) = %d, want 2", got)
	}
	if got := m.Refused("ledger"); got != 0 {
		t.Errorf("Refused(ledger) = %d, want 0", got)
	}

	srv := httptest.NewServer(m)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics: %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	golden, err := os.ReadFile("testdata/metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := canonical(t, "testdata/metrics.txt", string(golden))
	if got := canonical(t, "/metrics", string(body)); got != want {
		t.Errorf("/metrics:\n%s\nwant\n%s", got, want)
	}
	var b strings.Builder
	if _, err := m.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if got := canonical(t, "WriteTo", b.String()); got != want {
		t.Errorf("WriteTo:\n%s\nwant\n%s", got, want)
	}

	doc, err := os.ReadFile("../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	for _, r := range regexp.MustCompile("(?m)^\\| `(ledger_mcp_[a-z_]+)(?:\\{([a-z_,]+)\\})?` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented[r[1]] = r[2]
	}
	fams := parse(t, "testdata/metrics.txt", string(golden))
	for name, f := range fams {
		var labels []string
		for _, l := range f.Metric[0].Label {
			labels = append(labels, l.GetName())
		}
		if l, ok := documented[name]; !ok || l != strings.Join(labels, ",") {
			t.Errorf("docs/mcp.md's metrics table: %s{%s}, want {%s}", name, l, strings.Join(labels, ","))
		}
	}
	for name := range documented {
		if fams[name] == nil {
			t.Errorf("docs/mcp.md names %s, which testdata/metrics.txt lacks", name)
		}
	}
}

// parse parses the text exposition format, with the classic (not UTF-8)
// rules for names.
func parse(t *testing.T, what, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return fams
}

// canonical is text parsed and written again, its families in name order.
func canonical(t *testing.T, what, text string) string {
	t.Helper()
	fams := parse(t, what, text)
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(fams)) {
		if _, err := expfmt.MetricFamilyToText(&b, fams[name]); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}
