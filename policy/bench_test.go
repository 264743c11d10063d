package policy_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/policy"
)

// benchCalls is a mix of calls for the five actions, from the decision
// table: allowed, denied, needing approval.
var benchCalls = []call{
	{"agent-1", "make_payment", pay(5000, "EUR", "payee-0001")},
	{"agent-1", "make_payment", pay(100001, "EUR", "payee-0001")},
	{"agent-1", "make_payment", pay(5000, "EUR", "payee-9999")},
	{"agent-1", "make_payment", pay(-5, "EUR", "payee-9999")},
	{"agent-1", "send_email", mail("bob@example.com", 120)},
	{"agent-1", "send_email", mail("carol@example.org", 120)},
	{"agent-1", "send_email", mail("bob@example.com", 10, blocked)},
	{"agent-1", "http_request", httpReq("GET", "https://api.example.com/v1/invoices")},
	{"agent-1", "http_request", httpReq("GET", "https://www.example.net/v1/invoices")},
	{"agent-1", "http_request", httpReq("POST", "https://api.example.com/v1/customers/c-17/orders", 300)},
	{"agent-1", "read_record", read("/records/reports/2026/q3.pdf", "audit")},
	{"agent-1", "read_record", read("/records/patients/2026/patient-0001.json", "treatment")},
	{"intake-agent", "read_record", read("/records/reports/summary.pdf", "audit")},
	{"agent-1", "upload_file", upload("https://files.example.com/in", "/home/agent/out/report.pdf", 2000, "application/pdf")},
	{"agent-1", "upload_file", upload("https://files.example.com/in", "/home/agent/out/report.pdf", 2000, "application/pdf", "a", "b", "c", "d", "e")},
	{"agent-1", "upload_file", upload("https://files.example.com/in", "/etc/passwd", 2000, "application/pdf")},
}

type benchCall struct {
	principal, action string
	attrs             json.RawMessage
}

// minimizeTB is decide_test.go's minimize for a benchmark.
func minimizeTB(tb testing.TB, decls []*declare.Declaration, c call) benchCall {
	tb.Helper()
	raw, err := json.Marshal(c.params)
	if err != nil {
		tb.Fatal(err)
	}
	for _, d := range decls {
		if d.Action == c.action {
			r, err := d.Minimize(raw, declare.Options{Allowlists: allowlists, Domain: commit.Domain{MaxBytes: 4 << 20}})
			if err != nil {
				tb.Fatalf("minimize: %v", err)
			}
			return benchCall{c.principal, c.action, r.Attributes}
		}
	}
	tb.Fatalf("no declaration of %s", c.action)
	return benchCall{}
}

// generatedFiles returns n policies over the reference declarations, in
// files of 100: permits and forbids on different principals, amounts,
// domains, hosts, directories and label counts, one in ten naming a value
// the benchmark's calls use (so that some permits and forbids match),
// every fifth permit marked @approval("required"). Deterministic.
func generatedFiles(n int) []policy.File {
	var files []policy.File
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			files = append(files, policy.File{Name: fmt.Sprintf("gen-%03d.cedar", len(files)), Bytes: []byte(b.String())})
			b.Reset()
		}
	}
	pick := func(i int, real, synthetic string) string {
		if (i/5)%10 < 2 {
			return real
		}
		return fmt.Sprintf(synthetic, i)
	}
	for i := range n {
		forbid := i%3 == 0
		fmt.Fprintf(&b, "@id(\"gen.%04d\")\n", i)
		effect := "permit"
		if forbid {
			effect = "forbid"
		} else if i%5 == 1 {
			b.WriteString("@approval(\"required\")\n")
		}
		principal := "principal"
		if i%2 == 0 {
			principal = fmt.Sprintf("principal == Agent::\"agent-%d\"", i%7)
		}
		fmt.Fprintf(&b, "%s (%s, ", effect, principal)
		switch {
		case i%5 == 0 && !forbid:
			fmt.Fprintf(&b, "action == Action::\"make_payment\", resource)\nwhen { context.payee.payee_known && [\"EUR\", \"USD\"].contains(context.currency) && context.amount_minor <= %d };\n\n", i*100)
		case i%5 == 0:
			fmt.Fprintf(&b, "action == Action::\"make_payment\", resource)\nwhen { context.amount_minor > %d || context.currency == \"C%d\" };\n\n", 1000000+i*100, i)
		case i%5 == 1 && !forbid:
			fmt.Fprintf(&b, "action == Action::\"send_email\", resource)\nwhen { context.recipient.recipient_domain == %q };\n\n", pick(i, "example.com", "d%d.example.com"))
		case i%5 == 1:
			fmt.Fprintf(&b, "action == Action::\"send_email\", resource)\nwhen { context.body.byte_size > %d || (context has attachment_hashes && context.attachment_hashes.contains(\"sha256:%064d\")) };\n\n", 1<<20+i, i)
		case i%5 == 2 && !forbid:
			fmt.Fprintf(&b, "action == Action::\"http_request\", resource)\nwhen { context.url.endpoint_host == %q && [\"GET\", \"POST\"].contains(context.method) };\n\n", pick(i, "api.example.com", "h%d.example.com"))
		case i%5 == 2:
			fmt.Fprintf(&b, "action == Action::\"http_request\", resource)\nwhen { context.url.endpoint_host == %q || (context has body && context.body.byte_size > %d) };\n\n", pick(i, "www.example.net", "evil%d.example.net"), 65536+i)
		case i%5 == 3 && !forbid:
			fmt.Fprintf(&b, "action == Action::\"read_record\", resource)\nwhen { context.resource_path.resource_dir like %q && context.purpose != \"billing\" };\n\n", pick(i, "/records/reports*", "/records/r%d/*"))
		case i%5 == 3:
			fmt.Fprintf(&b, "action == Action::\"read_record\", resource)\nwhen { context.resource_path.resource_dir like %q };\n\n", pick(i, "/records/hr*", "/records/x%d/*"))
		case !forbid:
			fmt.Fprintf(&b, "action == Action::\"upload_file\", resource)\nwhen { context.destination_url.endpoint_host == %q && context.size_bytes <= %d };\n\n", pick(i, "files.example.com", "f%d.example.com"), 1<<20+i)
		default:
			fmt.Fprintf(&b, "action == Action::\"upload_file\", resource)\nwhen { context has labels && context.labels.count > %d };\n\n", 3+i%7)
		}
		if (i+1)%100 == 0 {
			flush()
		}
	}
	flush()
	return files
}

func BenchmarkDecide(b *testing.B) {
	decls := declarations(b)
	calls := make([]benchCall, len(benchCalls))
	for i, c := range benchCalls {
		calls[i] = minimizeTB(b, decls, c)
	}
	generated, err := policy.New(generatedFiles(1000), decls)
	if err != nil {
		b.Fatal(err)
	}
	if n := len(generated.Policies()); n != 1000 {
		b.Fatalf("%d generated policies", n)
	}
	for _, bc := range []struct {
		name string
		set  *policy.Set
	}{
		{"reference", reference(b)},
		{"generated-1000", generated},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c := calls[i%len(calls)]
				if r := bc.set.Decide(c.principal, c.action, c.attrs); r.Invalid != nil {
					b.Fatal(r.Invalid)
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N), "µs/decision")
		})
	}
	// What the server pays per decide: the attributes arrive decoded from
	// the request's checked tree (commit.Object.Any), shared with the
	// catalog's schema check, so only Cedar's part is here.
	decoded := make([]map[string]any, len(calls))
	for i, c := range calls {
		obj, err := commit.Domain{}.Object(c.attrs)
		if err != nil {
			b.Fatal(err)
		}
		decoded[i] = obj.Any()
	}
	b.Run("reference-decoded", func(b *testing.B) {
		set := reference(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			c := calls[i%len(calls)]
			if r := set.DecideValue(c.principal, c.action, decoded[i%len(calls)]); r.Invalid != nil {
				b.Fatal(r.Invalid)
			}
			i++
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N), "µs/decision")
	})
}

func BenchmarkLoad(b *testing.B) {
	decls := declarations(b)
	files := generatedFiles(1000)
	b.Run("generated-1000", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := policy.New(files, decls); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkParseBundle parses a bundle of about 1 MiB: the generated
// policies, repeated in more files.
func BenchmarkParseBundle(b *testing.B) {
	var files []policy.File
	gen := generatedFiles(1000)
	total := 0
	for total < 1<<20 {
		f := gen[len(files)%len(gen)]
		f.Name = fmt.Sprintf("f%04d.cedar", len(files))
		files = append(files, f)
		total += len(f.Bytes)
	}
	bundle := policy.Bundle(files)
	b.SetBytes(int64(len(bundle)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := policy.ParseBundle(bundle); err != nil {
			b.Fatal(err)
		}
	}
}
