package commit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const payment = `{"payee":"payee-0001","amount_minor":42000,"currency":"EUR","memo":"Invoice 4711"}`

func mustHide(t *testing.T, params string, src OpeningSource) (Commitment, *Disclosure) {
	t.Helper()
	c, x, err := Hide([]byte(params), src)
	if err != nil {
		t.Fatal(err)
	}
	return c, x
}

// A hiding commitment opens with its disclosure, whole or in part, and the
// whole disclosure gives back the canonical parameters.
func TestHideOpens(t *testing.T) {
	c, x := mustHide(t, payment, RandomOpenings())
	if !c.Hiding || c.Version() != 2 || !strings.HasPrefix(c.DigestText(), "v2:sha256:") {
		t.Fatalf("commitment %+v, text %s", c, c.DigestText())
	}
	if err := x.Check(c); err != nil {
		t.Fatal(err)
	}
	canonical, _ := Canonicalize([]byte(payment))
	if p, ok := x.Params(); !ok || !bytes.Equal(p, canonical) {
		t.Fatalf("Params: %s %v", p, ok)
	}
	// The size is what the digest covers: four names and four 32-byte
	// commitments, whatever the values' lengths.
	if want := len(`"amount_minor""currency""memo""payee"`) + 4*32; c.Size != want {
		t.Errorf("size %d, want %d", c.Size, want)
	}
	fields := x.Fields()
	for mask := 0; mask < 1<<len(fields); mask++ {
		var names []string
		for i, f := range fields {
			if mask&(1<<i) != 0 {
				names = append(names, f)
			}
		}
		y, err := x.Only(names...)
		if err != nil {
			t.Fatal(err)
		}
		if err := y.Check(c); err != nil {
			t.Errorf("disclosing %v: %v", names, err)
		}
		if len(y.Disclosed()) != len(names) || len(y.Hidden()) != len(fields)-len(names) {
			t.Errorf("disclosing %v: disclosed %v, hidden %v", names, y.Disclosed(), y.Hidden())
		}
		if _, whole := y.Params(); whole != (len(names) == len(fields)) {
			t.Errorf("disclosing %v: Params says whole = %v", names, whole)
		}
		// Through the file and back.
		b, _ := y.MarshalJSON()
		z, err := ParseDisclosure(b, Domain{})
		if err != nil {
			t.Fatalf("disclosing %v: %v\n%s", names, err, b)
		}
		if err := z.Check(c); err != nil {
			t.Errorf("disclosing %v, read back: %v", names, err)
		}
		if b2, _ := z.MarshalJSON(); !bytes.Equal(b, b2) {
			t.Errorf("read back differs:\n%s\n%s", b, b2)
		}
	}
}

// Two calls with identical parameters share no commitment, field or whole:
// nothing links them.
func TestHideUnlinkable(t *testing.T) {
	c1, x1 := mustHide(t, payment, RandomOpenings())
	c2, x2 := mustHide(t, payment, RandomOpenings())
	if c1.Digest == c2.Digest {
		t.Fatal("two commitments to the same parameters are equal")
	}
	for i := range x1.fields {
		if x1.fields[i].commitment == x2.fields[i].commitment {
			t.Errorf("field %s: the same commitment in two calls", x1.fields[i].name)
		}
	}
	if c1.Size != c2.Size {
		t.Errorf("sizes %d and %d: the size depends only on the names", c1.Size, c2.Size)
	}
}

// A changed value, a changed opening, a field taken from another call and
// a replaced commitment are each refused, naming the field where one is at
// fault.
func TestDisclosureRefusals(t *testing.T) {
	c, x := mustHide(t, payment, RandomOpenings())
	_, other := mustHide(t, payment, RandomOpenings())
	payee := x.field("payee")

	changed := clone(x)
	changed.field("payee").value = []byte(`"payee-0002"`)
	movedIn := clone(x)
	*movedIn.field("payee") = *other.field("payee") // value, opening and commitment of another call
	movedValue := clone(x)
	movedValue.field("payee").opening = other.field("payee").opening
	opened := clone(x)
	opened.field("payee").opening[0] ^= 1

	for _, tc := range []struct {
		name  string
		x     *Disclosure
		c     Commitment
		kind  DisclosureKind
		field string
	}{
		{"changed value", changed, c, ErrFieldMismatch, "payee"},
		{"changed opening", opened, c, ErrFieldMismatch, "payee"},
		{"opening of another call", movedValue, c, ErrFieldMismatch, "payee"},
		{"field of another call", movedIn, c, ErrCommitmentMismatch, ""},
		{"another entry", other, c, ErrCommitmentMismatch, ""},
		{"version 1 entry", x, Commitment{Digest: c.Digest, Size: c.Size}, ErrNotHiding, ""},
	} {
		err := tc.x.Check(tc.c)
		var de *DisclosureError
		if !errors.As(err, &de) || de.Kind != tc.kind || de.Field != tc.field || !errors.Is(err, tc.kind) {
			t.Errorf("%s: %v; want %s in field %q", tc.name, err, tc.kind, tc.field)
			continue
		}
		for _, secret := range []string{"payee-0001", "payee-0002", hex.EncodeToString(payee.opening[:])} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: the error holds a value or an opening: %v", tc.name, err)
			}
		}
	}
}

func clone(x *Disclosure) *Disclosure {
	y, _ := x.Only(x.Disclosed()...)
	return y
}

// An approved call retried with the first call's openings gets the same
// commitment if and only if its parameters are the same.
func TestDisclosureAsOpenings(t *testing.T) {
	c, x := mustHide(t, payment, RandomOpenings())
	again, _, err := Hide([]byte(`{"currency":"EUR","memo":"Invoice 4711","amount_minor":42000,"payee":"payee-0001"}`), x)
	if err != nil || !again.Equal(c) {
		t.Fatalf("the same parameters with the same openings: %v, equal %v", err, again.Equal(c))
	}
	changed, _, err := Hide([]byte(strings.Replace(payment, "42000", "42001", 1)), x)
	if err != nil || changed.Equal(c) {
		t.Fatalf("other parameters with the same openings: %v, equal %v", err, changed.Equal(c))
	}
	if _, _, err := Hide([]byte(`{"payee":"payee-0001","extra":1}`), x); !errors.Is(err, ErrFieldNotOpened) {
		t.Fatalf("a field the first call did not have: %v", err)
	}
}

// Derived openings are a function of the secret, the call key and the
// field, and of nothing else.
func TestDerivedOpenings(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, 32)
	a, err := DerivedOpenings(secret, "call-1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := DerivedOpenings(secret, "call-1")
	other, _ := DerivedOpenings(secret, "call-2")
	otherSecret, _ := DerivedOpenings(bytes.Repeat([]byte{8}, 32), "call-1")
	ca, _ := mustHide(t, payment, a)
	cb, _ := mustHide(t, payment, b)
	if !ca.Equal(cb) {
		t.Error("the same secret and call key give different commitments")
	}
	for name, src := range map[string]OpeningSource{"another call key": other, "another secret": otherSecret} {
		if c, _ := mustHide(t, payment, src); c.Equal(ca) {
			t.Errorf("%s gives the same commitment", name)
		}
	}
	o1, _ := a.Opening("payee")
	o2, _ := a.Opening("memo")
	if o1 == o2 {
		t.Error("two fields share an opening")
	}
	if _, err := DerivedOpenings(secret[:31], "k"); !errors.Is(err, ErrShortSecret) {
		t.Errorf("a 31-byte secret: %v", err)
	}
	if _, err := DerivedOpenings(secret, ""); !errors.Is(err, ErrEmptyCallKey) {
		t.Errorf("no call key: %v", err)
	}
}

// The field commitment is the construction docs/commitment.md §7.1 gives,
// computed here from its parts.
func TestFieldCommitmentConstruction(t *testing.T) {
	var o Opening
	for i := range o {
		o[i] = byte(i)
	}
	src := fixedOpenings{"a": o, "b": o}
	c, x := mustHide(t, `{"b":[1,"x"],"a":null}`, src)
	field := func(rest string) [32]byte {
		return sha256.Sum256(append(append([]byte("ledger/v2/field\n"), o[:]...), rest...))
	}
	ca, cb := field(`"a"null`), field(`"b"[1,"x"]`)
	covered := string(`"a"`) + string(ca[:]) + `"b"` + string(cb[:])
	if sum := sha256.Sum256([]byte("ledger/v2/params\n" + covered)); c.Digest != Digest(sum) || c.Size != len(covered) {
		t.Fatalf("digest %s size %d; by hand %x size %d", c.Digest, c.Size, sum, len(covered))
	}
	if got := x.field("a").commitment; got != ca {
		t.Errorf("c_a %x, by hand %x", got, ca)
	}
}

type fixedOpenings map[string]Opening

func (f fixedOpenings) Opening(name string) (Opening, error) {
	o, ok := f[name]
	if !ok {
		return Opening{}, fmt.Errorf("no opening for %q", name)
	}
	return o, nil
}

// Hide refuses exactly what Params refuses, at the same place.
func TestHideRefusesAsParams(t *testing.T) {
	for _, in := range []string{`[]`, `{"a":1,"a":2}`, `{"a":1e400}`, `{"a":"e\u0301"}`, "{\"a\":\"\xff\"}", `{"a":9007199254740992}`, `{"a":1.5}`, `{`} {
		_, perr := Params([]byte(in))
		_, _, herr := Hide([]byte(in), RandomOpenings())
		if perr == nil || herr == nil || perr.Error() != herr.Error() {
			t.Errorf("%q: Params %v, Hide %v", in, perr, herr)
		}
	}
}

// Openings and values stay out of every printed and logged form of a
// disclosure.
func TestDisclosureRedacted(t *testing.T) {
	_, x := mustHide(t, payment, RandomOpenings())
	o := x.field("memo").opening
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("disclosure", "x", x, "opening", o)
	for _, s := range []string{fmt.Sprint(x), fmt.Sprintf("%+v %#v", x, o), fmt.Sprint(o), logged.String()} {
		if strings.Contains(s, "Invoice") || strings.Contains(s, hex.EncodeToString(o[:])) || strings.Contains(s, fmt.Sprint(o[:])) {
			t.Errorf("printed: %s", s)
		}
	}
}

// Malformed files are refused with the pointer of the fault.
func TestParseDisclosureRefusals(t *testing.T) {
	_, x := mustHide(t, `{"a":1}`, RandomOpenings())
	good, _ := x.MarshalJSON()
	for _, tc := range []struct{ name, old, new, pointer string }{
		{"unknown member", `{"disclosure":2`, `{"disclosure":2,"x":1`, ""},
		{"format", `"disclosure":2`, `"disclosure":1`, "/disclosure"},
		{"opening without value", `,"value":1`, ``, "/fields/a"},
		{"upper-case hex", `"commitment":"`, `"commitment":"A`, "/fields/a/commitment"},
		{"size", `"params_size":`, `"params_size":1`, "/params_digest"},
		{"version 1 digest", `"v2:sha256:`, `"sha256:`, "/params_digest"},
		{"duplicate", `"disclosure":2`, `"disclosure":2,"disclosure":2`, "/disclosure"},
	} {
		bad := strings.Replace(string(good), tc.old, tc.new, 1)
		if bad == string(good) {
			t.Fatalf("%s: no change", tc.name)
		}
		_, err := ParseDisclosure([]byte(bad), Domain{})
		var de *DisclosureError
		if !errors.As(err, &de) || de.Kind != ErrDisclosureMalformed || de.Pointer != tc.pointer {
			t.Errorf("%s: %v; want malformed at %q", tc.name, err, tc.pointer)
		}
	}
}
