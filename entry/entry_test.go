package entry

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
	"pgregory.net/rapid"
)

// The documentation key of docs/entry.md. Its seed is public: it signs
// nothing but examples.
var (
	docSeed  = sha256.Sum256([]byte("decision ledger documentation key: never use it for anything real"))
	docKey   = ed25519.NewKeyFromSeed(docSeed[:])
	docKeyID = "ledger.example.com/log+cf212548"
)

// Literals checked outside this package: the entry hash and leaf hash with
// sha256sum, the signature with openssl pkeyutl (docs/entry.md shows how).
const (
	exampleHash     = "sha256:29668ab5932c5148fd0e12871b5704b56d71f6abb50dc90541172d5ab44e2811"
	exampleLeafHash = "dcd3f071da724c55a0990817d7977c818595b9627382b33266324348235c0278"
)

func readExample(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/entry/example.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestExampleEntry(t *testing.T) {
	b := readExample(t)
	e, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Verify(docKeyID, docKey.Public().(ed25519.PublicKey)); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	h, err := e.Hash()
	if err != nil || h.String() != exampleHash {
		t.Errorf("Hash = %s, %v; want %s", h, err, exampleHash)
	}
	if lh := LeafHash(b); hex.EncodeToString(lh[:]) != exampleLeafHash {
		t.Errorf("LeafHash = %x", lh)
	}
	// Re-signing the decoded entry reproduces the bytes (Ed25519 is
	// deterministic).
	again := *e
	again.Signature = nil
	if _, err := again.Sign(docKeyID, func(m []byte) []byte { return ed25519.Sign(docKey, m) }); err != nil {
		t.Fatal(err)
	}
	if out, err := again.Marshal(); err != nil || !bytes.Equal(out, b) {
		t.Errorf("re-signed entry differs:\n%s\n%s", out, b)
	}
	want := commit.Commitment{Size: 146}
	want.Digest, _ = commit.ParseDigest("sha256:e19d67a48f4991a8c6d703eadcc9b39f8cc56e0e1fb9bbdd667daf2ad2f2d0a8")
	if e.Index != 0 || e.Decision != NeedsApproval || !e.Params.Equal(want) || len(e.Policies) != 2 ||
		!e.Time.Equal(time.Date(2026, 11, 29, 12, 0, 0, 123456000, time.UTC)) {
		t.Errorf("decoded %+v", e)
	}
}

func sampleEntry(t testing.TB) (*Entry, ed25519.PrivateKey) {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	c, err := commit.Params([]byte(`{"to":"a@example.com","subject":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	e := &Entry{
		Origin: "ledger.example.org/test", Index: 7,
		Time:     time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC),
		Mediator: "mediator-1", Principal: "agent-2", Action: "send_email",
		Decision: Allow, Policies: []string{"mail.allowed-domains"},
		Params: c, Attributes: []byte(`{"recipient_domain":"example.com"}`),
	}
	e.Prev[0] = 0xab
	if _, err := e.Sign("ledger.example.org/test+01020304", func(m []byte) []byte { return ed25519.Sign(priv, m) }); err != nil {
		t.Fatal(err)
	}
	return e, priv
}

func TestRoundTrip(t *testing.T) {
	e, priv := sampleEntry(t)
	testRoundTrip(t, e, priv)
	// A version 2 (hiding) commitment says so in its digest's spelling,
	// and both parsers keep it.
	c, _, err := commit.Hide([]byte(`{"to":"a@example.com","subject":"hello"}`), commit.RandomOpenings())
	if err != nil {
		t.Fatal(err)
	}
	e.Params = c
	if _, err := e.Sign(e.KeyID, func(m []byte) []byte { return ed25519.Sign(priv, m) }); err != nil {
		t.Fatal(err)
	}
	b := testRoundTrip(t, e, priv)
	if !bytes.Contains(b, []byte(`"params_digest":"v2:sha256:`)) {
		t.Errorf("a hiding commitment encoded as %s", b)
	}
	if fast, _ := parseFast(b, nil); fast == nil || !fast.Params.Equal(c) {
		t.Errorf("parseFast: %+v, want params %+v", fast, c)
	}
}

func testRoundTrip(t *testing.T, e *Entry, priv ed25519.PrivateKey) []byte {
	t.Helper()
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Verify(e.KeyID, priv.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	b2, _ := got.Marshal()
	if !bytes.Equal(b, b2) {
		t.Errorf("round trip changed bytes")
	}
	return b
}

// Every byte of the signed message is covered: changing any field breaks
// the signature, and a different key or key id is refused.
func TestSignatureCoversEveryField(t *testing.T) {
	e, priv := sampleEntry(t)
	pub := priv.Public().(ed25519.PublicKey)
	mutations := map[string]func(*Entry){
		"origin":     func(e *Entry) { e.Origin += "x" },
		"index":      func(e *Entry) { e.Index++ },
		"time":       func(e *Entry) { e.Time = e.Time.Add(time.Microsecond) },
		"mediator":   func(e *Entry) { e.Mediator = "mediator-2" },
		"principal":  func(e *Entry) { e.Principal = "agent-3" },
		"action":     func(e *Entry) { e.Action = "send_mail" },
		"decision":   func(e *Entry) { e.Decision = Deny },
		"policies":   func(e *Entry) { e.Policies = []string{"mail.allowed-domainz"} },
		"no-policy":  func(e *Entry) { e.Policies = nil },
		"params":     func(e *Entry) { e.Params.Digest[5] ^= 1 },
		"size":       func(e *Entry) { e.Params.Size++ },
		"hiding":     func(e *Entry) { e.Params.Hiding = !e.Params.Hiding },
		"tiers":      func(e *Entry) { e.Tiers[31] ^= 1 },
		"attributes": func(e *Entry) { e.Attributes = []byte(`{"recipient_domain":"example.org"}`) },
		"prev":       func(e *Entry) { e.Prev[0] ^= 1 },
		"signature":  func(e *Entry) { e.Signature = append([]byte{}, e.Signature...); e.Signature[10] ^= 1 },
	}
	for name, mutate := range mutations {
		c := *e
		mutate(&c)
		if err := c.Verify(e.KeyID, pub); !errors.Is(err, ErrSignature) {
			t.Errorf("%s changed: Verify = %v, want ErrSignature", name, err)
		}
	}
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	if err := e.Verify(e.KeyID, other.Public().(ed25519.PublicKey)); !errors.Is(err, ErrSignature) {
		t.Errorf("other key: %v", err)
	}
	if err := e.Verify("ledger.example.org/test+99999999", pub); !errors.Is(err, ErrKeyID) {
		t.Errorf("other key id: %v", err)
	}
}

// Parse refuses everything that is not exactly the canonical encoding of a
// valid entry, naming the field.
func TestParseRefuses(t *testing.T) {
	b := readExample(t)
	s := string(b)
	cases := []struct {
		name  string
		input string
		want  error  // errors.Is target
		field string // for *FieldError
	}{
		{"whitespace", strings.Replace(s, `"index":0`, `"index": 0`, 1), ErrNotCanonical, ""},
		{"trailing-newline", s + "\n", ErrNotCanonical, ""},
		{"member-order", `{"attributes":{"amount_minor":1250000,"currency":"EUR","payee_known":true},"action":"make_payment"` + s[strings.Index(s, `,"decision"`):], ErrNotCanonical, ""},
		{"escaped", strings.Replace(s, `"make_payment"`, `"make\u005fpayment"`, 1), ErrNotCanonical, ""},
		{"number-spelling", strings.Replace(s, `"params_size":146`, `"params_size":1.46e2`, 1), ErrNotCanonical, ""},
		{"unknown-member", strings.Replace(s, `"version":1}`, `"version":1,"zzz":1}`, 1), ErrMalformed, "zzz"},
		{"missing-member", strings.Replace(s, `"mediator":"mediator-eu-1",`, ``, 1), ErrMalformed, "mediator"},
		{"string-as-number", strings.Replace(s, `"index":0`, `"index":"0"`, 1), ErrMalformed, "index"},
		{"number-as-string", strings.Replace(s, `"action":"make_payment"`, `"action":7`, 1), ErrMalformed, "action"},
		{"attributes-array", strings.Replace(s, `{"amount_minor":1250000,"currency":"EUR","payee_known":true}`, `[1]`, 1), ErrMalformed, "attributes"},
		{"version-2-without-definition", strings.Replace(s, `"version":1}`, `"version":2}`, 1), ErrMalformed, "definition_digest"},
		{"version-3-without-kind", strings.Replace(s, `"version":1}`, `"version":3}`, 1), ErrMalformed, "kind"},
		{"version-4-without-kind", strings.Replace(s, `"version":1}`, `"version":4}`, 1), ErrMalformed, "kind"},
		{"version-5-without-kind", strings.Replace(s, `"version":1}`, `"version":5}`, 1), ErrMalformed, "kind"},
		{"version-6", strings.Replace(s, `"version":1}`, `"version":6}`, 1), ErrMalformed, "version"},
		{"version-1-with-definition", strings.Replace(s, `"decision":"needs_approval",`, `"decision":"needs_approval","definition_digest":"sha256:`+strings.Repeat("ab", 32)+`",`, 1), ErrMalformed, "definition_digest"},
		{"version-2-zero-definition", strings.Replace(strings.Replace(s, `"decision":"needs_approval",`, `"decision":"needs_approval","definition_digest":"sha256:`+strings.Repeat("00", 32)+`",`, 1), `"version":1}`, `"version":2}`, 1), ErrMalformed, "definition_digest"},
		{"bad-decision", strings.Replace(s, `"needs_approval"`, `"maybe"`, 1), ErrMalformed, "decision"},
		{"bad-digest", strings.Replace(s, `"sha256:e19d`, `"sha256:E19D`, 1), ErrMalformed, "params_digest"},
		{"bad-time", strings.Replace(s, `12:00:00.123456Z`, `12:00:00.123Z`, 1), ErrMalformed, "time"},
		{"time-offset", strings.Replace(s, `12:00:00.123456Z`, `12:00:00.123456+00:00`, 1), ErrMalformed, "time"},
		{"bad-sig", strings.Replace(s, `"sig":"MO7W`, `"sig":"MO7W=`, 1), ErrMalformed, "sig"},
		{"short-sig", strings.Replace(s, `"sig":"MO7W4T/m`, `"sig":"`, 1), ErrMalformed, "sig"},
		{"unsorted-policies", strings.Replace(s, `["payments.over-10k-needs-approval","payments.payee-known"]`, `["payments.payee-known","payments.over-10k-needs-approval"]`, 1), ErrMalformed, "policies"},
		{"repeated-policy", strings.Replace(s, `"payments.payee-known"]`, `"payments.payee-known","payments.payee-known"]`, 1), ErrMalformed, "policies"},
		{"empty-mediator", strings.Replace(s, `"mediator-eu-1"`, `""`, 1), ErrMalformed, "mediator"},
		{"negative-index", strings.Replace(s, `"index":0`, `"index":-1`, 1), ErrMalformed, "index"},
		{"duplicate-member", strings.Replace(s, `"version":1}`, `"version":1,"version":1}`, 1), ErrMalformed, ""},
		{"not-nfc", strings.Replace(s, `"agent:accounts-7"`, `"agent:e\u0301"`, 1), ErrMalformed, ""},
		{"unstable-normalization", strings.Replace(s, `"agent:accounts-7"`, `"agent:\u1acf"`, 1), ErrMalformed, ""},
		{"not-json", "{", ErrMalformed, ""},
		{"array", "[]", ErrMalformed, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.input == s {
				t.Fatal("mutation did not apply")
			}
			_, err := Parse([]byte(c.input))
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			var fe *FieldError
			if c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field) {
				t.Errorf("got %v, want field %q", err, c.field)
			}
			if strings.Contains(err.Error(), "accounts-7") || strings.Contains(err.Error(), "mediator-eu-1") {
				t.Errorf("error repeats a value: %v", err)
			}
		})
	}
}

func TestMarshalRefusesInvalid(t *testing.T) {
	e, _ := sampleEntry(t)
	cases := map[string]func(*Entry){
		"unsorted-policies":      func(e *Entry) { e.Policies = []string{"b", "a"} },
		"non-canonical-attrs":    func(e *Entry) { e.Attributes = []byte(`{"b":1, "a":2}`) },
		"attrs-not-object":       func(e *Entry) { e.Attributes = []byte(`[1]`) },
		"attrs-not-nfc":          func(e *Entry) { e.Attributes = []byte(`{"a":"e` + "\u0301" + `"}`) },
		"attrs-unstable":         func(e *Entry) { e.Attributes = []byte(`{"a":"` + "\U000105d2\u0307" + `"}`) },
		"decision":               func(e *Entry) { e.Decision = "ALLOW" },
		"empty-action":           func(e *Entry) { e.Action = "" },
		"invalid-utf8-principal": func(e *Entry) { e.Principal = "\xff" },
		"huge-index":             func(e *Entry) { e.Index = 1 << 60 },
		"zero-time":              func(e *Entry) { e.Time = time.Time{} },
		"no-signature":           func(e *Entry) { e.Signature = nil },
		"long-mediator":          func(e *Entry) { e.Mediator = strings.Repeat("m", MaxStringBytes+1) },
	}
	for name, mutate := range cases {
		c := *e
		mutate(&c)
		if _, err := c.Marshal(); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Marshal = %v, want ErrMalformed", name, err)
		}
	}
}

func TestSortPolicies(t *testing.T) {
	got := SortPolicies([]string{"b", "a", "b", "C"})
	if strings.Join(got, ",") != "C,a,b" {
		t.Errorf("got %v", got)
	}
}

// FuzzParse: no input panics, and whatever Parse accepts re-encodes to
// exactly the same bytes.
func FuzzParse(f *testing.F) {
	f.Add(readExample(f))
	e, _ := sampleEntry(f)
	b, _ := e.Marshal()
	f.Add(b)
	f.Add([]byte(`{}`))
	for _, make := range []func(testing.TB) (*Entry, ed25519.PrivateKey){ledgerDecision, publication} {
		e, _ := make(f)
		b, _ := e.Marshal()
		f.Add(b)
	}
	v4, _ := approvalEntries(f)
	for _, e := range v4 {
		b, _ := e.Marshal()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Parse(data)
		if err != nil {
			return
		}
		out, err := e.Marshal()
		if err != nil || !bytes.Equal(out, data) {
			t.Fatalf("accepted %q, which re-encodes to %q, %v", data, out, err)
		}
	})
}

func BenchmarkSign(b *testing.B) {
	e, priv := sampleEntry(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Sign(e.KeyID, func(m []byte) []byte { return ed25519.Sign(priv, m) }); err != nil {
			b.Fatal(err)
		}
		if _, err := e.Marshal(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseVerify(b *testing.B) {
	e, priv := sampleEntry(b)
	data, _ := e.Marshal()
	pub := priv.Public().(ed25519.PublicKey)
	b.ReportAllocs()
	for b.Loop() {
		got, err := Parse(data)
		if err != nil {
			b.Fatal(err)
		}
		if err := got.Verify(e.KeyID, pub); err != nil {
			b.Fatal(err)
		}
	}
}

// The bound is on the signed entry: an entry of exactly MaxEntryBytes is
// written, one byte more is refused already by SignedMessage, before it is
// signed.
func TestEntrySizeBound(t *testing.T) {
	e, priv := sampleEntry(t)
	sign := func(m []byte) []byte { return ed25519.Sign(priv, m) }
	e.Policies = nil
	for i := 0; i < 33; i++ {
		e.Policies = append(e.Policies, fmt.Sprintf("p%02d-%s", i, strings.Repeat("y", 995)))
	}
	attrs := func(pad int) []byte { return []byte(`{"a":"` + strings.Repeat("x", pad) + `"}`) }
	for pad := 30000; pad < MaxAttributesBytes; pad++ {
		e.Attributes = attrs(pad)
		if _, err := e.Sign(e.KeyID, sign); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v", err)
			}
			e.Attributes = attrs(pad - 1)
			if _, err := e.Sign(e.KeyID, sign); err != nil {
				t.Fatal(err)
			}
			b, err := e.Marshal()
			if err != nil || len(b) != MaxEntryBytes {
				t.Fatalf("largest accepted entry has %d bytes (%v), want %d", len(b), err, MaxEntryBytes)
			}
			return
		}
	}
	t.Fatal("never reached the entry bound")
}

// SignedEntry gives Marshal's bytes, for entries whose strings and
// attributes contain the member name it looks for.
func TestSignedEntryMatchesMarshal(t *testing.T) {
	base, priv := sampleEntry(t)
	rapid.Check(t, func(t *rapid.T) {
		e := *base
		text := rapid.SampledFrom([]string{"x", `,"tiers_digest":"`, `"sig"`, "é", `\`}).Draw(t, "text")
		e.Principal = rapid.StringMatching(`[a-z]{1,8}`).Draw(t, "principal") + text
		e.Attributes = []byte(fmt.Sprintf(`{"a":{"b":1,"tiers_digest":%q},"z":%q}`, text, text))
		e.Attributes, _ = commit.Canonicalize(e.Attributes)
		e.Index = rapid.Uint64Range(0, commit.MaxSafeInteger).Draw(t, "index")
		e.Definition = commit.Digest{}
		if rapid.Bool().Draw(t, "v2") {
			e.Definition[0] = 1
		}
		m, err := e.SignedMessage()
		if err != nil {
			t.Fatal(err)
		}
		e.Signature = ed25519.Sign(priv, m)
		want, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := SignedEntry(m, e.Signature)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("SignedEntry = %s, %v\nwant %s", got, err, want)
		}
	})
	if _, err := SignedEntry([]byte(`{"a":1}`), make([]byte, ed25519.SignatureSize)); !errors.Is(err, ErrMalformed) {
		t.Errorf("SignedEntry of a message without the domain: %v", err)
	}
	if _, err := SignedEntry([]byte(SignedDomainSeparator+`{}`), make([]byte, 10)); !errors.Is(err, ErrMalformed) {
		t.Errorf("SignedEntry with a short signature: %v", err)
	}
}

// SignedEntry allocates the signed entry and nothing else, whichever
// separator the message begins with (it is on every append's path).
func TestSignedEntryAllocatesOnlyTheEntry(t *testing.T) {
	v1, _ := sampleEntry(t)
	v3, _ := ledgerDecision(t)
	for _, e := range []*Entry{v1, v3} {
		m, err := e.SignedMessage()
		if err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() {
			if _, err := SignedEntry(m, e.Signature); err != nil {
				t.Fatal(err)
			}
		}); n != 1 {
			t.Errorf("version %d: SignedEntry allocates %v times, want 1", e.Version(), n)
		}
	}
}

// Attributes changed in place after a check are checked again.
func TestAttributesCheckedAgainAfterChange(t *testing.T) {
	e, _ := sampleEntry(t)
	e.Attributes = []byte(`{"a":"b","c":1}`)
	if _, err := e.SignedMessage(); err != nil {
		t.Fatal(err)
	}
	copy(e.Attributes, `{"c":"b","a":1}`) // not sorted
	if _, err := e.SignedMessage(); !errors.Is(err, ErrMalformed) {
		t.Errorf("SignedMessage after attributes changed in place: %v, want ErrMalformed", err)
	}
}

// SetAttributes canonicalizes, refuses what is outside the domain with the
// pointer, and a later change in place is still caught.
func TestSetAttributes(t *testing.T) {
	e, _ := sampleEntry(t)
	if err := e.SetAttributes([]byte(`{ "z": 1, "a": [true, "x"] }`)); err != nil {
		t.Fatal(err)
	}
	if string(e.Attributes) != `{"a":[true,"x"],"z":1}` {
		t.Errorf("Attributes = %s", e.Attributes)
	}
	if _, err := e.SignedMessage(); err != nil {
		t.Fatal(err)
	}
	copy(e.Attributes, `{"z":[true,"x"],"a":1}`)
	if _, err := e.SignedMessage(); !errors.Is(err, ErrMalformed) {
		t.Errorf("SignedMessage after a change in place: %v, want ErrMalformed", err)
	}
	for _, bad := range []string{`[1]`, `{"a":1.5}`, `{"a":1,"a":2}`, `{"n":"` + strings.Repeat("x", MaxAttributesBytes) + `"}`} {
		err := e.SetAttributes([]byte(bad))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "attributes" {
			t.Errorf("SetAttributes(%.20s…) = %v, want a FieldError on attributes", bad, err)
		}
	}
}

// A version 2 entry names its action definition, round-trips, and its
// signature is bound to its version: dropping the definition (making it
// version 1) or adding one breaks it.
func TestVersion2(t *testing.T) {
	e, priv := sampleEntry(t)
	if e.Version() != Version1 {
		t.Fatalf("an entry without a definition is version %d", e.Version())
	}
	e.Definition = sha256.Sum256([]byte("definition"))
	if _, err := e.Sign(e.KeyID, func(m []byte) []byte {
		if !strings.HasPrefix(string(m), SignedDomainSeparatorV2) {
			t.Errorf("version 2 message starts %q", m[:16])
		}
		return ed25519.Sign(priv, m)
	}); err != nil {
		t.Fatal(err)
	}
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"decision":"allow","definition_digest":"sha256:`) || !strings.HasSuffix(string(b), `"version":2}`) {
		t.Errorf("version 2 entry: %s", b)
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	pub := priv.Public().(ed25519.PublicKey)
	if err := got.Verify(e.KeyID, pub); err != nil || got.Definition != e.Definition {
		t.Fatalf("Verify = %v, definition %v", err, got.Definition)
	}
	downgraded := *got
	downgraded.Definition = commit.Digest{}
	if err := downgraded.Verify(e.KeyID, pub); !errors.Is(err, ErrSignature) {
		t.Errorf("the signature verified as version 1: %v", err)
	}
	other := *got
	other.Definition[0] ^= 1
	if err := other.Verify(e.KeyID, pub); !errors.Is(err, ErrSignature) {
		t.Errorf("the signature verified with another definition: %v", err)
	}
}

// The signed message fits the buffer SignedMessage sizes for it when no
// string needs escapes, with every number and digest at its longest.
func TestSizeHint(t *testing.T) {
	e, err := Parse(readExample(t))
	if err != nil {
		t.Fatal(err)
	}
	e.Index = commit.MaxSafeInteger
	e.Params.Size = commit.MaxSafeInteger
	e.Definition = commit.Digest(sha256.Sum256([]byte("definition")))
	e.Time = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	m, err := e.AppendSignedMessage(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) > e.sizeHint() {
		t.Errorf("a message of %d bytes; sizeHint %d", len(m), e.sizeHint())
	}
	if slack := e.sizeHint() - len(m); slack > 128 {
		t.Errorf("sizeHint %d over-allocates by %d bytes", e.sizeHint(), slack)
	}
}

// Attributes nest at most as deep as Parse reads them inside an entry
// (one level less than a document alone): an entry is never written that
// cannot be read back.
func TestAttributesDepthReadBack(t *testing.T) {
	nested := func(depth int) []byte {
		return []byte(strings.Repeat(`{"a":`, depth-1) + `{}` + strings.Repeat(`}`, depth-1))
	}
	e, priv := sampleEntry(t)
	if err := e.SetAttributes(nested(commit.DefaultMaxDepth - 1)); err != nil {
		t.Fatalf("attributes at depth %d: %v", commit.DefaultMaxDepth-1, err)
	}
	if _, err := e.Sign(e.KeyID, func(m []byte) []byte { return ed25519.Sign(priv, m) }); err != nil {
		t.Fatal(err)
	}
	testRoundTrip(t, e, priv)
	err := e.SetAttributes(nested(commit.DefaultMaxDepth))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "attributes" || !strings.Contains(err.Error(), "too_deep") {
		t.Errorf("attributes at depth %d: %v, want a too_deep FieldError on attributes", commit.DefaultMaxDepth, err)
	}
}

// BenchmarkSetAttributes: attributes that arrive canonical (as a client's
// minimized attributes do) against the same members out of order, which
// are parsed and written anew.
func BenchmarkSetAttributes(b *testing.B) {
	canonical := []byte(`{"amount_minor":125000,"attachment_count":2,"body_size":48213,"currency":"EUR",` +
		`"endpoint_host":"api.example.org","payee_known":true,"purpose":"monthly-billing-run",` +
		`"recipient_domain":"example.com","resource_dir":"/records/2026/11","route_shape":"/v1/invoices/{id}","urgent":false}`)
	shuffled := []byte(`{"urgent":false,"recipient_domain":"example.com","amount_minor":125000,"currency":"EUR",` +
		`"payee_known":true,"endpoint_host":"api.example.org","route_shape":"/v1/invoices/{id}",` +
		`"resource_dir":"/records/2026/11","attachment_count":2,"body_size":48213,"purpose":"monthly-billing-run"}`)
	for name, attrs := range map[string][]byte{"canonical": canonical, "unordered": shuffled} {
		b.Run(name, func(b *testing.B) {
			var e Entry
			for b.Loop() {
				if err := e.SetAttributes(attrs); err != nil {
					b.Fatal(err)
				}
			}
			if !bytes.Equal(e.Attributes, canonical) {
				b.Fatalf("attributes %s", e.Attributes)
			}
		})
	}
}
