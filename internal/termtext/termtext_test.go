package termtext

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"agent:résumé-bot for 代理人, 100 %", "agent:résumé-bot for 代理人, 100 %"},
		{"\x1b[2J\x1b[1;1Hverified", `\x1b[2J\x1b[1;1Hverified`},
		{"a\x00b\x7fc", `a\x00b\x7fc`},
		{"line\nnext\r\t", `line\nnext\r\t`},
		{"\u0085\u009b31m", `\u0085\u009b31m`},
		{"abc\u202edcba\u2066\u2069", `abc\u202edcba\u2066\u2069`},
		{"zero\u200bwidth\ufeff", `zero\u200bwidth\ufeff`},
		{"no\u00a0break\u2028", `no\u00a0break\u2028`},
		{"tag\U000e0041", `tag\U000e0041`},
		{"bad\xffutf8\xc3", `bad\xffutf8\xc3`},
		{`already "quoted" \x1b`, `already "quoted" \x1b`}, // printable: unchanged
		{"\ufffd is printable", "\ufffd is printable"},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestQuote(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"ledger.example.com/log", "ledger.example.com/log"},
		{"agent:résumé-bot", "agent:résumé-bot"},
		{"", `""`},
		{"two words", `"two words"`},
		{`say "hi"`, `"say \"hi\""`},
		{`agent\x1b`, `"agent\\x1b"`}, // could pass for an escape: quoted
		{"agent\x1b[31m", `"agent\x1b[31m"`},
		{"agent\u202e", `"agent\u202e"`},
		{"\xff", `"\xff"`},
	} {
		if got := Quote(c.in); got != c.want {
			t.Errorf("Quote(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

// WriteJSON escapes what is not printable as JSON escapes: the text
// decodes to exactly the same values.
func TestWriteJSON(t *testing.T) {
	v := map[string]any{
		"origin": "ledger.example.com/\u009b2J\u202e\x7flog",
		"error":  "entry 3: \x1b[2J \u2028 \U000e0041 é 代",
		"n":      float64(7),
	}
	var b bytes.Buffer
	WriteJSON(&b, v)
	want := `{"error":"entry 3: \u001b[2J \u2028 \udb40\udc41 é 代","n":7,"origin":"ledger.example.com/\u009b2J\u202e\u007flog"}` + "\n"
	if b.String() != want {
		t.Errorf("WriteJSON:\n got %s\nwant %s", b.String(), want)
	}
	var back map[string]any
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || !reflect.DeepEqual(back, v) {
		t.Errorf("decodes to %q, %v; want %q", back, err, v)
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 entries", 1: "1 entry", 2: "2 entries", -1: "-1 entries"} {
		if got := Count(n, "entry", "entries"); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
	if got := Count(uint64(1), "tile", "tiles"); got != "1 tile" {
		t.Errorf("Count(uint64(1)) = %q", got)
	}
}
