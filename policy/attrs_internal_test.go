package policy

import "testing"

func TestNearest(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"kitten", "sitting", 3}, {"", "abc", 3}, {"abc", "", 3}, {"amount", "amount_minor", 6}, {"payee_nme", "payee_known", 4}, {"same", "same", 0}} {
		if d := editDistance(tc.a, tc.b); d != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, d, tc.d)
		}
	}
	for _, tc := range []struct {
		name  string
		names []string
		want  string
	}{
		{"amount", []string{"payee", "currency", "amount_minor"}, "amount_minor"}, // a prefix wins over distance 6 = 6
		{"amount_minor_units", []string{"amount_minor", "currency"}, "amount_minor"},
		{"currenct", []string{"payee", "currency", "amount_minor"}, "currency"},
		{"zz", []string{"b", "a"}, "a"}, // equal distances: byte order
		{"x", nil, ""},
	} {
		if got := nearest(tc.name, tc.names); got != tc.want {
			t.Errorf("nearest(%q, %v) = %q, want %q", tc.name, tc.names, got, tc.want)
		}
	}
}

// scan never panics and never loses its place on text cedar-go refuses
// (locate only runs on parsed text, but parseError scans any file).
func TestScanArbitrary(t *testing.T) {
	for _, src := range []string{"", `"`, `"\`, "a\"\\\"", "é\xff\x00", "// c", "x.y has \"z\" [\"w\"]"} {
		toks := scan([]byte(src))
		_ = attrTokens(toks)
	}
	toks := scan([]byte("// é\n  é context . payee has \"a\"\n"))
	at := attrTokens(toks)
	if len(at) != 2 || at[0].name != "payee" || at[0].line != 2 || at[0].col != 15 || at[1].name != "a" || len(at[1].receiver) != 2 {
		t.Errorf("%+v", at)
	}
}
