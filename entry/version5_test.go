package entry

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit"
)

// decisionOutcomes returns signed version 5 outcomes: of the decision at
// index 0 without an operation id, and of the one at 4 with one.
func decisionOutcomes(t testing.TB) ([]*Entry, ed25519.PrivateKey) {
	t.Helper()
	base, priv := sampleEntry(t)
	mk := func(e Entry) *Entry {
		e.Origin, e.Time, e.Prev, e.Kind = base.Origin, base.Time, base.Prev, KindOutcome
		if _, err := e.Sign(base.KeyID, func(m []byte) []byte { return ed25519.Sign(priv, m) }); err != nil {
			t.Fatal(err)
		}
		return &e
	}
	return []*Entry{
		mk(Entry{Index: 1, DecisionIndex: 0, Mediator: base.Mediator, Result: Unknown}),
		mk(Entry{Index: 6, DecisionIndex: 4, Mediator: base.Mediator, Result: Succeeded, OperationID: "op-1"}),
	}, priv
}

// A version 5 outcome is written with exactly its members, in canonical
// form, under the version 5 separator; it round-trips through both
// parsers and SignedEntry.
func TestVersion5RoundTrip(t *testing.T) {
	entries, priv := decisionOutcomes(t)
	base, _ := sampleEntry(t)
	prev := base.Prev.String()
	want := []string{
		`{"decision":0,"index":1,"key_id":"ledger.example.org/test+01020304","kind":"outcome","mediator":"` + base.Mediator +
			`","origin":"ledger.example.org/test","prev":"` + prev + `","result":"unknown","sig":"`,
		`{"decision":4,"index":6,"key_id":"ledger.example.org/test+01020304","kind":"outcome","mediator":"` + base.Mediator +
			`","operation_id":"op-1","origin":"ledger.example.org/test","prev":"` + prev + `","result":"succeeded","sig":"`,
	}
	for i, e := range entries {
		if v := e.Version(); v != Version5 {
			t.Fatalf("Version = %d", v)
		}
		b, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), want[i]) || !strings.HasSuffix(string(b), `"time":"2026-01-02T03:04:05.000006Z","version":5}`) {
			t.Errorf("entry %d:\n%s\nwant prefix\n%s", i, b, want[i])
		}
		canonical, err := commit.Canonicalize(b)
		if err != nil || !bytes.Equal(canonical, b) {
			t.Fatalf("not canonical: %v\n%s", err, b)
		}
		got, err := Parse(b)
		if err != nil {
			t.Fatalf("%v\n%s", err, b)
		}
		strict, err := parseStrict(b)
		if err != nil {
			t.Fatalf("parseStrict: %v", err)
		}
		if fast, _ := parseFast(b, nil); fast == nil {
			t.Errorf("parseFast refused a version 5 outcome")
		}
		for _, p := range []*Entry{got, strict} {
			if p.DecisionIndex != e.DecisionIndex || p.Result != e.Result || p.OperationID != e.OperationID ||
				p.Mediator != e.Mediator || p.Kind != KindOutcome || p.ApprovalID != (commit.Digest{}) {
				t.Errorf("parsed %+v", p)
			}
		}
		if err := got.Verify(e.KeyID, priv.Public().(ed25519.PublicKey)); err != nil {
			t.Fatal(err)
		}
		m, _ := got.SignedMessage()
		if !strings.HasPrefix(string(m), SignedDomainSeparatorV5) {
			t.Errorf("message starts %q", m[:16])
		}
		if again, err := SignedEntry(m, got.Signature); err != nil || !bytes.Equal(again, b) {
			t.Errorf("SignedEntry = %s, %v", again, err)
		}
	}
}

// Each version 5 member is covered by the signature, and so is the
// version: the same members signed as version 4 do not verify.
func TestVersion5SignatureBound(t *testing.T) {
	entries, priv := decisionOutcomes(t)
	pub := priv.Public().(ed25519.PublicKey)
	e := entries[1]
	for name, change := range map[string]func(*Entry){
		"decision":     func(e *Entry) { e.DecisionIndex = 3 },
		"mediator":     func(e *Entry) { e.Mediator = "mediator:other" },
		"result":       func(e *Entry) { e.Result = Failed },
		"operation_id": func(e *Entry) { e.OperationID = "op-2" },
	} {
		c := *e
		change(&c)
		if err := c.Verify(e.KeyID, pub); !errors.Is(err, ErrSignature) {
			t.Errorf("%s changed: Verify = %v", name, err)
		}
	}
	// The version 4 separator over the same bytes: another message.
	m, _ := e.SignedMessage()
	v4 := append([]byte(SignedDomainSeparatorV4), m[len(SignedDomainSeparatorV5):]...)
	if ed25519.Verify(pub, v4, e.Signature) {
		t.Error("a version 5 signature verifies under the version 4 separator")
	}
}

// Invalid version 5 outcomes are refused when written and when read,
// naming the member; a version 4 outcome without an approval is refused
// when read, not taken for version 5.
func TestVersion5Refused(t *testing.T) {
	entries, _ := decisionOutcomes(t)
	out := entries[1]
	for _, tc := range []struct {
		name, field string
		change      func(*Entry)
	}{
		{"unknown result", "result", func(e *Entry) { e.Result = "done" }},
		{"decision not earlier", "decision", func(e *Entry) { e.DecisionIndex = e.Index }},
		{"no mediator", "mediator", func(e *Entry) { e.Mediator = "" }},
		{"empty-looking operation id control", "operation_id", func(e *Entry) { e.OperationID = "op\x1b" }},
		{"with a consumption", "consumption", func(e *Entry) { e.Consumption = 2 }},
		{"with a verdict-style decision", "decision", func(e *Entry) { e.Decision = Allow }},
		{"with a principal", "principal", func(e *Entry) { e.Principal = "p" }},
		{"with attributes", "attributes", func(e *Entry) { e.Attributes = []byte(`{}`) }},
		{"decision index in a decision", "decision", func(e *Entry) { *e = *must2(sampleEntry(t)); e.DecisionIndex = 1 }},
		{"decision index in a version 4 outcome", "decision", func(e *Entry) {
			e.ApprovalID, e.Consumption, e.DecisionIndex = sha256.Sum256([]byte("r")), 2, 1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := *out
			tc.change(&e)
			_, err := e.Marshal()
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("Marshal = %v, want a FieldError on %q", err, tc.field)
			}
		})
	}
	b, _ := out.Marshal()
	s := string(b)
	v4, _ := approvalEntries(t)
	o4, _ := v4[3].Marshal()
	for _, tc := range []struct{ name, text, field string }{
		{"as version 4", strings.Replace(s, `"version":5}`, `"version":4}`, 1), "decision"},
		{"another kind", strings.Replace(s, `"kind":"outcome"`, `"kind":"consumption"`, 1), "kind"},
		{"decision as text", strings.Replace(s, `"decision":4`, `"decision":"allow"`, 1), "decision"},
		{"decision not earlier", strings.Replace(s, `"decision":4`, `"decision":6`, 1), "decision"},
		{"with an approval", strings.Replace(s, `{"decision"`, `{"approval":"sha256:`+strings.Repeat("ab", 32)+`","decision"`, 1), "approval"},
		{"version 4 without approval", strings.Replace(string(o4), `"approval":"sha256:`+v4[3].ApprovalID.String()[7:]+`"`, `"approval":"sha256:`+strings.Repeat("0", 64)+`"`, 1), "approval"},
		{"version 6", strings.Replace(s, `"version":5}`, `"version":6}`, 1), "version"},
	} {
		t.Run("parse "+tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.text))
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("Parse = %v, want a FieldError on %q", err, tc.field)
			}
		})
	}
}

func must2(e *Entry, _ ed25519.PrivateKey) *Entry { return e }
