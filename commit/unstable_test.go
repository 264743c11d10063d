package commit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// frozenList is testdata/conformance/unicode/unstable.json, as gen.mjs
// wrote it from Node's Unicode 17.0 and Python's 14.0.
type frozenList struct {
	Unicode    string   `json:"unicode"`
	Count      int      `json:"count"`
	Ranges     []string `json:"ranges"`
	CodePoints []struct {
		CodePoint string   `json:"code_point"`
		Why       []string `json:"why"`
	} `json:"code_points"`
}

func readFrozenList(t *testing.T) (frozenList, []rune) {
	t.Helper()
	data, err := os.ReadFile("../testdata/conformance/unicode/unstable.json")
	if err != nil {
		t.Fatal(err)
	}
	var l frozenList
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatal(err)
	}
	var rs []rune
	for _, c := range l.CodePoints {
		n, err := strconv.ParseUint(c.CodePoint, 16, 32)
		if err != nil {
			t.Fatalf("code point %q: %v", c.CodePoint, err)
		}
		rs = append(rs, rune(n))
	}
	return l, rs
}

// TestUnstableNormalizationList holds the table to the generated list,
// code point for code point, and to the list's own count and ranges.
func TestUnstableNormalizationList(t *testing.T) {
	l, listed := readFrozenList(t)
	if l.Unicode != "17.0" || l.Count != len(listed) || l.Count != 92 {
		t.Fatalf("unstable.json: unicode %q, count %d, %d code points; want 17.0 and 92", l.Unicode, l.Count, len(listed))
	}
	in := map[rune]bool{}
	for _, r := range listed {
		in[r] = true
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if got := unicode.Is(unstableNormalization, r); got != in[r] {
			t.Errorf("U+%04X: in the table %v, in unstable.json %v", r, got, in[r])
		}
		if !utf8.ValidRune(r) {
			continue
		}
		// The scans skip sequences by their lead byte: each code point,
		// between others, is found exactly when it is listed.
		s := "é" + string(r) + "中"
		if hasUnstableNormalization([]byte(s)) != in[r] || NormalizationStable(s) == in[r] {
			t.Errorf("U+%04X: the scans say %v and stable %v, want %v", r, hasUnstableNormalization([]byte(s)), NormalizationStable(s), in[r])
		}
	}
	var ranges []string
	for i := 0; i < len(listed); {
		j := i
		for j+1 < len(listed) && listed[j+1] == listed[j]+1 {
			j++
		}
		if i == j {
			ranges = append(ranges, fmt.Sprintf("%04X", listed[i]))
		} else {
			ranges = append(ranges, fmt.Sprintf("%04X..%04X", listed[i], listed[j]))
		}
		i = j + 1
	}
	if got, want := strings.Join(ranges, " "), strings.Join(l.Ranges, " "); got != want {
		t.Errorf("ranges of the code points:\n%s\nunstable.json's ranges:\n%s", got, want)
	}
	if listed[0] != firstUnstable {
		t.Errorf("first code point U+%04X, firstUnstable U+%04X", listed[0], firstUnstable)
	}
}

// TestUnstableNormalizationAgainstGo checks the list by a second means: Go's
// own normalization tables (golang.org/x/text, Unicode norm.Version). A
// listed code point that Go's unicode package assigns must be non-inert to
// Go's norm, for the reasons the list gives; one it does not assign must
// be inert, which is the disagreement the list exists for.
func TestUnstableNormalizationAgainstGo(t *testing.T) {
	if unicode.Version != norm.Version {
		t.Skipf("unicode %s and norm %s tables differ", unicode.Version, norm.Version)
	}
	l, listed := readFrozenList(t)
	parts := map[rune]bool{}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if utf8.ValidRune(r) && norm.NFD.PropertiesString(string(r)).Decomposition() != nil {
			for _, q := range norm.NFD.String(string(r)) {
				parts[q] = true
			}
		}
	}
	known := 0
	for i, r := range listed {
		p := norm.NFD.PropertiesString(string(r))
		var why []string
		if p.Decomposition() == nil && p.CCC() != 0 {
			why = append(why, "ccc")
		}
		if p.Decomposition() != nil {
			why = append(why, "decomposition")
		}
		if parts[r] {
			why = append(why, "composition")
		}
		assigned := unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
		want := ""
		if assigned {
			known++
			want = strings.Join(l.CodePoints[i].Why, ",")
		}
		if got := strings.Join(why, ","); got != want {
			t.Errorf("U+%04X: Go's norm %s says %q, want %q", r, norm.Version, got, want)
		}
	}
	t.Logf("Unicode %s assigns %d of the %d listed code points", norm.Version, known, len(listed))
}

// TestUnicodeVersionNotPastFrozen fails when Go's Unicode tables are newer
// than the frozen list: the list is complete only up to Unicode 17.0, and
// a newer version may assign more code points whose normalization older
// implementations cannot judge.
func TestUnicodeVersionNotPastFrozen(t *testing.T) {
	for _, v := range []struct{ what, version string }{{"golang.org/x/text/unicode/norm", norm.Version}, {"unicode", unicode.Version}} {
		if compareVersions(v.version, UnicodeVersionFrozen) > 0 {
			t.Errorf("%s has Unicode %s, newer than the %s the list of unstable normalization (docs/commitment.md §2.4) is frozen at: extend the list to %s first (testdata/conformance/unicode/gen.mjs), in every implementation",
				v.what, v.version, UnicodeVersionFrozen, v.version)
		}
	}
}

func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}

// escapeUTF16 writes r as JSON \u escapes of its UTF-16 code units.
func escapeUTF16(r rune) string {
	if r < 0x10000 {
		return fmt.Sprintf(`\u%04x`, r)
	}
	hi, lo := utf16.EncodeRune(r)
	return fmt.Sprintf(`\u%04x\u%04x`, hi, lo)
}

func TestUnstableNormalizationRefused(t *testing.T) {
	_, listed := readFrozenList(t)
	for _, r := range listed {
		c := string(r)
		cases := []struct {
			name, input, pointer string
			key                  bool
		}{
			{"string", `{"s":"a` + c + `"}`, "/s", false},
			{"escaped", `{"s":"a` + escapeUTF16(r) + `"}`, "/s", false},
			{"name", `{"o":{"` + c + `":1}}`, "/o", true},
			// Refused before NFC is judged: "e\u0301" alone is not_nfc.
			{"also-not-nfc", `{"l":["e` + "\u0301" + c + `"]}`, "/l/0", false},
		}
		for _, tc := range cases {
			for _, f := range []struct {
				what string
				fn   func([]byte) ([]byte, error)
			}{{"Canonicalize", Canonicalize}, {"NormalizeNFC", NormalizeNFC}} {
				_, err := f.fn([]byte(tc.input))
				var de *DomainError
				if !errors.As(err, &de) || de.Kind != ErrUnstableNormalization || de.Pointer != tc.pointer || de.Key != tc.key {
					t.Errorf("U+%04X %s %s: got %v, want unstable_normalization at %q (key %v)", r, tc.name, f.what, err, tc.pointer, tc.key)
				}
			}
		}
		if _, err := ParamsValue(map[string]any{"v": []any{c}}); !errors.Is(err, ErrUnstableNormalization) {
			t.Errorf("U+%04X ParamsValue: got %v", r, err)
		}
		if NormalizationStable("x" + c) {
			t.Errorf("U+%04X: NormalizationStable is true", r)
		}
	}
	// The neighbours of the list are judged by NFC alone.
	for _, s := range []string{"\u0896", "\u0898", "\u1ace", "\u1ade", "\U000105c8", "\U0001e6f6", "é", "\u00c5\uac00"} {
		if _, err := Canonicalize([]byte(`{"s":"` + s + `"}`)); err != nil {
			t.Errorf("%+q: %v", s, err)
		}
		if !NormalizationStable(s) {
			t.Errorf("%+q: NormalizationStable is false", s)
		}
	}
}

// TestCompareVersions holds the comparison TestUnicodeVersionNotPastFrozen
// relies on: it must see 18.0.0 (or 17.1) as newer than 17.0.0.
func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		sign int
	}{{"18.0.0", "17.0.0", 1}, {"17.1", "17.0.0", 1}, {"17.0", "17.0.0", 0}, {"15.0.0", "17.0.0", -1}, {"9.0.0", "17.0.0", -1}} {
		if got := compareVersions(c.a, c.b); (got > 0) != (c.sign > 0) || (got < 0) != (c.sign < 0) {
			t.Errorf("compareVersions(%q, %q) = %d, want sign %d", c.a, c.b, got, c.sign)
		}
	}
}
