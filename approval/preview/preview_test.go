package preview

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/decisionledger/ledger/commit"
)

// render is Render for a test input that must be accepted, checked against
// the invariants every preview keeps.
func render(t testing.TB, doc string) Preview {
	t.Helper()
	p, err := Render([]byte(doc))
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	checkPreview(t, p)
	return p
}

// checkPreview holds a preview to its contract: canonical JSON (a fixed
// point of commit.Canonicalize, which also refuses any string or name not
// in NFC), within Ceiling, digest as specified. The JSON text as a whole
// need not be NFC: the escape "\n" before U+0300 composes to "ǹ" as text
// while the string it encodes is NFC.
func checkPreview(t interface {
	Helper()
	Fatalf(string, ...any)
}, p Preview) {
	t.Helper()
	if len(p.JSON) > Ceiling {
		t.Fatalf("preview is %d bytes, over %d", len(p.JSON), Ceiling)
	}
	again, err := commit.Canonicalize(p.JSON)
	if err != nil || !bytes.Equal(again, p.JSON) {
		t.Fatalf("preview is not canonical JSON (%v): %.200q", err, p.JSON)
	}
	if p.Digest != Digest(p.JSON) {
		t.Fatalf("digest is not Digest(JSON)")
	}
	if p.Pass < 1 || p.Pass > FallbackPass {
		t.Fatalf("pass %d", p.Pass)
	}
}

func mustNotContain(t *testing.T, out []byte, secret string) {
	t.Helper()
	if bytes.Contains(out, []byte(secret)) {
		t.Fatalf("secret fragment %q survives in the preview", secret)
	}
}

// jsonString quotes s as JSON text.
func jsonString(s string) string {
	b, err := commit.AppendString(nil, s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// The article's fixture: a password of more than 10,000 characters becomes
// the marker before clipping; its sibling stays visible and unclipped.
func TestPasswordRedactedBeforeClipping(t *testing.T) {
	secret := "Zq7!" + strings.Repeat("hunter2-", 1250) // 10,004 characters
	doc := `{"password":` + jsonString(secret) + `,"username":"alice"}`
	p := render(t, doc)
	want := `{"password":"[REDACTED]","username":"alice"}`
	if string(p.JSON) != want {
		t.Fatalf("got %s, want %s", p.JSON, want)
	}
	if p.Redacted != 1 || p.Truncated || p.Pass != 1 {
		t.Fatalf("Redacted %d, Truncated %v, Pass %d; want 1, false, 1", p.Redacted, p.Truncated, p.Pass)
	}
	mustNotContain(t, p.JSON, "hunter2")
	mustNotContain(t, p.JSON, "chars]") // redacted, not clipped
}

// bigDocument is the article's nested fixture: a 20,000-character value, a
// 500-item list and 300 extra fields.
func bigDocument() string {
	var b strings.Builder
	b.WriteString(`{"data":{"body":"`)
	b.WriteString(strings.Repeat("lorem ipsum ", 20000/12))
	b.WriteString(strings.Repeat("x", 20000-20000/12*12))
	b.WriteString(`","recipients":[`)
	for i := range 500 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"user%03d@example.com"`, i)
	}
	b.WriteString(`]}`)
	for i := range 300 {
		fmt.Fprintf(&b, `,"field_%03d":"value %d"`, i, i)
	}
	b.WriteString(`}`)
	return b.String()
}

func TestLargeDocument(t *testing.T) {
	doc := bigDocument()
	p := render(t, doc)
	if len(p.JSON) > Ceiling || !p.Truncated {
		t.Fatalf("%d bytes, truncated %v", len(p.JSON), p.Truncated)
	}
	for _, marker := range []string{`…[+19000 chars]"`, `"[+450 items]"]`, `"…":"[+201 fields]"`} {
		if !bytes.Contains(p.JSON, []byte(marker)) {
			t.Errorf("marker %s missing from %.300s", marker, p.JSON)
		}
	}
	// Fields kept are the first in canonical order: data and field_000 to
	// field_098 (1 + 99 = 100); field_099 onward are dropped.
	if !bytes.Contains(p.JSON, []byte(`"field_098":"value 98"`)) || bytes.Contains(p.JSON, []byte(`"field_099"`)) {
		t.Errorf("wrong fields kept")
	}
	if p.Pass != 1 || len(p.JSON) != 4456 {
		t.Errorf("pass %d, %d bytes; want pass 1, 4456 bytes", p.Pass, len(p.JSON))
	}
	for range 3 {
		if q := render(t, doc); !bytes.Equal(q.JSON, p.JSON) || q.Digest != p.Digest {
			t.Fatal("not deterministic")
		}
	}
}

// The article's source-bound fixture: a URL with 9,000 filler characters is
// shortened while a sibling field stays visible.
func TestLongURLShortened(t *testing.T) {
	url := "https://example.com/invite?ref=" + strings.Repeat("a", 9000)
	p := render(t, `{"default_member_role":"viewer","url":`+jsonString(url)+`}`)
	want := `{"default_member_role":"viewer","url":"` + url[:1000] + `…[+8031 chars]"}`
	if string(p.JSON) != want {
		t.Fatalf("got %.200s…", p.JSON)
	}
	if !p.Truncated || p.Redacted != 0 || p.Pass != 1 {
		t.Fatalf("Truncated %v, Redacted %d, Pass %d", p.Truncated, p.Redacted, p.Pass)
	}
}

// A credential that straddles the clipping point is redacted: clipped
// first, its fragment would no longer match the shape (a GitHub token needs
// 36 characters after "ghp_") and would leak.
func TestRedactBeforeClipping(t *testing.T) {
	token := "ghp_" + "Q1w2E3r4T5y6U7i8O9p0AsDfGhJkLzXcVbNm" // 40 characters
	filler := strings.Repeat("b", 980)                       // the token straddles character 1,000
	p := render(t, `{"log":`+jsonString(filler+" "+token+" "+strings.Repeat("c", 500))+`}`)
	mustNotContain(t, p.JSON, "ghp_")
	mustNotContain(t, p.JSON, "Q1w2E3")
	if !bytes.Contains(p.JSON, []byte(" [REDACTED] ccc")) || p.Redacted != 1 {
		t.Fatalf("Redacted %d: %.80q", p.Redacted, p.JSON[980:])
	}

	// Entirely past the clipping point: gone either way, but the count says
	// redaction saw the whole string.
	p = render(t, `{"log":`+jsonString(strings.Repeat("b", 1200)+" "+token)+`}`)
	mustNotContain(t, p.JSON, "ghp_")
	if p.Redacted != 1 {
		t.Fatalf("Redacted %d, want 1: redaction ran after clipping", p.Redacted)
	}
}

// A shortened string is redacted again: "dXNlcjpwYXNzd29yZ" (17
// characters) is not base64, but its first 16 characters, the part left
// before the clipping point, decode to "user:passwor".
func TestRedactAfterClipping(t *testing.T) {
	s := strings.Repeat("x", 977) + " Basic dXNlcjpwYXNzd29yZ yyyy"
	p := render(t, `{"log":`+jsonString(s)+`}`)
	mustNotContain(t, p.JSON, "cjpwYXNz")
	if want := `{"log":"` + strings.Repeat("x", 977) + ` Basic [REDACTED]…[+6 chars]"}`; string(p.JSON) != want || p.Redacted != 0 {
		t.Fatalf("got %.60q…, Redacted %d", p.JSON[len(p.JSON)-60:], p.Redacted)
	}
}

func TestNameRules(t *testing.T) {
	redacted := []string{
		"password", "Password", "user_password", "PASSWD", "passphrase", "pass-code",
		"client_secret", "secretKey", "token", "access_token", "authToken", "X-Auth-Token",
		"id_token", "apiKey", "api_key", "X-API-Key", "api.key", "aws_access_key_id",
		"private_key", "privKey", "credentials", "Credential", "Authorization",
		"proxy-authorization", "auth", "Auth", "auth_header", "cookie", "Set-Cookie",
		"bearer", "session", "session_id", "sessionId", "otp", "ssn", "pin", "PIN",
		"pin_code", "pwd", "jwt", "cvv", "csrf_token", "signing_key",
	}
	kept := []string{
		"author", "authors", "Author", "oauth_provider", "authority", "max_tokens",
		"tokenizer", "keyboard", "pinned", "spin", "pin_message", "passenger", "passage",
		"compass", "secretary_name", "key", "description", "sessions_count", "otpauth_url",
	}
	// "secretary_name" holds "secret": a documented false positive.
	for _, name := range redacted {
		t.Run("redacts/"+name, func(t *testing.T) {
			p := render(t, `{`+jsonString(name)+`:"visible-value-42","~other":1}`)
			if want := `{` + jsonString(name) + `:"[REDACTED]","~other":1}`; string(p.JSON) != want || p.Redacted != 1 {
				t.Fatalf("got %s (Redacted %d), want %s", p.JSON, p.Redacted, want)
			}
		})
	}
	for _, name := range kept {
		t.Run("keeps/"+name, func(t *testing.T) {
			p := render(t, `{`+jsonString(name)+`:"visible-value-42"}`)
			want := `{` + jsonString(name) + `:"visible-value-42"}`
			if name == "secretary_name" {
				want = `{"secretary_name":"[REDACTED]"}`
			}
			if string(p.JSON) != want {
				t.Fatalf("got %s, want %s", p.JSON, want)
			}
		})
	}
	// Whatever the value's type, it becomes the marker.
	p := render(t, `{"password":{"a":[1,2,{"b":null}]},"token":12345,"secret":null,"pin":true}`)
	if want := `{"password":"[REDACTED]","pin":"[REDACTED]","secret":"[REDACTED]","token":"[REDACTED]"}`; string(p.JSON) != want || p.Redacted != 4 {
		t.Fatalf("got %s (Redacted %d)", p.JSON, p.Redacted)
	}
}

func TestShapeRules(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, secret string
	}{
		{"bearer", "Authorization: Bearer abcDEF123456ghiJKL", "Authorization: Bearer [REDACTED]", "abcDEF123456"},
		{"bearer lower case", "bearer 0123456789abcdef0123", "bearer [REDACTED]", "0123456789abcdef"},
		{"basic", "header Basic dXNlcjpwYXNzd29yZA==", "header Basic [REDACTED]", "dXNlcjpw"},
		{"pem", "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n-----END RSA PRIVATE KEY-----\nend", "key:\n[REDACTED]\nend", "MIIBOgIBAAJB"},
		{"pem without end", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "[REDACTED]", "MIIEvQ"},
		{"jwt", "t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk;", "t=[REDACTED];", "eyJzdWIi"},
		{"aws", "id AKIAIOSFODNN7EXAMPLE here", "id [REDACTED] here", "IOSFODNN7"},
		{"stripe", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "[REDACTED]", "4eC39Hq"},
		{"github", "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", "[REDACTED]", "aBcDeFgH"},
		{"slack", "xoxb-123456789012-abcdefghij", "[REDACTED]", "123456789012"},
		{"openai", "key sk-proj-abcdefghijklmnopqrstuv", "key [REDACTED]", "abcdefghijkl"},
		{"google", "AIzaSyA-1234567890abcdefghijklmnopqrstu", "[REDACTED]", "SyA-12345"},
		{"url password", "postgres://app:Sup3rS3cret@db.internal:5432/prod", "postgres://app:[REDACTED]@db.internal:5432/prod", "Sup3rS3cret"},
		{"high entropy", "ref 9fQx2LmZ7pW4vK8sT1yB3nR6cH0dJ5gA end", "ref [REDACTED] end", "9fQx2LmZ"},
		{"two in one", "Bearer abcdefghijklmnop1234 and AKIAIOSFODNN7EXAMPLE", "Bearer [REDACTED] and [REDACTED]", "AKIAIOSF"},

		{"bearer prose", "the bearer bonds are paper", "the bearer bonds are paper", ""},
		{"basic prose", "Basic plan includes support", "Basic plan includes support", ""},
		{"pem public key", "-----BEGIN PUBLIC KEY-----\nMFkw", "-----BEGIN PUBLIC KEY-----\nMFkw", ""},
		{"not a jwt", "eyJustAWord.example.com", "eyJustAWord.example.com", ""},
		{"short aws", "AKIA1234", "AKIA1234", ""},
		{"url without password", "https://alice@example.com/path", "https://alice@example.com/path", ""},
		{"email", "alice@example.com", "alice@example.com", ""},
		{"hex digest", "sha256:e19d67a48f4991a8c6d703eadcc9b39f8cc56e0e1fb9bbdd667daf2ad2f2d0a8", "sha256:e19d67a48f4991a8c6d703eadcc9b39f8cc56e0e1fb9bbdd667daf2ad2f2d0a8", ""},
		{"32 hex", "d41d8cd98f00b204e9800998ecf8427e", "d41d8cd98f00b204e9800998ecf8427e", ""},
		{"uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456-426614174000", ""},
		{"url path", "https://example.com/Reports/2026/Q4/SummaryFinalVersion.pdf", "https://example.com/Reports/2026/Q4/SummaryFinalVersion.pdf", ""},
		{"31 mixed", "9fQx2LmZ7pW4vK8sT1yB3nR6cH0dJ5g", "9fQx2LmZ7pW4vK8sT1yB3nR6cH0dJ5g", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := render(t, `{"note":`+jsonString(tc.in)+`}`)
			if want := `{"note":` + jsonString(tc.want) + `}`; string(p.JSON) != want {
				t.Fatalf("got %s, want %s", p.JSON, want)
			}
			if tc.secret != "" {
				mustNotContain(t, p.JSON, tc.secret)
				if p.Redacted == 0 {
					t.Fatal("Redacted 0")
				}
			} else if p.Redacted != 0 {
				t.Fatalf("Redacted %d", p.Redacted)
			}
		})
	}
}

// A member name with a credential shape is replaced by the marker, numbered
// when several in one object are.
func TestNameShape(t *testing.T) {
	p := render(t, `{"AKIAIOSFODNN7EXAMPLE":1,"ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789":2,"[REDACTED 2]":3,"a":4}`)
	want := `{"[REDACTED 2]":3,"[REDACTED 3]":2,"[REDACTED]":1,"a":4}`
	if string(p.JSON) != want || p.Redacted != 2 {
		t.Fatalf("got %s (Redacted %d), want %s", p.JSON, p.Redacted, want)
	}
}

// Hand-written expected previews for each marker.
func TestMarkers(t *testing.T) {
	var fields, items, cjk strings.Builder
	for i := range 101 {
		fmt.Fprintf(&fields, `"f%03d":%d,`, i, i)
		fmt.Fprintf(&cjk, `"中%03d":%d,`, i, i)
	}
	for i := range 53 {
		fmt.Fprintf(&items, `%d,`, i)
	}
	deep := strings.Repeat(`{"a":`, 9) + "1" + strings.Repeat("}", 9)
	for _, tc := range []struct{ name, in, want string }{
		{"string", `"` + strings.Repeat("é", 1003) + `"`, `"` + strings.Repeat("é", 1000) + `…[+3 chars]"`},
		{"supplementary", `"` + strings.Repeat("😂", 1001) + `"`, `"` + strings.Repeat("😂", 1000) + `…[+1 chars]"`},
		{"list", `[` + strings.TrimSuffix(items.String(), ",") + `]`, `[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,"[+3 items]"]`},
		{"fields", `{` + fields.String() + `"zz":0}`, `{` + fields.String()[:strings.Index(fields.String(), `"f100"`)] + `"…":"[+2 fields]"}`},
		{"fields marker name taken", `{"…":1,` + cjk.String() + `"中999":0}`, `{"…":1,"……":"[+3 fields]",` + cjk.String()[:strings.Index(cjk.String(), `"中099"`)-1] + `}`},
		{"depth", deep, strings.Repeat(`{"a":`, 8) + `"[depth limit]"` + strings.Repeat("}", 8)},
		{"empty containers at depth", `[[[[[[[[[]]]]]]]]]`, `[[[[[[[["[depth limit]"]]]]]]]]`},
		{"small unchanged", `{"b":[true,false,null,-7],"a":"x"}`, `{"a":"x","b":[true,false,null,-7]}`},
		{"fallback", `{` + jsonString(strings.Repeat("n", 9000)) + `:1}`, `{"bytes":9006,"…":"[too large]"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := render(t, tc.in)
			if string(p.JSON) != tc.want {
				t.Fatalf("got  %.400s\nwant %.400s", p.JSON, tc.want)
			}
		})
	}
}

// Later passes win when the first does not fit.
func TestPasses(t *testing.T) {
	// 40 strings of 300 characters: pass 1 gives 12 KB, pass 2 keeps 20
	// items of 256 characters (5.3 KB).
	var b strings.Builder
	b.WriteString("[")
	for i := range 40 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"` + strings.Repeat("v", 300) + `"`)
	}
	b.WriteString("]")
	p := render(t, b.String())
	if p.Pass != 2 || !p.Truncated || !bytes.HasSuffix(p.JSON, []byte(`…[+44 chars]","[+20 items]"]`)) {
		t.Fatalf("pass %d, %d bytes, %.60q", p.Pass, len(p.JSON), p.JSON[len(p.JSON)-60:])
	}
	// Each pass's limits, one by one, against a document that only the
	// given pass fits.
	for i, want := range []Limits{{1000, 50, 100, 8}, {256, 20, 40, 6}, {64, 5, 15, 4}, {16, 2, 6, 3}} {
		if Passes[i] != want {
			t.Errorf("pass %d is %+v, want %+v", i+1, Passes[i], want)
		}
	}
	// Pass 3: 40 members, each 20 strings of 300 characters. Pass 2 gives
	// 40 × 20 × 256 characters; pass 3 keeps 15 members of 5 strings of 64.
	var m strings.Builder
	m.WriteString("{")
	for i := range 40 {
		if i > 0 {
			m.WriteString(",")
		}
		fmt.Fprintf(&m, `"m%02d":[`, i)
		for j := range 20 {
			if j > 0 {
				m.WriteString(",")
			}
			m.WriteString(`"` + strings.Repeat("u", 300) + `"`)
		}
		m.WriteString("]")
	}
	m.WriteString("}")
	p = render(t, m.String())
	item := `"` + strings.Repeat("u", 64) + `…[+236 chars]"`
	member := `[` + strings.Repeat(item+",", 5) + `"[+15 items]"]`
	if want := `{"m00":` + member + `,` + `"m01":` + member; p.Pass != 3 || !bytes.HasPrefix(p.JSON, []byte(want)) || !bytes.HasSuffix(p.JSON, []byte(`"m14":`+member+`,"…":"[+25 fields]"}`)) {
		t.Fatalf("pass %d: %.200s", p.Pass, p.JSON)
	}

	// Pass 4: strings of 2,000 code points in 15 members of 15 objects.
	var o strings.Builder
	o.WriteString("{")
	for i := range 15 {
		if i > 0 {
			o.WriteString(",")
		}
		fmt.Fprintf(&o, `"o%d":{`, i)
		for j := range 15 {
			if j > 0 {
				o.WriteString(",")
			}
			fmt.Fprintf(&o, `"k%d":"%s"`, j, strings.Repeat("w", 2000))
		}
		o.WriteString("}")
	}
	o.WriteString("}")
	if p := render(t, o.String()); p.Pass != 4 {
		t.Fatalf("pass %d, want 4 (%d bytes)", p.Pass, len(p.JSON))
	}
}

// The worked example of the package doc and docs/approvals.md.
func TestDocExample(t *testing.T) {
	p := render(t, `{"to": "alice@example.com", "amount_minor": 1250, "password": "hunter2"}`)
	if want := `{"amount_minor":1250,"password":"[REDACTED]","to":"alice@example.com"}`; string(p.JSON) != want {
		t.Fatalf("got %s", p.JSON)
	}
	if got, want := p.Digest.String(), "sha256:b72aba324b0bdf5c752fa3dd5edf0a729ecef2cc48413ee47bd3f61e13c28a81"; got != want {
		t.Fatalf("digest %s, want %s", got, want)
	}
}

func TestRefusals(t *testing.T) {
	const secret = "Sekr1tValue"
	for _, tc := range []struct {
		name string
		in   string
		kind commit.Kind
		ptr  string
	}{
		{"non-integer", `{"a":{"` + secret + `":1.5}}`, commit.ErrNonInteger, "/a/" + secret},
		{"not nfc", `{"note":"` + secret + "e\u0301" + `"}`, commit.ErrNotNFC, "/note"},
		{"invalid utf8", "{\"note\":\"" + secret + "\xff\"}", commit.ErrInvalidUTF8, "/note"},
		{"duplicate", `{"` + secret + `":1,"` + secret + `":2}`, commit.ErrDuplicateKey, "/" + secret},
		{"syntax", `{"note":"` + secret + `"`, commit.ErrSyntax, ""},
		{"integer range", `[` + secret[:0] + `9007199254740993]`, commit.ErrIntegerRange, "/0"},
		{"secret-shaped name in pointer", `{"AKIAIOSFODNN7EXAMPLE":{"x":0.5}}`, commit.ErrNonInteger, "/[REDACTED]/x"},
		{"too large", `"` + strings.Repeat(secret, MaxInputBytes/len(secret)+1) + `"`, commit.ErrTooLarge, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render([]byte(tc.in))
			var ie *InputError
			if !errors.As(err, &ie) || !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want an *InputError of kind %s", err, tc.kind)
			}
			if ie.Pointer != tc.ptr {
				t.Fatalf("pointer %q, want %q", ie.Pointer, tc.ptr)
			}
			// Names may appear in a pointer; values never do.
			msg := err.Error()
			if tc.ptr == "" || !strings.Contains(tc.ptr, secret) {
				if strings.Contains(msg, secret) || strings.Contains(msg, "AKIA") {
					t.Fatalf("error carries input: %s", msg)
				}
			}
		})
	}
}

// Bounding never cuts inside a redaction marker: a string whose marker
// straddles the clipping point is cut just before the marker, which is
// kept whole or not at all ("[REDA…[+N chars]" would read as neither a
// marker nor the value). A marker that ends at the clipping point stays.
func TestClipKeepsMarkerWhole(t *testing.T) {
	token := "ghp_" + "Q1w2E3r4T5y6U7i8O9p0AsDfGhJkLzXcVbNm" // 40 characters, redacted to the marker
	tail := " " + strings.Repeat("c", 18960)
	for start := 985; start <= 1000; start++ {
		filler := strings.Repeat("b", start-1) + " " // the marker starts at character start
		p := render(t, `{"log":`+jsonString(filler+token+tail)+`}`)
		// Redacted first: filler, the marker (10 characters), then tail.
		redacted := utf8.RuneCountInString(filler + Marker + tail)
		var want string
		switch {
		case start+len(Marker) <= 1000: // the marker fits whole
			keep := 1000 - start - len(Marker)
			want = filler + Marker + tail[:keep] + fmt.Sprintf("…[+%d chars]", redacted-1000)
		default: // the marker straddles character 1,000: cut before it
			want = filler + fmt.Sprintf("…[+%d chars]", redacted-start)
		}
		if got := string(p.JSON); got != `{"log":`+jsonString(want)+`}` {
			t.Errorf("marker at %d: got …%s", start, got[max(0, len(got)-60):])
		}
		if !p.Truncated || p.Redacted != 1 {
			t.Errorf("marker at %d: Truncated %v, Redacted %d", start, p.Truncated, p.Redacted)
		}
	}
}
