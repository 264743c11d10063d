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

// ledgerDecision returns a signed version 3 decision built on sampleEntry.
func ledgerDecision(t testing.TB) (*Entry, ed25519.PrivateKey) {
	t.Helper()
	e, priv := sampleEntry(t)
	e.Kind = KindDecision
	e.Definition = sha256.Sum256([]byte("definition"))
	e.PolicySet = sha256.Sum256([]byte("policy set"))
	e.PolicyErrors = []string{}
	if _, err := e.Sign(e.KeyID, func(m []byte) []byte { return ed25519.Sign(priv, m) }); err != nil {
		t.Fatal(err)
	}
	return e, priv
}

func publication(t testing.TB) (*Entry, ed25519.PrivateKey) {
	t.Helper()
	e, priv := sampleEntry(t)
	p := &Entry{Kind: KindPolicySet, Origin: e.Origin, Index: e.Index, Time: e.Time, Prev: e.Prev,
		PolicySet: sha256.Sum256([]byte("policy set"))}
	if _, err := p.Sign(e.KeyID, func(m []byte) []byte { return ed25519.Sign(priv, m) }); err != nil {
		t.Fatal(err)
	}
	return p, priv
}

// Both version 3 kinds round-trip through Marshal and Parse, are signed
// under the version 3 separator, and SignedEntry builds the same bytes as
// Marshal from the signed message.
func TestVersion3RoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name    string
		make    func(testing.TB) (*Entry, ed25519.PrivateKey)
		members string
	}{
		{"decision", ledgerDecision, `{"action":"send_email","attributes":{"recipient_domain":"example.com"},"decision":"allow","definition_digest":"sha256:`},
		{"policy_set", publication, `{"index":7,"key_id":"ledger.example.org/test+01020304","kind":"policy_set","origin":"ledger.example.org/test","policy_set":"sha256:`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, priv := tc.make(t)
			if e.Version() != Version3 {
				t.Fatalf("version %d", e.Version())
			}
			b, err := e.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(b), tc.members) || !strings.HasSuffix(string(b), `"version":3}`) {
				t.Errorf("entry: %s", b)
			}
			canonical, err := commit.Canonicalize(b)
			if err != nil || !bytes.Equal(canonical, b) {
				t.Fatalf("not canonical: %v\n%s\n%s", err, b, canonical)
			}
			got, err := Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := got.Verify(e.KeyID, priv.Public().(ed25519.PublicKey)); err != nil {
				t.Fatal(err)
			}
			if got.Kind != e.Kind || got.PolicySet != e.PolicySet {
				t.Errorf("parsed kind %q policy set %v", got.Kind, got.PolicySet)
			}
			m, err := got.SignedMessage()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(m), SignedDomainSeparatorV3) {
				t.Errorf("message starts %q", m[:16])
			}
			again, err := SignedEntry(m, got.Signature)
			if err != nil || !bytes.Equal(again, b) {
				t.Errorf("SignedEntry = %s, %v\nwant %s", again, err, b)
			}
		})
	}
}

// A version 3 signature is bound to its kind and to every version 3
// member: a ledger decision passed off as a mediator's (kind dropped), a
// changed policy set, an added or removed erroring id all break it.
func TestVersion3SignatureBound(t *testing.T) {
	e, priv := ledgerDecision(t)
	pub := priv.Public().(ed25519.PublicKey)
	for name, change := range map[string]func(*Entry){
		"as a version 2 entry": func(e *Entry) { e.Kind, e.PolicySet, e.PolicyErrors = "", commit.Digest{}, nil },
		"policy set":           func(e *Entry) { e.PolicySet[31] ^= 1 },
		"erroring id": func(e *Entry) {
			e.Decision, e.Policies, e.PolicyErrors = Deny, []string{"mail.allowed-domains"}, []string{"mail.allowed-domains"}
		},
	} {
		c := *e
		change(&c)
		if err := c.Verify(e.KeyID, pub); !errors.Is(err, ErrSignature) {
			t.Errorf("%s: Verify = %v, want ErrSignature", name, err)
		}
	}
}

// Invalid version 3 entries are refused when written and when read, naming
// the member.
func TestVersion3Refused(t *testing.T) {
	d, _ := ledgerDecision(t)
	p, _ := publication(t)
	for _, tc := range []struct {
		name, field string
		base        *Entry
		change      func(*Entry)
	}{
		{"decision without policy set", "policy_set", d, func(e *Entry) { e.PolicySet = commit.Digest{} }},
		{"decision without definition", "definition_digest", d, func(e *Entry) { e.Definition = commit.Digest{} }},
		{"errors with allow", "policy_errors", d, func(e *Entry) { e.PolicyErrors = []string{"mail.allowed-domains"} }},
		{"error not determining", "policy_errors", d, func(e *Entry) { e.Decision, e.PolicyErrors = Deny, []string{"other"} }},
		{"errors unsorted", "policy_errors", d, func(e *Entry) {
			e.Decision, e.Policies, e.PolicyErrors = Deny, []string{"a", "b"}, []string{"b", "a"}
		}},
		{"unknown kind", "kind", d, func(e *Entry) { e.Kind = "approval_request" }},
		{"policy set without kind", "kind", d, func(e *Entry) { e.Kind = "" }},
		{"errors without kind", "kind", d, func(e *Entry) {
			e.Kind, e.PolicySet, e.Decision, e.Policies, e.PolicyErrors = "", commit.Digest{}, Deny, []string{"a"}, []string{"a"}
		}},
		{"publication without policy set", "policy_set", p, func(e *Entry) { e.PolicySet = commit.Digest{} }},
		{"publication with action", "action", p, func(e *Entry) { e.Action = "send_email" }},
		{"publication with mediator", "mediator", p, func(e *Entry) { e.Mediator = "m" }},
		{"publication with attributes", "attributes", p, func(e *Entry) { e.Attributes = []byte(`{}`) }},
		{"publication with policies", "policies", p, func(e *Entry) { e.Policies = []string{} }},
		{"publication with tiers", "tiers_digest", p, func(e *Entry) { e.Tiers[0] = 1 }},
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

	db, _ := d.Marshal()
	pb, _ := p.Marshal()
	ds, ps := string(db), string(pb)
	zero := "sha256:" + strings.Repeat("0", 64)
	for _, tc := range []struct{ name, text, field string }{
		{"decision without kind", strings.Replace(ds, `"kind":"decision",`, ``, 1), "kind"},
		{"decision as version 2", strings.Replace(ds, `"version":3}`, `"version":2}`, 1), "kind"},
		{"decision without policy_errors", strings.Replace(ds, `"policy_errors":[],`, ``, 1), "policy_errors"},
		{"decision with zero policy set", replaceMember(ds, "policy_set", zero), "policy_set"},
		{"unknown kind", strings.Replace(ds, `"kind":"decision"`, `"kind":"decisions"`, 1), "kind"},
		{"kind not a string", strings.Replace(ds, `"kind":"decision"`, `"kind":3`, 1), "kind"},
		{"publication with action", strings.Replace(ps, `{"index"`, `{"action":"send_email","index"`, 1), "action"},
		{"publication as decision", strings.Replace(ps, `"kind":"policy_set"`, `"kind":"decision"`, 1), "action"},
		{"publication without policy_set", strings.Replace(ps, `"policy_set":"`+d.PolicySet.String()+`",`, ``, 1), "policy_set"},
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

func replaceMember(entry, name, value string) string {
	at := strings.Index(entry, `"`+name+`":"`) + len(name) + 4
	end := at + strings.Index(entry[at:], `"`)
	return entry[:at] + value + entry[end:]
}

// A denial by erroring policies records them in both lists.
func TestVersion3ErroredDeny(t *testing.T) {
	e, priv := ledgerDecision(t)
	e.Decision, e.Policies, e.PolicyErrors = Deny, []string{"a.errs", "b.forbids"}, []string{"a.errs"}
	if _, err := e.Sign(e.KeyID, func(m []byte) []byte { return ed25519.Sign(priv, m) }); err != nil {
		t.Fatal(err)
	}
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"policies":["a.errs","b.forbids"],"policy_errors":["a.errs"],"policy_set":"sha256:`) {
		t.Errorf("entry: %s", b)
	}
	if _, err := Parse(b); err != nil {
		t.Fatal(err)
	}
}
