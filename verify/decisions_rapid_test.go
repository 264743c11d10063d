package verify_test

import (
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
	"pgregory.net/rapid"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/internal/referencecalls"
	"github.com/decisionledger/ledger/ledger"
)

// randomCall draws a call of one of the reference actions with declared
// parameters, from values near the reference policies' boundaries.
func randomCall(t *rapid.T) referencecalls.Call {
	principal := rapid.SampledFrom([]string{"agent-1", "intake-agent", "agent-ü"}).Draw(t, "principal")
	host := rapid.SampledFrom([]string{"api.example.com", "billing.example.org", "files.example.com", "evil.example.net"}).Draw(t, "host")
	size := rapid.SampledFrom([]int{0, 1, 65536, 65537, 1048576, 1048577}).Draw(t, "size")
	var action string
	var params map[string]any
	switch rapid.IntRange(0, 4).Draw(t, "action") {
	case 0:
		action = "make_payment"
		amount := rapid.OneOf(rapid.Int64Range(-3, 3), rapid.Int64Range(99998, 100002), rapid.Int64Range(-1<<53+1, 1<<53-1)).Draw(t, "amount")
		params = referencecalls.Pay(amount, rapid.SampledFrom([]string{"EUR", "USD", "GBP", ""}).Draw(t, "currency"),
			rapid.SampledFrom([]string{"payee-0001", "payee-0002", "payee-9999"}).Draw(t, "payee"))
		if rapid.Bool().Draw(t, "memo") {
			// Parameters lie in commit's strict domain, whose strings are
			// NFC and hold no code point whose normalization a later
			// Unicode version may change: any text, normalized, with
			// those code points dropped.
			params["memo"] = strictText(rapid.String().Draw(t, "memo text"))
		}
	case 1:
		action = "send_email"
		to := rapid.SampledFrom([]string{"bob@example.com", "team@mail.example.com", "carol@example.org", "dave@sales.example.com"}).Draw(t, "to")
		params = referencecalls.Mail(to, size)
		if rapid.Bool().Draw(t, "attachments") {
			params["attachment_hashes"] = append([]string{}, rapid.SliceOfN(rapid.SampledFrom([]string{referencecalls.Blocked,
				"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}), 0, 3).Draw(t, "hashes")...)
		}
	case 2:
		action = "http_request"
		path := rapid.SampledFrom([]string{"/v1/invoices/17", "/v1/customers", "/", "/admin/x?y=1"}).Draw(t, "path")
		method := rapid.SampledFrom([]string{"GET", "POST", "DELETE"}).Draw(t, "method")
		if rapid.Bool().Draw(t, "body") {
			params = referencecalls.HTTP(method, "https://"+host+path, size)
		} else {
			params = referencecalls.HTTP(method, "https://"+host+path)
		}
	case 3:
		action = "read_record"
		params = referencecalls.Read(rapid.SampledFrom([]string{"/records/2026/11/a.json", "/patients/7/chart", "/etc/passwd"}).Draw(t, "path"),
			rapid.SampledFrom([]string{"billing", "treatment", "research", ""}).Draw(t, "purpose"))
	default:
		action = "upload_file"
		var labels []string
		if rapid.Bool().Draw(t, "labels") {
			labels = rapid.SliceOfN(rapid.StringMatching(`[a-z]{1,5}`), 0, 6).Draw(t, "label list")
		}
		params = referencecalls.Upload("https://"+host+"/upload",
			rapid.SampledFrom([]string{"/home/a/report.pdf", "/etc/shadow", "/secrets/key", "/tmp/x"}).Draw(t, "local"),
			rapid.Int64Range(0, 20<<20).Draw(t, "bytes"),
			rapid.SampledFrom([]string{"application/pdf", "text/plain"}).Draw(t, "type"), labels...)
	}
	return referencecalls.Call{Principal: principal, Action: action, Params: params}
}

// strictText is s in commit's strict domain: NFC, without the code points
// of unstable normalization (docs/commitment.md §2.4).
func strictText(s string) string {
	var b strings.Builder
	for _, r := range norm.NFC.String(s) {
		if commit.NormalizationStable(string(r)) {
			b.WriteRune(r)
		}
	}
	return norm.NFC.String(b.String())
}

// Decisions made live by the reference set (with its schema), appended,
// exported with the set and replayed offline, all agree.
func TestDecisionsReplayProperty(t *testing.T) {
	_, live, _ := reference(t)
	skey, _, err := ledger.GenerateKey("ledger.example.com/decisions")
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(rt *rapid.T) {
		d := newDecisionLog(t, skey)
		d.publish(live)
		n := rapid.IntRange(1, 8).Draw(rt, "calls")
		for range n {
			c := randomCall(rt)
			if _, err := referencecalls.Minimize(d.decls, c); err != nil {
				rt.Fatalf("minimize %s: %v", c.Action, err)
			}
			d.append(d.record(c, live))
		}
		rep := verifyDecisions(t, d.key, d.export(0, uint64(n+1), true))
		if !rep.OK() || rep.Decisions != uint64(n) || rep.Agreed != uint64(n) || rep.Publications != 1 {
			rt.Fatalf("replay: %+v", rep)
		}
	})
}
