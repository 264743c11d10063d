package entry

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"unicode"

	"github.com/decisionledger/ledger/commit"
)

// identifierFields set each identifier of an entry, by its member name.
var identifierFields = map[string]func(*Entry, string){
	"action":    func(e *Entry, s string) { e.Action = s },
	"key_id":    func(e *Entry, s string) { e.KeyID = s },
	"mediator":  func(e *Entry, s string) { e.Mediator = s },
	"origin":    func(e *Entry, s string) { e.Origin = s },
	"policies":  func(e *Entry, s string) { e.Policies = []string{s} },
	"principal": func(e *Entry, s string) { e.Principal = s },
}

// refusedChars are characters no identifier may hold, each with a
// terminal escape sequence or invisible reordering in mind.
var refusedChars = map[string]string{
	"NUL":      "\x00",
	"ESC":      "\x1b[2J\x1b[1;1H", // clear the screen, cursor home
	"NEL":      "\u0085",
	"CSI":      "\u009b31m", // C1 control sequence introducer
	"DEL":      "\x7f",
	"LF":       "\n",
	"RLO":      "\u202e", // right-to-left override (Trojan Source)
	"LRI":      "\u2066", // left-to-right isolate
	"PDI":      "\u2069", // pop directional isolate
	"ZWSP":     "\u200b",
	"ZWJ":      "\u200d",
	"BOM":      "\ufeff",
	"LS":       "\u2028",
	"tag":      "\U000e0041",
	"RLM":      "\u200f",
	"soft-hyp": "\u00ad",
}

// An identifier holding a control or format character is refused with a
// *FieldError naming the member, never the value: when an entry is built
// (SignedMessage, which the ledger calls on append), when it is encoded
// (Marshal) and when it is decoded (Parse).
func TestIdentifierRefusesControlAndFormatCharacters(t *testing.T) {
	const secret = "agent-secret-7"
	for field, set := range identifierFields {
		for name, char := range refusedChars {
			t.Run(field+"/"+name, func(t *testing.T) {
				check := func(what string, err error) {
					t.Helper()
					var fe *FieldError
					if !errors.Is(err, ErrIdentifierChar) || !errors.Is(err, ErrMalformed) ||
						!errors.As(err, &fe) || fe.Field != field {
						t.Fatalf("%s: got %v, want a FieldError on %q that is ErrIdentifierChar", what, err, field)
					}
					if msg := err.Error(); strings.Contains(msg, secret) || strings.ContainsRune(msg, []rune(char)[0]) {
						t.Errorf("%s: the error repeats the value: %q", what, msg)
					}
				}
				value := secret + char + "x"

				e, _ := sampleEntry(t)
				set(e, value)
				_, err := e.SignedMessage()
				check("SignedMessage", err)
				_, err = e.Marshal()
				check("Marshal", err)
				_, err = e.Sign(e.KeyID, func([]byte) []byte { t.Fatal("signed"); return nil })
				if field != "key_id" { // Sign sets the key id itself
					check("Sign", err)
				}

				// The canonical bytes of such an entry, written by hand: the
				// encoder refuses to write them.
				e, _ = sampleEntry(t)
				set(e, "PLACEHOLDER")
				b, err := e.Marshal()
				if err != nil {
					t.Fatal(err)
				}
				quoted, err := commit.AppendString(nil, value)
				if err != nil {
					t.Fatal(err)
				}
				b = bytes.Replace(b, []byte(`"PLACEHOLDER"`), quoted, 1)
				if c, err := commit.Canonicalize(b); err != nil || !bytes.Equal(c, b) {
					t.Fatalf("hand-written entry not canonical: %v", err)
				}
				_, err = Parse(b)
				check("Parse", err)
			})
		}
	}
}

// Identifiers in other scripts and with other punctuation stay valid, and
// attribute values, which are data, may hold anything the strict JSON
// domain admits, control and format characters included.
func TestIdentifierAcceptsText(t *testing.T) {
	for _, s := range []string{
		"agent:résumé-bot", "агент-7", "代理人/東京", "mediator eu 1", `agent\x1b`, "ü+1",
		"agent:😀", "a\u00a0b", // no-break space: visible, not a format character
	} {
		for field, set := range identifierFields {
			e, priv := sampleEntry(t)
			set(e, s)
			if err := e.SetAttributes([]byte(`{"note":"\u001b[31mred\u009b0m\u202eesrever\u0000\u2066"}`)); err != nil {
				t.Fatal(err)
			}
			e.Signature = nil
			if _, err := e.Sign(e.KeyID, func(m []byte) []byte { return ed25519.Sign(priv, m) }); err != nil {
				t.Errorf("%s %q: Sign: %v", field, s, err)
				continue
			}
			b, err := e.Marshal()
			if err != nil {
				t.Errorf("%s %q: Marshal: %v", field, s, err)
				continue
			}
			got, err := Parse(b)
			if err != nil {
				t.Errorf("%s %q: Parse: %v", field, s, err)
				continue
			}
			if err := got.Verify(e.KeyID, priv.Public().(ed25519.PublicKey)); err != nil {
				t.Errorf("%s %q: Verify: %v", field, s, err)
			}
		}
	}
}

// The refused set is written out; it is the control characters, the
// format characters of Unicode 15.0 and U+2028, U+2029, and refusedRune
// agrees with it at every code point.
func TestRefusedTable(t *testing.T) {
	want := func(r rune) bool {
		return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == 0x2028 || r == 0x2029
	}
	var differ []rune
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue // surrogates are not in UTF-8
		}
		in := unicode.Is(refused, r)
		if _, _, found := refusedRune("a" + string(r)); found != in {
			t.Fatalf("refusedRune(%U) = %v, the table says %v", r, found, in)
		}
		if unicode.Is(unicode.Cc, r) && !in {
			t.Fatalf("control character %U is not refused", r)
		}
		if in != want(r) {
			differ = append(differ, r)
		}
	}
	if len(differ) > 0 {
		if unicode.Version == "15.0.0" {
			t.Errorf("the table and Unicode 15.0 Cc+Cf+Zl+Zp differ at %U", differ)
		} else {
			// The list is frozen at Unicode 15.0 (docs/entry.md §1.1):
			// a newer Unicode may add format characters, which entries
			// keep accepting until a new format version says otherwise.
			t.Logf("Unicode %s: the table and Cc+Cf+Zl+Zp differ at %U", unicode.Version, differ)
		}
	}
	if r, at, found := refusedRune("agent:résumé\u202e-bot"); !found || r != 0x202e || at != len("agent:résumé") {
		t.Errorf("refusedRune = %U, %d, %v", r, at, found)
	}
}
