package apitest

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ParseExposition parses the text exposition format, with the classic
// (not UTF-8) rules for names.
func ParseExposition(t testing.TB, what string, r io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return fams
}

// ClusterFamilies are the families only an instance of a cluster writes.
var ClusterFamilies = []string{"ledgerd_cluster_role", "ledgerd_lease_epoch", "ledgerd_takeovers_total",
	"ledgerd_stepdowns_total", "ledgerd_forwarded_requests_total", "ledgerd_forwarding_failures_total"}

// Scrape parses url's /metrics.
func Scrape(t testing.TB, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics: %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return ParseExposition(t, "/metrics", resp.Body)
}

// CheckFamilies checks that every family of got is one of want's, with
// its type, HELP text, label names and buckets; that got has each of
// want's series whose label values are not "example" (which stands for
// any); and that got has each family named in required.
func CheckFamilies(t testing.TB, want, got map[string]*dto.MetricFamily, required []string) {
	t.Helper()
	for _, name := range required {
		if got[name] == nil {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		g, w := got[name], want[name]
		if w == nil {
			t.Errorf("/metrics has %s, which server/testdata/metrics.txt and docs/api.md lack", name)
			continue
		}
		if g.GetType() != w.GetType() || g.GetHelp() != w.GetHelp() {
			t.Errorf("%s: %s %q, want %s %q", name, g.GetType(), g.GetHelp(), w.GetType(), w.GetHelp())
		}
		for _, m := range g.Metric {
			if labels := names(m.Label); !slices.Equal(labels, LabelNames(w)) {
				t.Errorf("%s{%s}: the labels are {%s}", name, strings.Join(LabelNames(w), ","), strings.Join(labels, ","))
			}
			if w.GetType() == dto.MetricType_HISTOGRAM {
				if b, wb := bounds(m), bounds(w.Metric[0]); !slices.Equal(b, wb) {
					t.Errorf("%s: buckets %v, want %v", name, b, wb)
				}
			}
		}
		for _, wm := range w.Metric {
			if !slices.ContainsFunc(g.Metric, func(m *dto.Metric) bool { return sameSeries(wm, m) }) {
				t.Errorf("/metrics lacks %s%s", name, seriesLabels(wm))
			}
		}
	}
}

// LabelNames are the label names of f's first series, sorted.
func LabelNames(f *dto.MetricFamily) []string { return names(f.Metric[0].Label) }

func names(labels []*dto.LabelPair) []string {
	var n []string
	for _, l := range labels {
		n = append(n, l.GetName())
	}
	slices.Sort(n)
	return n
}

func bounds(m *dto.Metric) []float64 {
	var b []float64
	for _, k := range m.GetHistogram().GetBucket() {
		b = append(b, k.GetUpperBound())
	}
	return b
}

// sameSeries says whether m has want's labels, a value "example" in want
// matching any.
func sameSeries(want, m *dto.Metric) bool {
	if len(want.Label) != len(m.Label) {
		return false
	}
	for _, w := range want.Label {
		if !slices.ContainsFunc(m.Label, func(l *dto.LabelPair) bool {
			return l.GetName() == w.GetName() && (w.GetValue() == "example" || l.GetValue() == w.GetValue())
		}) {
			return false
		}
	}
	return true
}

func seriesLabels(m *dto.Metric) string {
	if len(m.Label) == 0 {
		return ""
	}
	var s []string
	for _, l := range m.Label {
		s = append(s, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	return "{" + strings.Join(s, ",") + "}"
}

// Exposition is the text exposition of the series collect sends, as
// /metrics would write them.
func Exposition(t testing.TB, collect func(chan<- prometheus.Metric)) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(prometheus.CollectorFunc(collect))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}
