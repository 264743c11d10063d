package policy_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/referencecalls"
	"github.com/decisionledger/ledger/policy"
)

// The reference table's helpers, for the tests here.
var (
	allowlists = referencecalls.Allowlists
	pay        = referencecalls.Pay
	mail       = referencecalls.Mail
	httpReq    = referencecalls.HTTP
	read       = referencecalls.Read
	upload     = referencecalls.Upload
)

const blocked = referencecalls.Blocked

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

// The decision table: raw parameters → declare's minimization → Decide
// with the reference policies, against hand-written decisions and
// determining ids.
func TestDecisionTable(t *testing.T) {
	decls := declarations(t)
	s := reference(t)
	table := referencecalls.Table()
	if len(table) < 40 {
		t.Fatalf("the reference table has %d calls", len(table))
	}
	for _, tc := range table {
		t.Run(tc.Name, func(t *testing.T) {
			attrs := minimize(t, decls, call{tc.Principal, tc.Action, tc.Params})
			got := s.Decide(tc.Principal, tc.Action, attrs)
			if got.Decision != tc.Decision || !slices.Equal(got.Determining, tc.Determining) || len(got.Errored) != 0 || got.Invalid != nil {
				t.Errorf("attributes %s:\ngot  %s %v errored %v invalid %v\nwant %s %v", attrs, got.Decision, got.Determining, got.Errored, got.Invalid, tc.Decision, tc.Determining)
			}
			// The server's path: the attributes decoded once, from the
			// request's checked tree.
			obj, err := commit.Domain{}.Object(attrs)
			if err != nil {
				t.Fatal(err)
			}
			if v := s.DecideValue(tc.Principal, tc.Action, obj.Any()); v.Decision != got.Decision || !slices.Equal(v.Determining, got.Determining) || v.Invalid != nil {
				t.Errorf("DecideValue: %s %v invalid %v, Decide: %s %v", v.Decision, v.Determining, v.Invalid, got.Decision, got.Determining)
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
