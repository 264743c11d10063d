package entry

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
)

// approvalEntries returns one signed entry of each version 4 kind, the
// outcome with and without an operation id.
func approvalEntries(t testing.TB) ([]*Entry, ed25519.PrivateKey) {
	t.Helper()
	base, priv := sampleEntry(t)
	id := commit.Digest(sha256.Sum256([]byte("request")))
	mk := func(e Entry) *Entry {
		e.Origin, e.Time, e.Prev = base.Origin, base.Time, base.Prev
		if _, err := e.Sign(base.KeyID, func(m []byte) []byte { return ed25519.Sign(priv, m) }); err != nil {
			t.Fatal(err)
		}
		return &e
	}
	return []*Entry{
		mk(Entry{Kind: KindApprovalConfig, Index: 3, PendingTTL: 24 * time.Hour, ExecutionTTL: time.Hour}),
		mk(Entry{Kind: KindApproval, Index: 9, ApprovalID: id, Request: 7, Approver: "approver:alice", Verdict: Approve,
			PreviewDigest: sha256.Sum256([]byte("preview"))}),
		mk(Entry{Kind: KindConsumption, Index: 10, ApprovalID: id, Request: 7, Mediator: base.Mediator,
			Principal: base.Principal, Action: base.Action, Params: base.Params}),
		mk(Entry{Kind: KindOutcome, Index: 11, ApprovalID: id, Consumption: 10, Mediator: base.Mediator, Result: Succeeded,
			OperationID: "op-7781"}),
		mk(Entry{Kind: KindOutcome, Index: 12, ApprovalID: id, Consumption: 10, Mediator: base.Mediator, Result: Unknown}),
	}, priv
}

// Every version 4 kind round-trips in canonical form, verifies under the
// version 4 separator, and SignedEntry builds Marshal's bytes.
func TestVersion4RoundTrip(t *testing.T) {
	entries, priv := approvalEntries(t)
	want := []string{
		`{"execution_ttl_ms":3600000,"index":3,"key_id":"ledger.example.org/test+01020304","kind":"approval_config","origin":"ledger.example.org/test","pending_ttl_ms":86400000,"prev":"sha256:`,
		`{"approval":"sha256:`,
		`{"action":"send_email","approval":"sha256:`,
		`{"approval":"sha256:`,
		`{"approval":"sha256:`,
	}
	for i, e := range entries {
		b, err := e.Marshal()
		if err != nil {
			t.Fatalf("%s: %v", e.Kind, err)
		}
		if !strings.HasPrefix(string(b), want[i]) || !strings.HasSuffix(string(b), `"version":4}`) {
			t.Errorf("%s: %s", e.Kind, b)
		}
		canonical, err := commit.Canonicalize(b)
		if err != nil || !bytes.Equal(canonical, b) {
			t.Fatalf("%s: not canonical: %v\n%s", e.Kind, err, b)
		}
		got, err := Parse(b)
		if err != nil {
			t.Fatalf("%s: %v\n%s", e.Kind, err, b)
		}
		if err := got.Verify(e.KeyID, priv.Public().(ed25519.PublicKey)); err != nil {
			t.Fatalf("%s: %v", e.Kind, err)
		}
		m, _ := got.SignedMessage()
		if !strings.HasPrefix(string(m), SignedDomainSeparatorV4) {
			t.Errorf("%s: message starts %q", e.Kind, m[:16])
		}
		if again, err := SignedEntry(m, got.Signature); err != nil || !bytes.Equal(again, b) {
			t.Errorf("%s: SignedEntry = %s, %v", e.Kind, again, err)
		}
		if got.ApprovalID != e.ApprovalID || got.Request != e.Request || got.Verdict != e.Verdict || got.Result != e.Result ||
			got.OperationID != e.OperationID || got.PendingTTL != e.PendingTTL || got.Consumption != e.Consumption ||
			!got.Params.Equal(e.Params) || got.Approver != e.Approver {
			t.Errorf("%s: parsed %+v", e.Kind, got)
		}
	}
	if b, _ := entries[4].Marshal(); strings.Contains(string(b), "operation_id") {
		t.Errorf("an outcome without an operation id has the member: %s", b)
	}
}

// Each version 4 member is covered by the signature.
func TestVersion4SignatureBound(t *testing.T) {
	entries, priv := approvalEntries(t)
	pub := priv.Public().(ed25519.PublicKey)
	changes := []func(*Entry){
		func(e *Entry) { e.ExecutionTTL += time.Millisecond },
		func(e *Entry) { e.Verdict = Reject },
		func(e *Entry) { e.Params.Digest[0] ^= 1 },
		func(e *Entry) { e.OperationID = "op-7782" },
		func(e *Entry) { e.Result = Failed },
	}
	for i, e := range entries {
		c := *e
		changes[i](&c)
		if err := c.Verify(e.KeyID, pub); !errors.Is(err, ErrSignature) {
			t.Errorf("%s changed: Verify = %v", e.Kind, err)
		}
	}
}

// Invalid version 4 entries are refused when written and when read,
// naming the member.
func TestVersion4Refused(t *testing.T) {
	entries, _ := approvalEntries(t)
	cfg, appr, cons, out := entries[0], entries[1], entries[2], entries[3]
	for _, tc := range []struct {
		name, field string
		base        *Entry
		change      func(*Entry)
	}{
		{"zero pending ttl", "pending_ttl_ms", cfg, func(e *Entry) { e.PendingTTL = 0 }},
		{"ttl not whole ms", "execution_ttl_ms", cfg, func(e *Entry) { e.ExecutionTTL = time.Microsecond * 1500 }},
		{"ttl beyond a year", "pending_ttl_ms", cfg, func(e *Entry) { e.PendingTTL = MaxTTL + time.Millisecond }},
		{"config with an approver", "approver", cfg, func(e *Entry) { e.Approver = "a" }},
		{"unknown verdict", "verdict", appr, func(e *Entry) { e.Verdict = "maybe" }},
		{"no preview digest", "preview_digest", appr, func(e *Entry) { e.PreviewDigest = commit.Digest{} }},
		{"no approval id", "approval", appr, func(e *Entry) { e.ApprovalID = commit.Digest{} }},
		{"request not earlier", "request", appr, func(e *Entry) { e.Request = e.Index }},
		{"approver with a control character", "approver", appr, func(e *Entry) { e.Approver = "alice\x1b[2J" }},
		{"approval with a decision", "decision", appr, func(e *Entry) { e.Decision = Allow }},
		{"consumption with attributes", "attributes", cons, func(e *Entry) { e.Attributes = []byte(`{}`) }},
		{"consumption without principal", "principal", cons, func(e *Entry) { e.Principal = "" }},
		{"consumption with a verdict", "verdict", cons, func(e *Entry) { e.Verdict = Approve }},
		{"unknown result", "result", out, func(e *Entry) { e.Result = "done" }},
		{"consumption not earlier", "consumption", out, func(e *Entry) { e.Consumption = e.Index }},
		{"outcome with a request", "request", out, func(e *Entry) { e.Request = 3 }},
		{"approval member in a decision", "kind", func() *Entry { e, _ := sampleEntry(t); return e }(), func(e *Entry) { e.Approver = "a" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := *tc.base
			tc.change(&e)
			_, err := e.Marshal()
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("Marshal = %v, want a FieldError on %q", err, tc.field)
			}
		})
	}
	ab, _ := appr.Marshal()
	cb, _ := cons.Marshal()
	as, cs := string(ab), string(cb)
	for _, tc := range []struct{ name, text, field string }{
		{"approval as version 3", strings.Replace(as, `"version":4}`, `"version":3}`, 1), "kind"},
		{"decision as version 4", strings.Replace(string(must(ledgerDecision(t))), `"version":3}`, `"version":4}`, 1), "kind"},
		{"approval without verdict", strings.Replace(as, `,"verdict":"approve"`, ``, 1), "verdict"},
		{"consumption with operation_id", strings.Replace(cs, `"action":`, `"operation_id":"x","action":`, 1), ""},
		{"approval with an unknown member", strings.Replace(as, `{"approval"`, `{"aaa":1,"approval"`, 1), "aaa"},
	} {
		t.Run("parse "+tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.text))
			var fe *FieldError
			if tc.field == "" {
				if err == nil {
					t.Error("accepted")
				}
				return
			}
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("Parse = %v, want a FieldError on %q", err, tc.field)
			}
		})
	}
}

func must(e *Entry, _ ed25519.PrivateKey) []byte {
	b, err := e.Marshal()
	if err != nil {
		panic(err)
	}
	return b
}
