package entry

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
)

// templateEntries are entries of every kind a Template takes, with
// strings that need escapes and attributes that contain the names of the
// members a template sets.
func templateEntries(t *testing.T) map[string]*Entry {
	t.Helper()
	v1, _ := sampleEntry(t)
	v2, _ := sampleEntry(t)
	v2.Definition = sha256.Sum256([]byte("definition"))
	v3, _ := ledgerDecision(t)
	v3.Decision = Deny
	v3.Policies = []string{"a.first", "b.second", "c.third"}
	v3.PolicyErrors = []string{"b.second"}
	pub, _ := publication(t)
	escaped, _ := sampleEntry(t)
	escaped.Principal = `agent "seven" \ é 😀`
	escaped.Action = "send_émail"
	escaped.Attributes = []byte(`{"index":12,"prev":"sha256:00","time":"1970-01-01T00:00:00.000000Z","ü":"\u2028"}`)
	entries := map[string]*Entry{"v1": v1, "v2": v2, "v3 decision": v3, "v3 policy set": pub, "escaped": escaped}
	for name, e := range entries {
		if err := e.SetAttributes(e.Attributes); err != nil && e.Kind != KindPolicySet {
			t.Fatalf("%s: %v", name, err)
		}
		e.Signature = nil
	}
	return entries
}

// A template's message is SignedMessage's, byte for byte, for every index
// width (growing and shrinking the index in one template), the extreme
// times and prev values (differential: the template against the encoder
// it replaces in the sequencer).
func TestTemplateMatchesSignedMessage(t *testing.T) {
	indices := []uint64{0, 7, 9, 10, 99, 100, 12345, 123456789, 1 << 40, 10, commit.MaxSafeInteger, 3}
	times := []time.Time{
		time.Date(2026, 12, 1, 10, 55, 0, 123456789, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC), // the zero time is refused
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 6, 1, 12, 0, 0, 1000, time.FixedZone("east", 5*3600)),
		time.Unix(0, 0),
	}
	var prevs []commit.Digest
	prevs = append(prevs, commit.Digest{}, sha256.Sum256([]byte("prev")))
	var all commit.Digest
	for i := range all {
		all[i] = 0xff
	}
	prevs = append(prevs, all)
	for name, e := range templateEntries(t) {
		t.Run(name, func(t *testing.T) {
			tmpl, err := e.Template()
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for i, index := range indices {
				for j, tm := range times {
					prev := prevs[(i+j)%len(prevs)]
					if rng.IntN(2) == 0 {
						prev = sha256.Sum256(fmt.Appendf(nil, "%d/%d", i, j))
					}
					got, err := tmpl.Message(index, tm, prev)
					if err != nil {
						t.Fatalf("index %d, time %v: %v", index, tm, err)
					}
					c := *e
					c.Index, c.Time, c.Prev = index, tm, prev
					want, err := c.SignedMessage()
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("index %d, time %v, prev %x:\ntemplate %s\nwant     %s", index, tm, prev, got, want)
					}
				}
			}
			for range 2000 {
				index := rng.Uint64N(commit.MaxSafeInteger + 1)
				index >>= rng.UintN(53) // every width
				tm := time.Unix(rng.Int64N(253402300799), rng.Int64N(1e9))
				prev := sha256.Sum256(fmt.Append(nil, index))
				got, err := tmpl.Message(index, tm, prev)
				c := *e
				c.Index, c.Time, c.Prev = index, tm, prev
				want, werr := c.SignedMessage()
				if err != nil || werr != nil || !bytes.Equal(got, want) {
					t.Fatalf("index %d, time %v: template %s (%v), want %s (%v)", index, tm, got, err, want, werr)
				}
			}
		})
	}
}

// A template refuses what SignedMessage refuses: an invalid entry, a
// version 4 entry, an index beyond 2^53-1, a time outside the format's
// years, and an entry that a longer index pushes past MaxEntryBytes.
func TestTemplateRefuses(t *testing.T) {
	e, _ := sampleEntry(t)
	bad := *e
	bad.Decision = "maybe"
	if _, err := bad.Template(); err == nil || !errors.Is(err, ErrMalformed) {
		t.Errorf("invalid decision: %v", err)
	}
	v4 := &Entry{Kind: KindApprovalConfig, Origin: e.Origin, KeyID: e.KeyID, Time: e.Time,
		PendingTTL: time.Hour, ExecutionTTL: time.Hour}
	var fe *FieldError
	if _, err := v4.Template(); !errors.As(err, &fe) || fe.Field != "kind" {
		t.Errorf("version 4 entry: %v", err)
	}
	tmpl, err := e.Template()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmpl.Message(commit.MaxSafeInteger+1, e.Time, e.Prev); !errors.As(err, &fe) || fe.Field != "index" {
		t.Errorf("index beyond 2^53-1: %v", err)
	}
	for _, tm := range []time.Time{{}, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC)} {
		if _, err := tmpl.Message(1, tm, e.Prev); !errors.As(err, &fe) || fe.Field != "time" {
			t.Errorf("time %v: %v", tm, err)
		}
	}
	// The largest entry at index 7 (one digit): at index 10 it is one
	// byte too long, for SignedMessage and for the template alike.
	e.Policies = nil
	for i := range 33 {
		e.Policies = append(e.Policies, fmt.Sprintf("p%02d-%s", i, strings.Repeat("y", 995)))
	}
	pad := 30000
	for ; ; pad++ {
		e.Attributes = []byte(`{"a":"` + strings.Repeat("x", pad) + `"}`)
		if _, err := e.SignedMessage(); err != nil {
			break
		}
	}
	e.Attributes = []byte(`{"a":"` + strings.Repeat("x", pad-1) + `"}`)
	big, err := e.Template()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := big.Message(8, e.Time, e.Prev); err != nil {
		t.Fatalf("same width: %v", err)
	}
	longer := *e
	longer.Index = 10
	if _, err := longer.SignedMessage(); err == nil {
		t.Fatal("SignedMessage took the longer entry")
	}
	if _, err := big.Message(10, e.Time, e.Prev); !errors.Is(err, ErrMalformed) {
		t.Errorf("template took the longer entry: %v", err)
	}
}

// Signed builds, in the template's buffer, the entry Marshal builds (and
// SignedEntry from the message), for every kind of template, index width
// and an entry at the format's bound; the template is then spent.
func TestTemplateSigned(t *testing.T) {
	_, priv := sampleEntry(t)
	tm := time.Date(2026, 12, 1, 10, 55, 0, 123456000, time.UTC)
	prev := sha256.Sum256([]byte("prev"))
	entries := templateEntries(t)
	largest, _ := sampleEntry(t)
	largest.Policies = nil
	for i := range 33 {
		largest.Policies = append(largest.Policies, fmt.Sprintf("p%02d-%s", i, strings.Repeat("y", 995)))
	}
	for pad := 30000; ; pad++ {
		largest.Attributes = []byte(`{"a":"` + strings.Repeat("x", pad) + `"}`)
		largest.Index = commit.MaxSafeInteger
		if _, err := largest.SignedMessage(); err != nil {
			largest.Attributes = []byte(`{"a":"` + strings.Repeat("x", pad-1) + `"}`)
			break
		}
	}
	entries["largest"] = largest
	for name, e := range entries {
		for _, index := range []uint64{0, 7, 12345, commit.MaxSafeInteger} {
			tmpl, err := e.Template()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			m, err := tmpl.Message(index, tm, prev)
			if err != nil {
				t.Fatalf("%s, index %d: %v", name, index, err)
			}
			sig := ed25519.Sign(priv, m)
			fromMessage, err := SignedEntry(bytes.Clone(m), sig)
			if err != nil {
				t.Fatalf("%s, index %d: SignedEntry: %v", name, index, err)
			}
			c := *e
			c.Index, c.Time, c.Prev, c.Signature = index, tm, prev, sig
			want, err := c.Marshal()
			if err != nil || !bytes.Equal(fromMessage, want) {
				t.Fatalf("%s, index %d: SignedEntry %s (%v), want %s", name, index, fromMessage, err, want)
			}
			got, err := tmpl.Signed(sig)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s, index %d: Signed %s (%v)\nwant   %s", name, index, got, err, want)
			}
			if _, err := tmpl.Signed(sig); !errors.Is(err, errTemplateSpent) {
				t.Errorf("%s: Signed twice: %v", name, err)
			}
			if _, err := tmpl.Message(index, tm, prev); !errors.Is(err, errTemplateSpent) {
				t.Errorf("%s: Message after Signed: %v", name, err)
			}
		}
	}
	tmpl, _ := entries["v1"].Template()
	if _, err := tmpl.Signed(make([]byte, 10)); err == nil {
		t.Error("Signed took a short signature")
	}
}

// The entry is encoded once: chaining it (Message) and signing it
// (Signed) allocate nothing beyond its template, also when its strings
// need escapes (here 150 quotes, which the template's size hint does not
// foresee: the room it keeps for the signature takes them).
func TestTemplateSignedAllocatesNothing(t *testing.T) {
	e, priv := sampleEntry(t)
	escaped := *e
	escaped.Principal = strings.Repeat(`"`, 150)
	tm := time.Date(2026, 12, 1, 10, 55, 0, 123456000, time.UTC)
	sig := ed25519.Sign(priv, []byte("any"))
	for _, e := range []*Entry{e, &escaped} {
		template := testing.AllocsPerRun(100, func() {
			if _, err := e.Template(); err != nil {
				t.Fatal(err)
			}
		})
		signed := testing.AllocsPerRun(100, func() {
			tmpl, err := e.Template()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tmpl.Message(123456789, tm, e.Prev); err != nil {
				t.Fatal(err)
			}
			if _, err := tmpl.Signed(sig); err != nil {
				t.Fatal(err)
			}
		})
		if signed != template {
			t.Errorf("principal %.20q: template, message and signed entry: %v allocations, the template alone %v", e.Principal, signed, template)
		}
	}
}

// BenchmarkTemplate compares chaining an entry from its template with
// encoding it again, as the sequencer did before templates.
func BenchmarkTemplate(b *testing.B) {
	e, _ := sampleEntry(b)
	e.Attributes = []byte(`{"amount_minor":123456789,"currency":"EUR","memo_size":201,"note":"` + strings.Repeat("x", 200) + `","payee_known":true}`)
	prev := sha256.Sum256([]byte("prev"))
	tm := time.Date(2026, 12, 1, 10, 55, 0, 123456000, time.UTC)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			c := *e
			c.Index, c.Time, c.Prev = uint64(i), tm, prev
			if _, err := c.SignedMessage(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("template", func(b *testing.B) {
		b.ReportAllocs()
		tmpl, err := e.Template()
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; b.Loop(); i++ {
			if _, err := tmpl.Message(uint64(i), tm, prev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
