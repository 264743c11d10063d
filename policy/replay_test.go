package policy_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/policy"
)

// overflowFile is TestFailClosed's: two policies that error on large
// amounts, so that Errored is exercised too.
var overflowFile = policy.File{Name: "overflow.cedar", Bytes: []byte(`@id("payments.overflowing-permit")
permit (principal, action == Action::"make_payment", resource)
when { context.amount_minor * 1000000000000 > 0 };

@id("payments.overflowing-forbid")
forbid (principal, action == Action::"make_payment", resource)
when { context.amount_minor * 1000000000000 < 0 };
`)}

func genString(t *rapid.T, label string, pool ...string) string {
	if rapid.Bool().Draw(t, label+"-pooled") {
		return rapid.SampledFrom(pool).Draw(t, label)
	}
	return rapid.StringMatching(`[a-z0-9./*-]{0,12}`).Draw(t, label)
}

func genInt(t *rapid.T, label string, edges ...int64) int64 {
	switch rapid.IntRange(0, 2).Draw(t, label+"-kind") {
	case 0:
		return rapid.SampledFrom(append(edges, 0, 1, -1, commit.MaxSafeInteger, -commit.MaxSafeInteger)).Draw(t, label)
	case 1:
		return rapid.Int64Range(-3, 3).Draw(t, label)
	}
	return rapid.Int64Range(-commit.MaxSafeInteger, commit.MaxSafeInteger).Draw(t, label)
}

func proj(name string, v any) map[string]any { return map[string]any{name: v} }

// genCall draws a principal, one of the five reference actions and
// minimized attributes that the declarations' schema admits: the declared
// fields with their Cedar types, optional ones present or not, values
// near the reference policies' edges or anything.
func genCall(t *rapid.T) (principal, action string, attrs json.RawMessage) {
	principal = genString(t, "principal", "agent-1", "intake-agent")
	hosts := []string{"api.example.com", "billing.example.org", "files.example.com", "www.example.net", "example.com"}
	dirs := []string{"/records/reports", "/records/reports/2026", "/records/public", "/records/patients/2026", "/records/hr", "/records/reportsX", "/etc", "/secrets/keys", "/home/agent/out"}
	a := map[string]any{}
	action = rapid.SampledFrom([]string{"make_payment", "send_email", "http_request", "read_record", "upload_file"}).Draw(t, "action")
	switch action {
	case "make_payment":
		a["amount_minor"] = genInt(t, "amount", 100000, 100001, 10000000, 9223372)
		a["currency"] = genString(t, "currency", "EUR", "USD", "GBP")
		a["payee"] = proj("payee_known", rapid.Bool().Draw(t, "payee_known"))
	case "send_email":
		a["recipient"] = proj("recipient_domain", genString(t, "domain", "example.com", "mail.example.com", "example.org", "sales.example.com"))
		a["body"] = proj("byte_size", genInt(t, "body", 1048576, 1048577))
		if rapid.Bool().Draw(t, "has attachments") {
			a["attachment_hashes"] = rapid.SliceOfN(rapid.Custom(func(t *rapid.T) string {
				return genString(t, "hash", blocked, "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
			}), 0, 3).Draw(t, "attachment_hashes")
		}
	case "http_request":
		a["method"] = genString(t, "method", "GET", "POST", "DELETE")
		a["url"] = map[string]any{
			"endpoint_host": genString(t, "host", hosts...),
			"route_shape":   genString(t, "route", "/v1/invoices", "/v1/invoices/{id}", "unmatched"),
		}
		if rapid.Bool().Draw(t, "has body") {
			a["body"] = proj("byte_size", genInt(t, "body", 65536, 65537))
		}
	case "read_record":
		a["resource_path"] = proj("resource_dir", genString(t, "dir", dirs...))
		a["purpose"] = genString(t, "purpose", "treatment", "audit", "billing")
	case "upload_file":
		a["destination_url"] = proj("endpoint_host", genString(t, "host", hosts...))
		a["local_path"] = proj("resource_dir", genString(t, "dir", dirs...))
		a["size_bytes"] = genInt(t, "size", 10485760, 10485761)
		a["content_type"] = genString(t, "content_type", "application/pdf", "text/plain")
		if rapid.Bool().Draw(t, "has labels") {
			a["labels"] = proj("count", genInt(t, "labels", 3, 4))
		}
	}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return principal, action, b
}

// For every request the validated set admits, a replay set over the same
// files returns the same Result, field by field: the reference set, and
// the reference set with policies that error.
func TestReplayMatchesValidated(t *testing.T) {
	decls := declarations(t)
	ref := reference(t).Files()
	for name, files := range map[string][]policy.File{
		"reference":          ref,
		"reference+overflow": append(slices.Clone(ref), overflowFile),
	} {
		t.Run(name, func(t *testing.T) {
			validated, err := policy.New(files, decls)
			if err != nil {
				t.Fatal(err)
			}
			replay, err := policy.NewReplay(files)
			if err != nil {
				t.Fatal(err)
			}
			if replay.Digest() != validated.Digest() {
				t.Errorf("digests differ")
			}
			rapid.Check(t, func(t *rapid.T) {
				principal, action, attrs := genCall(t)
				want := validated.Decide(principal, action, attrs)
				if want.Invalid != nil {
					t.Fatalf("the generator drew a request the schema refuses: %s %s: %v", action, attrs, want.Invalid)
				}
				got := replay.Decide(principal, action, attrs)
				if got.Decision != want.Decision || !slices.Equal(got.Determining, want.Determining) || !slices.Equal(got.Errored, want.Errored) || got.Invalid != nil ||
					(got.Determining == nil) != (want.Determining == nil) || (got.Errored == nil) != (want.Errored == nil) {
					t.Fatalf("%s %s %s:\nreplay    %+v\nvalidated %+v", principal, action, attrs, got, want)
				}
			})
		})
	}
}

// NewReplay refuses what New refuses for the files and annotations, with
// the same LoadError; only the schema is not checked.
func TestReplayRefuses(t *testing.T) {
	decls := declarations(t)
	for _, tc := range []struct {
		name      string
		file      string
		src       string
		sentinel  error
		line, col int
		id        string
	}{
		{"missing @id", "refused.cedar", okPolicy + `@description("no id")
permit (principal, action == Action::"send_email", resource);
`, policy.ErrAnnotation, 4, 1, ""},
		{"repeated @id", "refused.cedar", okPolicy + `@id("ok")
forbid (principal, action == Action::"no_such_action", resource);
`, policy.ErrAnnotation, 4, 1, "ok"},
		{"unknown annotation", "refused.cedar", okPolicy + `@id("p")
@aproval("required")
permit (principal, action == Action::"send_email", resource);
`, policy.ErrAnnotation, 4, 1, "p"},
		{"@approval on a forbid", "refused.cedar", okPolicy + `@id("f")
@approval("required")
forbid (principal, action == Action::"send_email", resource);
`, policy.ErrAnnotation, 4, 1, "f"},
		{"empty @id", "refused.cedar", okPolicy + `@id("")
permit (principal, action == Action::"send_email", resource);
`, policy.ErrAnnotation, 4, 1, ""},
		{"syntax error", "refused.cedar", okPolicy + `@id("p")
permit (principal, action == Action::"send_email", resource)
when { context.body.byte_size > };
`, policy.ErrParse, 6, 34, ""},
		{"bad file name", "refused.txt", okPolicy, policy.ErrLayout, 0, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := []policy.File{{Name: tc.file, Bytes: []byte(tc.src)}}
			_, err := policy.NewReplay(files)
			var le *policy.LoadError
			if !errors.As(err, &le) || !errors.Is(err, tc.sentinel) {
				t.Fatalf("got %v, want a *LoadError, %v", err, tc.sentinel)
			}
			if strings.Trim(le.File, `"`) != tc.file || le.Line != tc.line || le.Column != tc.col || le.ID != tc.id {
				t.Errorf("%v: at %s:%d:%d id %q, want %s:%d:%d id %q", err, le.File, le.Line, le.Column, le.ID, tc.file, tc.line, tc.col, tc.id)
			}
			if _, nerr := policy.New(files, decls); nerr == nil || nerr.Error() != err.Error() {
				t.Errorf("New says %v, NewReplay %v", nerr, err)
			}
		})
	}
}

// A replay set accepts what only the schema refuses, and evaluates what
// only the schema would not admit: the schema gate is ledgerd's, at load.
// The strict-domain refusal of the attributes still applies.
func TestReplayWithoutSchema(t *testing.T) {
	files := []policy.File{{Name: "unvalidated.cedar", Bytes: []byte(`@id("reads-subject")
forbid (principal, action == Action::"send_email", resource)
when { context.subject == "secret-subject" };

@id("delete")
permit (principal, action == Action::"delete_records", resource);
`)}}
	if _, err := policy.New(files, declarations(t)); !errors.Is(err, policy.ErrSchema) {
		t.Fatalf("New: %v, want ErrSchema", err)
	}
	s, err := policy.NewReplay(files)
	if err != nil {
		t.Fatal(err)
	}
	// An undeclared action is evaluated, not refused.
	if got := s.Decide("agent-1", "delete_records", json.RawMessage(`{}`)); got.Decision != entry.Allow || !slices.Equal(got.Determining, []string{"delete"}) || got.Invalid != nil {
		t.Errorf("undeclared action: %+v, want allow by delete", got)
	}
	// A policy naming an undeclared attribute errors: fail closed.
	attrs := json.RawMessage(`{"body":{"byte_size":3},"recipient":{"recipient_domain":"example.com"}}`)
	if got := s.Decide("agent-1", "send_email", attrs); got.Decision != entry.Deny || !slices.Equal(got.Errored, []string{"reads-subject"}) || got.Invalid != nil {
		t.Errorf("undeclared attribute: %+v, want deny, errored reads-subject", got)
	}
	// Attributes outside the strict domain are still refused unevaluated.
	for _, attrs := range []string{`{"amount_minor":null}`, `{"a":1,"a":2}`, `{"a":1.5}`, `[]`} {
		got := s.Decide("agent-1", "delete_records", json.RawMessage(attrs))
		if got.Decision != entry.Deny || got.Invalid == nil || len(got.Determining) != 0 || got.Determining == nil || got.Errored == nil {
			t.Errorf("%s: %+v, want deny with Invalid", attrs, got)
		}
	}
}

// A Set not built by New, Load or NewReplay does not panic: it holds no
// policy and denies.
func TestZeroSet(t *testing.T) {
	var s policy.Set
	got := s.Decide("agent-1", "make_payment", json.RawMessage(`{"amount_minor":1}`))
	if got.Decision != entry.Deny || got.Invalid != nil || got.Determining == nil || len(got.Determining) != 0 || got.Errored == nil {
		t.Errorf("zero set: %+v", got)
	}
	if b := s.Bundle(); string(b) != policy.DomainSeparator {
		t.Errorf("zero set bundle %q", b)
	}
	empty, err := policy.NewReplay(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := empty.Decide("agent-1", "x", json.RawMessage(`{}`)); got.Decision != entry.Deny || got.Invalid != nil {
		t.Errorf("empty replay set: %+v", got)
	}
}
