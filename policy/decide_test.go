package policy_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/policy"
)

var allowlists = map[string]map[string]bool{
	"payees": {"payee-0001": true, "payee-0002": true},
}

const blocked = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

type call struct {
	principal string
	action    string
	params    map[string]any
}

// minimize turns a call's raw parameters into the attributes an entry
// records, as the workload does.
func minimize(t *testing.T, decls []*declare.Declaration, c call) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(c.params)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range decls {
		if d.Action == c.action {
			r, err := d.Minimize(raw, declare.Options{Allowlists: allowlists, Domain: commit.Domain{MaxBytes: 4 << 20}})
			if err != nil {
				t.Fatalf("minimize: %v", err)
			}
			return r.Attributes
		}
	}
	t.Fatalf("no declaration of %s", c.action)
	return nil
}

func pay(amount int64, currency, payee string) map[string]any {
	return map[string]any{"amount_minor": amount, "currency": currency, "payee": payee}
}

func mail(to string, bodyBytes int, attachments ...string) map[string]any {
	p := map[string]any{"recipient": to, "subject": "Quarterly figures", "body": strings.Repeat("x", bodyBytes)}
	if attachments != nil {
		p["attachment_hashes"] = attachments
	}
	return p
}

func httpReq(method, url string, body ...int) map[string]any {
	p := map[string]any{"method": method, "url": url}
	if body != nil {
		p["body"] = strings.Repeat("b", body[0])
	}
	return p
}

func read(path, purpose string) map[string]any {
	return map[string]any{"resource_path": path, "purpose": purpose}
}

func upload(dest, local string, size int64, contentType string, labels ...string) map[string]any {
	p := map[string]any{"destination_url": dest, "local_path": local, "size_bytes": size, "content_type": contentType, "content": "JVBERi0xLjQK"}
	if labels != nil {
		p["labels"] = labels
	}
	return p
}

// The decision table: raw parameters → declare's minimization → Decide
// with the reference policies, against hand-written decisions and
// determining ids.
func TestDecisionTable(t *testing.T) {
	decls := declarations(t)
	s := reference(t)
	const (
		allow    = entry.Allow
		deny     = entry.Deny
		approval = entry.NeedsApproval
	)
	none := []string{}
	for _, tc := range []struct {
		name        string
		call        call
		decision    entry.Decision
		determining []string
	}{
		// make_payment
		{"small payment to a known payee", call{"agent-1", "make_payment", pay(5000, "EUR", "payee-0001")}, allow, []string{"payments.allow-known-payee"}},
		{"one minor unit", call{"agent-1", "make_payment", pay(1, "USD", "payee-0002")}, allow, []string{"payments.allow-known-payee"}},
		{"exactly the threshold", call{"agent-1", "make_payment", pay(100000, "USD", "payee-0001")}, allow, []string{"payments.allow-known-payee"}},
		{"one above the threshold", call{"agent-1", "make_payment", pay(100001, "EUR", "payee-0001")}, approval, []string{"payments.approval-above-threshold"}},
		{"large payment with a memo", call{"agent-1", "make_payment", map[string]any{"amount_minor": 2500000, "currency": "EUR", "payee": "payee-0002", "memo": "Invoice 4711"}}, approval, []string{"payments.approval-above-threshold"}},
		{"unknown payee", call{"agent-1", "make_payment", pay(5000, "EUR", "payee-9999")}, deny, []string{"payments.deny-unknown-payee"}},
		{"unknown payee above the threshold", call{"agent-1", "make_payment", pay(500000, "EUR", "payee-9999")}, deny, []string{"payments.deny-unknown-payee"}},
		{"currency not allowed", call{"agent-1", "make_payment", pay(5000, "GBP", "payee-0001")}, deny, none},
		{"zero amount", call{"agent-1", "make_payment", pay(0, "EUR", "payee-0001")}, deny, []string{"payments.deny-non-positive"}},
		{"negative amount to an unknown payee", call{"agent-1", "make_payment", pay(-5, "EUR", "payee-9999")}, deny, []string{"payments.deny-non-positive", "payments.deny-unknown-payee"}},

		// send_email
		{"mail inside the organisation", call{"agent-1", "send_email", mail("bob@example.com", 120)}, allow, []string{"email.allow-internal"}},
		{"mail to the mail subdomain", call{"agent-1", "send_email", mail("team@mail.example.com", 120)}, allow, []string{"email.allow-internal"}},
		{"mail to another domain", call{"agent-1", "send_email", mail("carol@example.org", 120)}, approval, []string{"email.approval-external"}},
		{"mail to an unlisted subdomain", call{"agent-1", "send_email", mail("dave@sales.example.com", 120)}, approval, []string{"email.approval-external"}},
		{"internal mail with a large body", call{"agent-1", "send_email", mail("bob@example.com", 1048577)}, deny, []string{"email.deny-large-body"}},
		{"external mail with a body at the limit", call{"agent-1", "send_email", mail("carol@example.org", 1048576)}, approval, []string{"email.approval-external"}},
		{"internal mail with a blocked attachment", call{"agent-1", "send_email", mail("bob@example.com", 10, blocked)}, deny, []string{"email.deny-blocked-attachment"}},
		{"internal mail with other attachments", call{"agent-1", "send_email", mail("bob@example.com", 10, "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")}, allow, []string{"email.allow-internal"}},
		{"external mail, blocked attachment, large body", call{"agent-1", "send_email", mail("carol@example.org", 2000000, "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", blocked)}, deny, []string{"email.deny-blocked-attachment", "email.deny-large-body"}},
		{"internal mail with an empty attachment list", call{"agent-1", "send_email", mail("bob@example.com", 0, []string{}...)}, allow, []string{"email.allow-internal"}},

		// http_request
		{"GET an invoice list", call{"agent-1", "http_request", httpReq("GET", "https://api.example.com/v1/invoices")}, allow, []string{"http.allow-api-hosts"}},
		{"POST to billing", call{"agent-1", "http_request", httpReq("POST", "https://billing.example.org/v1/invoices/inv-88231")}, allow, []string{"http.allow-api-hosts"}},
		{"host in capitals with a port and query", call{"agent-1", "http_request", httpReq("GET", "https://API.EXAMPLE.COM:8443/v1/invoices?page=2")}, allow, []string{"http.allow-api-hosts"}},
		{"DELETE on an allowed host", call{"agent-1", "http_request", httpReq("DELETE", "https://api.example.com/v1/invoices/inv-88231")}, deny, none},
		{"host outside the allowlist", call{"agent-1", "http_request", httpReq("GET", "https://www.example.net/v1/invoices")}, deny, []string{"http.deny-other-hosts"}},
		{"undeclared route", call{"agent-1", "http_request", httpReq("GET", "https://api.example.com/admin/users")}, deny, []string{"http.deny-unmatched-route"}},
		{"other host and undeclared route", call{"agent-1", "http_request", httpReq("GET", "http://www.example.net/")}, deny, []string{"http.deny-other-hosts", "http.deny-unmatched-route"}},
		{"POST an order with a small body", call{"agent-1", "http_request", httpReq("POST", "https://api.example.com/v1/customers/c-17/orders", 300)}, allow, []string{"http.allow-api-hosts"}},
		{"POST with a large body", call{"agent-1", "http_request", httpReq("POST", "https://api.example.com/v1/invoices", 65537)}, deny, []string{"http.deny-large-body"}},

		// read_record
		{"a report in a subdirectory", call{"agent-1", "read_record", read("/records/reports/2026/q3.pdf", "audit")}, allow, []string{"records.allow-reports"}},
		{"a report at the top", call{"agent-1", "read_record", read("/records/reports/summary.pdf", "audit")}, allow, []string{"records.allow-reports"}},
		{"a public record", call{"agent-1", "read_record", read("/records/public/handbook.pdf", "onboarding")}, allow, []string{"records.allow-reports"}},
		{"a patient record for treatment", call{"agent-1", "read_record", read("/records/patients/2026/patient-0001.json", "treatment")}, approval, []string{"records.approval-patients"}},
		{"a patient record for billing", call{"agent-1", "read_record", read("/records/patients/patient-0001.json", "billing")}, deny, none},
		{"an HR record", call{"agent-1", "read_record", read("/records/hr/contract.pdf", "audit")}, deny, none},
		{"a look-alike directory", call{"agent-1", "read_record", read("/records/reportsX/a.pdf", "audit")}, deny, none},
		{"the intake agent reads a report", call{"intake-agent", "read_record", read("/records/reports/summary.pdf", "audit")}, deny, []string{"records.deny-intake-agent"}},

		// upload_file
		{"a small PDF", call{"agent-1", "upload_file", upload("https://files.example.com/in", "/home/agent/out/report.pdf", 2000, "application/pdf")}, allow, []string{"upload.allow-small-pdf"}},
		{"a small PDF with three labels", call{"agent-1", "upload_file", upload("https://files.example.com/in", "/home/agent/out/report.pdf", 2000, "application/pdf", "a", "b", "c")}, allow, []string{"upload.allow-small-pdf"}},
		{"a small PDF with five labels", call{"agent-1", "upload_file", upload("https://files.example.com/in", "/home/agent/out/report.pdf", 2000, "application/pdf", "a", "b", "c", "d", "e")}, approval, []string{"upload.approval-many-labels"}},
		{"text with four labels", call{"agent-1", "upload_file", upload("https://files.example.com/in", "/home/agent/out/notes.txt", 10, "text/plain", "a", "b", "c", "d")}, approval, []string{"upload.approval-many-labels"}},
		{"a PDF above 10 MiB", call{"agent-1", "upload_file", upload("https://files.example.com/in", "/home/agent/out/big.pdf", 10485761, "application/pdf")}, deny, none},
		{"a file from /etc", call{"agent-1", "upload_file", upload("https://files.example.com/in", "/etc/passwd", 2000, "application/pdf")}, deny, []string{"upload.deny-system-dirs"}},
		{"a file from /secrets with labels", call{"agent-1", "upload_file", upload("https://files.example.com/in", "/secrets/keys/k.pem", 2000, "application/pdf", "a", "b", "c", "d", "e")}, deny, []string{"upload.deny-system-dirs"}},
		{"another destination", call{"agent-1", "upload_file", upload("https://uploads.example.org/in", "/home/agent/out/report.pdf", 2000, "application/pdf")}, deny, none},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := minimize(t, decls, tc.call)
			got := s.Decide(tc.call.principal, tc.call.action, attrs)
			if got.Decision != tc.decision || !slices.Equal(got.Determining, tc.determining) || len(got.Errored) != 0 || got.Invalid != nil {
				t.Errorf("attributes %s:\ngot  %s %v errored %v invalid %v\nwant %s %v", attrs, got.Decision, got.Determining, got.Errored, got.Invalid, tc.decision, tc.determining)
			}
		})
	}
}

// An evaluation error fails closed: deny, with the erroring ids in Errored
// and Determining, although a permit matches (Cedar alone would allow).
func TestFailClosed(t *testing.T) {
	decls := declarations(t)
	files := reference(t).Files()
	files = append(files, policy.File{Name: "overflow.cedar", Bytes: []byte(`@id("payments.overflowing-permit")
permit (principal, action == Action::"make_payment", resource)
when { context.amount_minor * 1000000000000 > 0 };

@id("payments.overflowing-forbid")
forbid (principal, action == Action::"make_payment", resource)
when { context.amount_minor * 1000000000000 < 0 };
`)})
	s, err := policy.New(files, decls)
	if err != nil {
		t.Fatal(err)
	}
	// 5000 × 10^12 fits in a Long: no error, both permits match.
	small := minimize(t, decls, call{"agent-1", "make_payment", pay(5000, "EUR", "payee-0001")})
	got := s.Decide("agent-1", "make_payment", small)
	if got.Decision != entry.Allow || !slices.Equal(got.Determining, []string{"payments.allow-known-payee", "payments.overflowing-permit"}) || len(got.Errored) != 0 {
		t.Errorf("no overflow: %+v", got)
	}
	// 10^7 × 10^12 overflows in both overflow policies.
	big := minimize(t, decls, call{"agent-1", "make_payment", pay(10000000, "EUR", "payee-0001")})
	got = s.Decide("agent-1", "make_payment", big)
	wantIDs := []string{"payments.overflowing-forbid", "payments.overflowing-permit"}
	if got.Decision != entry.Deny || !slices.Equal(got.Errored, wantIDs) || !slices.Equal(got.Determining, wantIDs) {
		t.Errorf("overflow: %+v, want deny, errored and determining %v", got, wantIDs)
	}
	// An erroring policy and a matching forbid: both determine.
	unknown := minimize(t, decls, call{"agent-1", "make_payment", pay(10000000, "EUR", "payee-9999")})
	got = s.Decide("agent-1", "make_payment", unknown)
	if want := []string{"payments.deny-unknown-payee", "payments.overflowing-forbid", "payments.overflowing-permit"}; got.Decision != entry.Deny || !slices.Equal(got.Determining, want) || !slices.Equal(got.Errored, wantIDs) {
		t.Errorf("overflow and forbid: %+v, want deny, determining %v", got, want)
	}
}

// A request the schema does not admit is denied without evaluation, with
// a RequestError that names no value.
func TestDecideInvalid(t *testing.T) {
	s := reference(t)
	for name, tc := range map[string]struct{ action, attrs string }{
		"undeclared action":  {"delete_records", `{}`},
		"payload field":      {"send_email", `{"body":{"byte_size":3},"recipient":{"recipient_domain":"example.com"},"subject":"secret-subject"}`},
		"raw derived value":  {"send_email", `{"body":{"byte_size":3},"recipient":"secret-local@example.com"}`},
		"missing field":      {"send_email", `{"recipient":{"recipient_domain":"example.com"}}`},
		"wrong type":         {"make_payment", `{"amount_minor":"100","currency":"EUR","payee":{"payee_known":true}}`},
		"null":               {"make_payment", `{"amount_minor":null,"currency":"EUR","payee":{"payee_known":true}}`},
		"fraction":           {"make_payment", `{"amount_minor":1.5,"currency":"EUR","payee":{"payee_known":true}}`},
		"duplicate key":      {"make_payment", `{"amount_minor":1,"amount_minor":2,"currency":"EUR","payee":{"payee_known":true}}`},
		"not an object":      {"make_payment", `[1]`},
		"not JSON":           {"make_payment", `{`},
		"entity smuggled in": {"make_payment", `{"amount_minor":1,"currency":"EUR","payee":{"__entity":{"type":"Agent","id":"x"}}}`},
	} {
		t.Run(name, func(t *testing.T) {
			got := s.Decide("agent-1", tc.action, json.RawMessage(tc.attrs))
			if got.Decision != entry.Deny || got.Invalid == nil || len(got.Determining) != 0 || len(got.Errored) != 0 {
				t.Fatalf("got %+v, want deny with Invalid", got)
			}
			if msg := got.Invalid.Error(); strings.Contains(msg, "secret") {
				t.Errorf("error names a value: %s", msg)
			}
		})
	}
}

// The same input gives the same decision and the same sorted ids, every
// time: cedar-go's own order is not relied on.
func TestDecideDeterministic(t *testing.T) {
	decls := declarations(t)
	var files []policy.File
	var src strings.Builder
	for _, id := range []string{"m", "c", "x", "a", "q", "b", "z", "k"} {
		src.WriteString(`@id("` + id + `")` + "\npermit (principal, action == Action::\"make_payment\", resource) when { context.amount_minor > 0 };\n")
	}
	files = append(files, policy.File{Name: "many.cedar", Bytes: []byte(src.String())})
	s, err := policy.New(files, decls)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "b", "c", "k", "m", "q", "x", "z"}
	attrs := minimize(t, decls, call{"agent-1", "make_payment", pay(5, "EUR", "payee-0001")})
	for i := range 200 {
		got := s.Decide("agent-1", "make_payment", attrs)
		if got.Decision != entry.Allow || !slices.Equal(got.Determining, want) {
			t.Fatalf("run %d: %+v, want allow %v", i, got, want)
		}
	}
	ref := reference(t)
	attrs = minimize(t, decls, call{"agent-1", "make_payment", pay(-5, "EUR", "payee-9999")})
	for i := range 200 {
		got := ref.Decide("agent-1", "make_payment", attrs)
		if !slices.Equal(got.Determining, []string{"payments.deny-non-positive", "payments.deny-unknown-payee"}) {
			t.Fatalf("run %d: %v", i, got.Determining)
		}
	}
}

// Decide may be called from many goroutines (go test -race).
func TestDecideConcurrent(t *testing.T) {
	decls := declarations(t)
	s := reference(t)
	attrs := minimize(t, decls, call{"agent-1", "make_payment", pay(-5, "EUR", "payee-9999")})
	done := make(chan policy.Result)
	for range 8 {
		go func() { done <- s.Decide("agent-1", "make_payment", attrs) }()
	}
	for range 8 {
		if got := <-done; !slices.Equal(got.Determining, []string{"payments.deny-non-positive", "payments.deny-unknown-payee"}) {
			t.Errorf("got %+v", got)
		}
	}
}

// Whatever the attributes, Decide does not panic, ids are sorted, and a
// request it did not evaluate is denied.
func FuzzDecide(f *testing.F) {
	s := reference(f)
	for _, seed := range []string{
		`{"amount_minor":5000,"currency":"EUR","payee":{"payee_known":true}}`,
		`{"amount_minor":-1,"currency":"EUR","payee":{"payee_known":false}}`,
		`{"body":{"byte_size":3},"recipient":{"recipient_domain":"example.com"},"attachment_hashes":["x","x"]}`,
		`{"method":"GET","url":{"endpoint_host":"api.example.com","route_shape":"unmatched"}}`,
		`{"amount_minor":9007199254740991,"currency":"EUR","payee":{"__extn":{"fn":"ip","arg":"1.2.3.4"}}}`,
		`null`, `{}`, `{"a":{"b":[[[]]]}}`,
	} {
		for _, action := range []string{"make_payment", "send_email", "http_request", "read_record", "upload_file", "x"} {
			f.Add("agent-1", action, seed)
		}
	}
	f.Fuzz(func(t *testing.T, principal, action, attrs string) {
		r := s.Decide(principal, action, json.RawMessage(attrs))
		if !slices.IsSorted(r.Determining) || !slices.IsSorted(r.Errored) {
			t.Fatalf("unsorted ids: %+v", r)
		}
		if r.Invalid != nil && (r.Decision != entry.Deny || len(r.Determining) != 0) {
			t.Fatalf("invalid request not denied: %+v", r)
		}
		if len(r.Errored) > 0 && r.Decision != entry.Deny {
			t.Fatalf("error not failing closed: %+v", r)
		}
	})
}
