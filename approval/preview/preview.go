package preview

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/decisionledger/ledger/commit"
	"golang.org/x/text/unicode/norm"
)

// DomainSeparator prefixes the canonical preview in its digest, so that a
// preview digest is never taken for a parameter digest or an entry hash.
// A future format changes this string.
const DomainSeparator = "ledger/v1/preview\n"

// MaxInputBytes bounds the preview document Render accepts.
const MaxInputBytes = 1 << 20

// Ceiling bounds the canonical JSON of every preview, in bytes.
const Ceiling = 8192

// Limits are the bounds of one tightening pass.
type Limits struct {
	Chars  int // code points kept of each string
	Items  int // elements kept of each array
	Fields int // members kept of each object, the first in canonical order
	Depth  int // arrays and objects nested deeper than this are replaced
}

// Passes are the tightening passes, tried in order; the first whose output
// fits Ceiling wins.
var Passes = [...]Limits{
	{Chars: 1000, Items: 50, Fields: 100, Depth: 8},
	{Chars: 256, Items: 20, Fields: 40, Depth: 6},
	{Chars: 64, Items: 5, Fields: 15, Depth: 4},
	{Chars: 16, Items: 2, Fields: 6, Depth: 3},
}

// FallbackPass is Preview.Pass when no pass fits and the preview is the
// fallback object.
const FallbackPass = len(Passes) + 1

// Markers written by bounding. %d is a count in decimal.
const (
	DepthMarker    = "[depth limit]"
	charsMarker    = "…[+%d chars]"
	itemsMarker    = "[+%d items]"
	fieldsMarker   = "[+%d fields]"
	fieldsName     = "…"
	TooLargeMarker = "[too large]"
)

// Preview is a redacted, bounded preview document.
type Preview struct {
	// JSON is the preview's RFC 8785 canonical form, at most Ceiling bytes.
	JSON []byte
	// Digest is SHA-256(DomainSeparator || JSON).
	Digest commit.Digest
	// Redacted counts the replacements made by redaction: member values
	// redacted by name, member names and parts of strings redacted by
	// shape. It counts them in the whole document, before bounding.
	Redacted int
	// Truncated reports whether bounding left out anything (a marker was
	// written) or the preview is the fallback.
	Truncated bool
	// Pass is the winning pass, 1 to len(Passes), or FallbackPass.
	Pass int
}

// InputError reports a preview document outside the strict domain of
// package commit. It names where the fault is and never the value; a
// member name in Pointer that has a credential shape is replaced by
// Marker.
type InputError struct {
	Kind    commit.Kind
	Pointer string // RFC 6901
	Key     bool   // the fault is in a member name of the object at Pointer
	Offset  int    // byte offset in the input
}

func (e *InputError) Error() string {
	where := "at"
	if e.Key {
		where = "in a member name of the object at"
	}
	return fmt.Sprintf("preview: %s %s %s (byte %d)", e.Kind, where, strconv.Quote(e.Pointer), e.Offset)
}

// Unwrap returns the Kind, so errors.Is(err, commit.ErrNotNFC) works.
func (e *InputError) Unwrap() error { return e.Kind }

// errInternal is a preview that failed its own canonical check: a bug.
var errInternal = errors.New("preview: internal error")

// Render redacts doc, then bounds it, and returns the preview and its
// digest. doc must be one JSON value in commit's strict domain, at most
// MaxInputBytes long; anything else is refused with an *InputError.
func Render(doc []byte) (Preview, error) {
	canonical, err := commit.Domain{MaxBytes: MaxInputBytes}.Canonicalize(doc)
	if err != nil {
		var de *commit.DomainError
		if !errors.As(err, &de) {
			return Preview{}, errInternal
		}
		return Preview{}, &InputError{Kind: de.Kind, Pointer: safePointer(de.Pointer), Key: de.Key, Offset: de.Offset}
	}
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return Preview{}, errInternal
	}
	v := fromJSON(raw)
	redacted := redactValue(&v)

	p := Preview{Redacted: redacted}
	for i, limits := range Passes {
		w := writer{limits: limits}
		w.value(&v, 0)
		if !w.over {
			p.JSON, p.Truncated, p.Pass = w.buf, w.truncated, i+1
			break
		}
	}
	if p.Pass == 0 {
		size := len(appendValue(nil, &v))
		p.JSON = fmt.Appendf(nil, `{"bytes":%d,"…":%q}`, size, TooLargeMarker)
		p.Truncated, p.Pass = true, FallbackPass
	}
	if again, err := commit.Canonicalize(p.JSON); err != nil || !bytes.Equal(again, p.JSON) || len(p.JSON) > Ceiling {
		return Preview{}, errInternal
	}
	p.Digest = Digest(p.JSON)
	return p, nil
}

// Digest returns SHA-256(DomainSeparator || preview).
func Digest(preview []byte) commit.Digest {
	h := sha256.New()
	h.Write([]byte(DomainSeparator))
	h.Write(preview)
	var d commit.Digest
	h.Sum(d[:0])
	return d
}

// safePointer replaces each segment of an RFC 6901 pointer that has a
// credential shape by Marker.
func safePointer(p string) string {
	if p == "" {
		return p
	}
	segs := strings.Split(p[1:], "/")
	for i, s := range segs {
		name := strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
		if secretShaped(name) {
			segs[i] = Marker
		}
	}
	return "/" + strings.Join(segs, "/")
}

// value is a JSON value: nil, bool, json.Number, string, []value's
// holder array, or object.
type value struct {
	v   any // nil, bool, json.Number, string
	arr []value
	obj []member // in canonical order
	typ byte     // 's'calar, 'a'rray, 'o'bject
}

type member struct {
	name    string
	v       value
	renamed bool // the name had a credential shape and awaits its Marker name
}

func fromJSON(x any) value {
	switch x := x.(type) {
	case []any:
		a := make([]value, len(x))
		for i := range x {
			a[i] = fromJSON(x[i])
		}
		return value{typ: 'a', arr: a}
	case map[string]any:
		o := make([]member, 0, len(x))
		for k, e := range x {
			o = append(o, member{name: k, v: fromJSON(e)})
		}
		sortMembers(o)
		return value{typ: 'o', obj: o}
	}
	return value{typ: 's', v: x}
}

// compareUTF16 orders member names as RFC 8785 does: by UTF-16 code units.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return utf16Key(ra) - utf16Key(rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// utf16Key maps a code point to a key that orders as its first UTF-16 code
// unit, then the rest: supplementary characters sort among the surrogates.
func utf16Key(r rune) int {
	if r < 0x10000 {
		return int(r) << 10
	}
	hi, lo := utf16.EncodeRune(r)
	return int(hi)<<10 | int(lo-0xDC00)
}

func sortMembers(o []member) {
	slices.SortFunc(o, func(a, b member) int { return compareUTF16(a.name, b.name) })
}

// redactValue redacts v in place and returns the number of replacements.
func redactValue(v *value) int {
	n := 0
	switch v.typ {
	case 's':
		if s, ok := v.v.(string); ok {
			var k int
			v.v, k = redactString(s)
			n += k
		}
	case 'a':
		for i := range v.arr {
			n += redactValue(&v.arr[i])
		}
	case 'o':
		renamed := false
		for i := range v.obj {
			m := &v.obj[i]
			if secretShaped(m.name) {
				m.renamed, renamed = true, true
				n++
			} else if sensitiveName(m.name) {
				m.v = value{typ: 's', v: Marker}
				n++
				continue
			}
			n += redactValue(&m.v)
		}
		if renamed {
			nameRedacted(v.obj)
			sortMembers(v.obj)
		}
	}
	return n
}

// nameRedacted names the members whose names were redacted by shape:
// "[REDACTED]", then "[REDACTED 2]", "[REDACTED 3]", ... in the canonical
// order of the names they had, skipping names the object already holds.
func nameRedacted(o []member) {
	taken := make(map[string]bool, len(o))
	for _, m := range o {
		if !m.renamed {
			taken[m.name] = true
		}
	}
	k := 0
	for i := range o {
		if !o[i].renamed {
			continue
		}
		o[i].renamed = false
		for {
			k++
			name := Marker
			if k > 1 {
				name = fmt.Sprintf("[REDACTED %d]", k)
			}
			if !taken[name] {
				o[i].name, taken[name] = name, true
				break
			}
		}
	}
}

// appendValue writes v in canonical form, unbounded.
func appendValue(b []byte, v *value) []byte {
	w := writer{limits: Limits{Chars: 1 << 30, Items: 1 << 30, Fields: 1 << 30, Depth: 1 << 30}, unbounded: true}
	w.buf = b
	w.value(v, 0)
	return w.buf
}

// writer writes a value bounded by one pass's limits, and stops as soon as
// the output passes Ceiling.
type writer struct {
	limits    Limits
	buf       []byte
	over      bool
	truncated bool
	unbounded bool
}

func (w *writer) text(s string) {
	b, err := commit.AppendString(w.buf, s)
	if err != nil {
		// Inputs and markers are NFC and clipText keeps them so.
		w.over = true
		return
	}
	w.buf = b
	if !w.unbounded && len(w.buf) > Ceiling {
		w.over = true
	}
}

func (w *writer) value(v *value, depth int) {
	if w.over {
		return
	}
	switch v.typ {
	case 'a', 'o':
		if depth+1 > w.limits.Depth {
			w.truncated = true
			w.text(DepthMarker)
			return
		}
	}
	switch v.typ {
	case 's':
		switch x := v.v.(type) {
		case nil:
			w.buf = append(w.buf, "null"...)
		case bool:
			w.buf = strconv.AppendBool(w.buf, x)
		case json.Number:
			w.buf = append(w.buf, x...)
		case string:
			s, clipped := clipText(x, w.limits.Chars)
			if clipped {
				// A clipped fragment can take a shape the whole string
				// did not have (base64 that becomes decodable).
				s, _ = redactString(s)
				w.truncated = true
			}
			w.text(s)
		}
	case 'a':
		w.buf = append(w.buf, '[')
		for i := range v.arr {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			if i == w.limits.Items {
				w.truncated = true
				w.text(fmt.Sprintf(itemsMarker, len(v.arr)-i))
				break
			}
			w.value(&v.arr[i], depth+1)
		}
		w.buf = append(w.buf, ']')
	case 'o':
		kept := v.obj
		var marker *member
		if len(kept) > w.limits.Fields {
			kept = kept[:w.limits.Fields]
			name := fieldsName
			for slices.ContainsFunc(kept, func(m member) bool { return m.name == name }) {
				name += fieldsName
			}
			marker = &member{name: name, v: value{typ: 's', v: fmt.Sprintf(fieldsMarker, len(v.obj)-len(kept))}}
			w.truncated = true
		}
		w.buf = append(w.buf, '{')
		first := true
		emit := func(m *member) {
			if !first {
				w.buf = append(w.buf, ',')
			}
			first = false
			w.text(m.name)
			w.buf = append(w.buf, ':')
			w.value(&m.v, depth+1)
		}
		for i := range kept {
			if marker != nil && compareUTF16(marker.name, kept[i].name) < 0 {
				emit(marker)
				marker = nil
			}
			emit(&kept[i])
		}
		if marker != nil {
			emit(marker)
		}
		w.buf = append(w.buf, '}')
	}
	if !w.unbounded && len(w.buf) > Ceiling {
		w.over = true
	}
}

// clipText keeps the first limit code points of s followed by
// "…[+N chars]", N the number of code points left out. A cut that would
// fall inside a redaction marker falls just before it instead, so that a
// marker is kept whole or not at all. Should the kept prefix and the
// marker not be NFC together, one code point fewer is kept, until they
// are.
func clipText(s string, limit int) (string, bool) {
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s, false
	}
	cut := 0
	for i := 0; i < limit; i++ {
		_, size := utf8.DecodeRuneInString(s[cut:])
		cut += size
	}
	kept := limit
	for {
		if at := markerAcross(s, cut); at >= 0 {
			kept -= len(s[at:cut]) // the marker is ASCII: bytes are code points
			cut = at
		}
		out := s[:cut] + fmt.Sprintf(charsMarker, n-kept)
		if norm.NFC.IsNormalString(out) || cut == 0 {
			return out, true
		}
		_, size := utf8.DecodeLastRuneInString(s[:cut])
		cut -= size
		kept--
	}
}

// markerAcross returns the start of the Marker in s that the byte offset
// cut falls strictly inside of, or -1. Marker cannot overlap itself, so
// at most one occurrence spans cut.
func markerAcross(s string, cut int) int {
	lo, hi := max(0, cut-len(Marker)+1), min(len(s), cut+len(Marker)-1)
	if lo >= hi {
		return -1
	}
	if i := strings.Index(s[lo:hi], Marker); i >= 0 {
		return lo + i
	}
	return -1
}
