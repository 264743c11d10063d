package main

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// exposition is the text exposition of the series collect sends, as
// /metrics would write them.
func exposition(t *testing.T, collect func(chan<- prometheus.Metric)) string {
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

// parseExposition parses the text exposition format, with the classic
// (not UTF-8) rules for names.
func parseExposition(t *testing.T, what string, r io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return fams
}

// clusterFamilies are the families only an instance of a cluster writes.
var clusterFamilies = []string{"ledgerd_cluster_role", "ledgerd_lease_epoch", "ledgerd_takeovers_total",
	"ledgerd_stepdowns_total", "ledgerd_forwarded_requests_total", "ledgerd_forwarding_failures_total"}

// TestMetricsFamilies: /metrics of a running ledgerd, single or in a
// cluster, writes the families of testdata/metrics.txt (the hand-written
// exposition's, before the Prometheus client library wrote them): each
// with its type, HELP text, label names and buckets, and the series
// always written; nothing else. docs/api.md's GET /metrics row names the
// same families with the same labels.
func TestMetricsFamilies(t *testing.T) {
	f, err := os.Open("testdata/metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := parseExposition(t, "testdata/metrics.txt", f)

	t.Run("docs", func(t *testing.T) {
		b, err := os.ReadFile("../../docs/api.md")
		if err != nil {
			t.Fatal(err)
		}
		var row string
		for line := range strings.Lines(string(b)) {
			if strings.HasPrefix(line, "| `GET /metrics` |") {
				row = line
			}
		}
		documented := map[string][]string{}
		for _, m := range regexp.MustCompile("`(ledgerd_[a-z_]+)(?:\\{([a-z_,]+)\\})?`").FindAllStringSubmatch(row, -1) {
			var labels []string
			if m[2] != "" {
				labels = strings.Split(m[2], ",")
				slices.Sort(labels)
			}
			documented[m[1]] = labels
		}
		for name, fam := range want {
			labels, ok := documented[name]
			if !ok {
				t.Errorf("docs/api.md's GET /metrics row lacks %s", name)
			} else if got := labelNames(fam); !slices.Equal(labels, got) {
				t.Errorf("docs/api.md: %s{%s}, the metric's labels are {%s}", name, strings.Join(labels, ","), strings.Join(got, ","))
			}
		}
		for name := range documented {
			if want[name] == nil {
				t.Errorf("docs/api.md's GET /metrics row names %s, which testdata/metrics.txt lacks", name)
			}
		}
	})

	t.Run("single", func(t *testing.T) {
		s := startServerWith(t, func(c *config.Config) {
			c.CatalogDir, c.PolicyDir = corpusDir, referencePolicies
			addFakeWitnesses(t, c, 1)
			if err := c.Check(); err != nil {
				t.Fatal(err)
			}
		})
		if status, _, b := decideOn(t, s.url, s.token, payment(t)); status != http.StatusCreated {
			t.Fatalf("decide: %d %s", status, b)
		}
		if status, _, _ := decideOn(t, s.url, "", payment(t)); status != http.StatusUnauthorized {
			t.Fatalf("decide without a token: %d", status)
		}
		// The mediator's token becomes its previous one.
		m := s.cfg.Mediators[0]
		m.PreviousTokenSHA256, m.PreviousTokenExpires, m.TokenSHA256 = m.TokenSHA256, time.Now().Add(time.Hour).UTC().Format(time.RFC3339), tokenHash("new-token-example")
		s.srv.creds.apply(withMediators(s.cfg, m))
		if status, _, b := decideOn(t, s.url, s.token, payment(t)); status != http.StatusCreated {
			t.Fatalf("decide with the previous token: %d %s", status, b)
		}
		var required []string
		for name := range want {
			if !slices.Contains(clusterFamilies, name) {
				required = append(required, name)
			}
		}
		checkFamilies(t, want, scrape(t, s.url), required)
	})

	t.Run("cluster", func(t *testing.T) {
		f := newClusterFixture(t)
		a := startServing(t, "--config", f.config(t, "a", "1s"))
		waitFor(t, "a to sequence", func() bool { code, _ := readyz(t, a.url+"/readyz?role=sequencer"); return code == 200 })
		checkFamilies(t, want, scrape(t, a.url), append(clusterFamilies, "ledgerd_tree_size", "ledgerd_checkpoint_age_seconds", "ledgerd_connections_open"))
	})
}

// scrape parses url's /metrics.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics: %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return parseExposition(t, "/metrics", resp.Body)
}

// checkFamilies checks that every family of got is one of want's, with
// its type, HELP text, label names and buckets; that got has each of
// want's series whose label values are not "example" (which stands for
// any); and that got has each family named in required.
func checkFamilies(t *testing.T, want, got map[string]*dto.MetricFamily, required []string) {
	t.Helper()
	for _, name := range required {
		if got[name] == nil {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		g, w := got[name], want[name]
		if w == nil {
			t.Errorf("/metrics has %s, which testdata/metrics.txt and docs/api.md lack", name)
			continue
		}
		if g.GetType() != w.GetType() || g.GetHelp() != w.GetHelp() {
			t.Errorf("%s: %s %q, want %s %q", name, g.GetType(), g.GetHelp(), w.GetType(), w.GetHelp())
		}
		for _, m := range g.Metric {
			if labels := names(m.Label); !slices.Equal(labels, labelNames(w)) {
				t.Errorf("%s{%s}: the labels are {%s}", name, strings.Join(labelNames(w), ","), strings.Join(labels, ","))
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

// labelNames are the label names of f's first series, sorted.
func labelNames(f *dto.MetricFamily) []string { return names(f.Metric[0].Label) }

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
