// Package referencecalls is the reference decision table: calls of the
// five reference actions (testdata/declarations) with the decision and
// determining policy ids the reference policies (testdata/policies) must
// give, written by hand from reading the policies, never computed. Tests
// at every layer run it: package policy (Decide), ledgerd (decide over
// HTTP, export, replay) and the README's walkthrough.
package referencecalls

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
)

// Call is one row of the table: a call's raw parameters and what the
// reference policies decide for it.
type Call struct {
	Name      string
	Principal string
	Action    string
	Params    map[string]any
	Decision  entry.Decision
	// Determining are the determining policy ids, sorted.
	Determining []string
}

// Allowlists are the allowlists the table's calls are minimized with:
// make_payment's payee_known is true for these payees.
var Allowlists = map[string]map[string]bool{
	"payees": {"payee-0001": true, "payee-0002": true},
}

// Blocked is the attachment hash email.deny-blocked-attachment refuses
// (the SHA-256 of nothing).
const Blocked = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// Pay, Mail, HTTP, Read and Upload build the raw parameters of the five
// reference actions.
func Pay(amount int64, currency, payee string) map[string]any {
	return map[string]any{"amount_minor": amount, "currency": currency, "payee": payee}
}

func Mail(to string, bodyBytes int, attachments ...string) map[string]any {
	p := map[string]any{"recipient": to, "subject": "Quarterly figures", "body": strings.Repeat("x", bodyBytes)}
	if attachments != nil {
		p["attachment_hashes"] = attachments
	}
	return p
}

func HTTP(method, url string, body ...int) map[string]any {
	p := map[string]any{"method": method, "url": url}
	if body != nil {
		p["body"] = strings.Repeat("b", body[0])
	}
	return p
}

func Read(path, purpose string) map[string]any {
	return map[string]any{"resource_path": path, "purpose": purpose}
}

func Upload(dest, local string, size int64, contentType string, labels ...string) map[string]any {
	p := map[string]any{"destination_url": dest, "local_path": local, "size_bytes": size, "content_type": contentType, "content": "JVBERi0xLjQK"}
	if labels != nil {
		p["labels"] = labels
	}
	return p
}

// Table returns the reference decision table, 45 calls.
func Table() []Call {
	const (
		allow    = entry.Allow
		deny     = entry.Deny
		approval = entry.NeedsApproval
	)
	none := []string{}
	pay, mail, httpReq, read, upload, blocked := Pay, Mail, HTTP, Read, Upload, Blocked
	return []Call{
		// make_payment
		{"small payment to a known payee", "agent-1", "make_payment", pay(5000, "EUR", "payee-0001"), allow, []string{"payments.allow-known-payee"}},
		{"one minor unit", "agent-1", "make_payment", pay(1, "USD", "payee-0002"), allow, []string{"payments.allow-known-payee"}},
		{"exactly the threshold", "agent-1", "make_payment", pay(100000, "USD", "payee-0001"), allow, []string{"payments.allow-known-payee"}},
		{"one above the threshold", "agent-1", "make_payment", pay(100001, "EUR", "payee-0001"), approval, []string{"payments.approval-above-threshold"}},
		{"large payment with a memo", "agent-1", "make_payment", map[string]any{"amount_minor": 2500000, "currency": "EUR", "payee": "payee-0002", "memo": "Invoice 4711"}, approval, []string{"payments.approval-above-threshold"}},
		{"unknown payee", "agent-1", "make_payment", pay(5000, "EUR", "payee-9999"), deny, []string{"payments.deny-unknown-payee"}},
		{"unknown payee above the threshold", "agent-1", "make_payment", pay(500000, "EUR", "payee-9999"), deny, []string{"payments.deny-unknown-payee"}},
		{"currency not allowed", "agent-1", "make_payment", pay(5000, "GBP", "payee-0001"), deny, none},
		{"zero amount", "agent-1", "make_payment", pay(0, "EUR", "payee-0001"), deny, []string{"payments.deny-non-positive"}},
		{"negative amount to an unknown payee", "agent-1", "make_payment", pay(-5, "EUR", "payee-9999"), deny, []string{"payments.deny-non-positive", "payments.deny-unknown-payee"}},

		// send_email
		{"mail inside the organisation", "agent-1", "send_email", mail("bob@example.com", 120), allow, []string{"email.allow-internal"}},
		{"mail to the mail subdomain", "agent-1", "send_email", mail("team@mail.example.com", 120), allow, []string{"email.allow-internal"}},
		{"mail to another domain", "agent-1", "send_email", mail("carol@example.org", 120), approval, []string{"email.approval-external"}},
		{"mail to an unlisted subdomain", "agent-1", "send_email", mail("dave@sales.example.com", 120), approval, []string{"email.approval-external"}},
		{"internal mail with a large body", "agent-1", "send_email", mail("bob@example.com", 1048577), deny, []string{"email.deny-large-body"}},
		{"external mail with a body at the limit", "agent-1", "send_email", mail("carol@example.org", 1048576), approval, []string{"email.approval-external"}},
		{"internal mail with a blocked attachment", "agent-1", "send_email", mail("bob@example.com", 10, blocked), deny, []string{"email.deny-blocked-attachment"}},
		{"internal mail with other attachments", "agent-1", "send_email", mail("bob@example.com", 10, "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"), allow, []string{"email.allow-internal"}},
		{"external mail, blocked attachment, large body", "agent-1", "send_email", mail("carol@example.org", 2000000, "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", blocked), deny, []string{"email.deny-blocked-attachment", "email.deny-large-body"}},
		{"internal mail with an empty attachment list", "agent-1", "send_email", mail("bob@example.com", 0, []string{}...), allow, []string{"email.allow-internal"}},

		// http_request
		{"GET an invoice list", "agent-1", "http_request", httpReq("GET", "https://api.example.com/v1/invoices"), allow, []string{"http.allow-api-hosts"}},
		{"POST to billing", "agent-1", "http_request", httpReq("POST", "https://billing.example.org/v1/invoices/inv-88231"), allow, []string{"http.allow-api-hosts"}},
		{"host in capitals with a port and query", "agent-1", "http_request", httpReq("GET", "https://API.EXAMPLE.COM:8443/v1/invoices?page=2"), allow, []string{"http.allow-api-hosts"}},
		{"DELETE on an allowed host", "agent-1", "http_request", httpReq("DELETE", "https://api.example.com/v1/invoices/inv-88231"), deny, none},
		{"host outside the allowlist", "agent-1", "http_request", httpReq("GET", "https://www.example.net/v1/invoices"), deny, []string{"http.deny-other-hosts"}},
		{"undeclared route", "agent-1", "http_request", httpReq("GET", "https://api.example.com/admin/users"), deny, []string{"http.deny-unmatched-route"}},
		{"other host and undeclared route", "agent-1", "http_request", httpReq("GET", "http://www.example.net/"), deny, []string{"http.deny-other-hosts", "http.deny-unmatched-route"}},
		{"POST an order with a small body", "agent-1", "http_request", httpReq("POST", "https://api.example.com/v1/customers/c-17/orders", 300), allow, []string{"http.allow-api-hosts"}},
		{"POST with a large body", "agent-1", "http_request", httpReq("POST", "https://api.example.com/v1/invoices", 65537), deny, []string{"http.deny-large-body"}},

		// read_record
		{"a report in a subdirectory", "agent-1", "read_record", read("/records/reports/2026/q3.pdf", "audit"), allow, []string{"records.allow-reports"}},
		{"a report at the top", "agent-1", "read_record", read("/records/reports/summary.pdf", "audit"), allow, []string{"records.allow-reports"}},
		{"a public record", "agent-1", "read_record", read("/records/public/handbook.pdf", "onboarding"), allow, []string{"records.allow-reports"}},
		{"a patient record for treatment", "agent-1", "read_record", read("/records/patients/2026/patient-0001.json", "treatment"), approval, []string{"records.approval-patients"}},
		{"a patient record for billing", "agent-1", "read_record", read("/records/patients/patient-0001.json", "billing"), deny, none},
		{"an HR record", "agent-1", "read_record", read("/records/hr/contract.pdf", "audit"), deny, none},
		{"a look-alike directory", "agent-1", "read_record", read("/records/reportsX/a.pdf", "audit"), deny, none},
		{"the intake agent reads a report", "intake-agent", "read_record", read("/records/reports/summary.pdf", "audit"), deny, []string{"records.deny-intake-agent"}},

		// upload_file
		{"a small PDF", "agent-1", "upload_file", upload("https://files.example.com/in", "/home/agent/out/report.pdf", 2000, "application/pdf"), allow, []string{"upload.allow-small-pdf"}},
		{"a small PDF with three labels", "agent-1", "upload_file", upload("https://files.example.com/in", "/home/agent/out/report.pdf", 2000, "application/pdf", "a", "b", "c"), allow, []string{"upload.allow-small-pdf"}},
		{"a small PDF with five labels", "agent-1", "upload_file", upload("https://files.example.com/in", "/home/agent/out/report.pdf", 2000, "application/pdf", "a", "b", "c", "d", "e"), approval, []string{"upload.approval-many-labels"}},
		{"text with four labels", "agent-1", "upload_file", upload("https://files.example.com/in", "/home/agent/out/notes.txt", 10, "text/plain", "a", "b", "c", "d"), approval, []string{"upload.approval-many-labels"}},
		{"a PDF above 10 MiB", "agent-1", "upload_file", upload("https://files.example.com/in", "/home/agent/out/big.pdf", 10485761, "application/pdf"), deny, none},
		{"a file from /etc", "agent-1", "upload_file", upload("https://files.example.com/in", "/etc/passwd", 2000, "application/pdf"), deny, []string{"upload.deny-system-dirs"}},
		{"a file from /secrets with labels", "agent-1", "upload_file", upload("https://files.example.com/in", "/secrets/keys/k.pem", 2000, "application/pdf", "a", "b", "c", "d", "e"), deny, []string{"upload.deny-system-dirs"}},
		{"another destination", "agent-1", "upload_file", upload("https://uploads.example.org/in", "/home/agent/out/report.pdf", 2000, "application/pdf"), deny, none},
	}
}

// Declarations reads the reference declarations from dir
// (testdata/declarations).
func Declarations(dir string) ([]*declare.Declaration, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no declarations in %s", dir)
	}
	var decls []*declare.Declaration
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		d, err := declare.Parse(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		decls = append(decls, d)
	}
	return decls, nil
}

// Minimize turns a call's raw parameters into what a mediator sends: the
// minimization of its action's declaration in decls (the parameter
// commitment, the attributes and the applied-tiers digest), with
// Allowlists.
func Minimize(decls []*declare.Declaration, c Call) (declare.Result, error) {
	raw, err := json.Marshal(c.Params)
	if err != nil {
		return declare.Result{}, err
	}
	for _, d := range decls {
		if d.Action == c.Action {
			return d.Minimize(raw, declare.Options{Allowlists: Allowlists, Domain: commit.Domain{MaxBytes: 4 << 20}})
		}
	}
	return declare.Result{}, fmt.Errorf("no declaration of %s", c.Action)
}
