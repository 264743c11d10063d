package entry

import (
	"bytes"
	"encoding/base64"
	"time"

	"github.com/decisionledger/ledger/commit"
)

// maxMembers bounds the members parseFast reads: more than any version
// has (a version 3 decision has 20).
const maxMembers = 24

// attributesDomain is the strict domain for attributes read inside an
// entry: the entry's object encloses them, so they may nest one level less
// deep than a document alone (commit.DefaultMaxDepth counts the entry).
var attributesDomain = commit.Domain{MaxDepth: commit.DefaultMaxDepth - 1}

// member is one member of an entry as parseFast reads it: its name and
// the JSON text of its value, both slices of the entry.
type member struct{ name, value []byte }

// parseFast decodes b, and appends its signed message to buf, when b is
// the canonical encoding of a valid entry whose identifiers need no
// escapes, as nearly every entry is; otherwise it returns nil and
// parseStrict decides (and names what is wrong).
//
// Its acceptance rests on one comparison rather than on checks of its
// own: it reads the members loosely into an Entry, has the encoder write
// that entry's signed message (which checks every field, as Marshal
// does), and accepts only if b is exactly that message's JSON with the
// "sig" member in its sorted place and the signature written as the
// encoder writes it; that is, only if b == e.Marshal(). parseStrict ends
// with the same comparison, and what it checks before is implied by it,
// since the encoder writes only canonical JSON of the strict domain;
// except one thing that depends on where the JSON is: the attributes
// object nests one level deeper inside an entry than alone, so parseFast
// requires it canonical within attributesDomain. The entry returned is
// the one parseStrict returns (TestParseFastDifferential compares them on
// mutated entries of every kind).
//
// It costs one pass over b, the attributes' canonical check, and one
// encoding, against parseStrict's two JSON parses of the whole entry and
// two encodings (one here, one for the signed message).
func parseFast(b, buf []byte) (*Entry, []byte) {
	if len(b) < 2 || len(b) > MaxEntryBytes || b[0] != '{' || b[len(b)-1] != '}' {
		return nil, buf
	}
	var members [maxMembers]member
	n, sigStart, sigEnd := 0, -1, -1
	var last []byte
	for i := 1; ; {
		start := i - 1 // the '{' or ',' before the member
		if i >= len(b) || b[i] != '"' {
			return nil, buf
		}
		j := i + 1
		for j < len(b) && (b[j] >= 'a' && b[j] <= 'z' || b[j] == '_') {
			j++
		}
		if j >= len(b) || b[j] != '"' || j+1 >= len(b) || b[j+1] != ':' {
			return nil, buf
		}
		name := b[i+1 : j]
		// Strictly increasing names: canonical order, no repeats, and so
		// "sig" in the place the encoder puts it.
		if last != nil && bytes.Compare(last, name) >= 0 {
			return nil, buf
		}
		last = name
		end := skipValue(b, j+2)
		if end < 0 || end >= len(b) || n == maxMembers {
			return nil, buf
		}
		members[n] = member{name, b[j+2 : end]}
		n++
		if string(name) == "sig" {
			sigStart, sigEnd = start, end
		}
		if b[end] == '}' {
			if end != len(b)-1 {
				return nil, buf
			}
			break
		}
		if b[end] != ',' {
			return nil, buf
		}
		i = end + 1
	}
	if sigStart <= 0 { // no "sig", or first (no entry begins with it)
		return nil, buf
	}

	e := &Entry{}
	ok := true
	for _, m := range members[:n] {
		v := m.value
		switch string(m.name) {
		case "action":
			e.Action, ok = fastString(v)
		case "approval":
			e.ApprovalID, ok = fastDigest(v)
		case "approver":
			e.Approver, ok = fastString(v)
		case "attributes":
			ok = v[0] == '{'
			if ok && plainCanonical(v) {
				// Two copies in one allocation: the remembered copy has
				// its own array (as SetAttributes keeps it), so that
				// check does not parse them again.
				two := append(append(make([]byte, 0, 2*len(v)), v...), v...)
				e.Attributes, e.canonicalAttributes = two[:len(v):len(v)], two[len(v):]
			} else if ok {
				canonical, err := attributesDomain.Canonicalize(v)
				ok = err == nil && bytes.Equal(canonical, v)
				e.Attributes, e.canonicalAttributes = bytes.Clone(v), canonical
			}
		case "consumption":
			e.Consumption, ok = fastUint(v)
		case "decision":
			if v[0] == '"' {
				var s string
				s, ok = fastString(v)
				e.Decision = Decision(s)
			} else { // a version 5 outcome's decision index
				e.DecisionIndex, ok = fastUint(v)
			}
		case "definition_digest":
			e.Definition, ok = fastDigest(v)
		case "execution_ttl_ms":
			e.ExecutionTTL, ok = fastTTL(v)
		case "index":
			e.Index, ok = fastUint(v)
		case "key_id":
			e.KeyID, ok = fastString(v)
		case "kind":
			var s string
			s, ok = fastString(v)
			e.Kind = Kind(s)
		case "mediator":
			e.Mediator, ok = fastString(v)
		case "operation_id":
			e.OperationID, ok = fastString(v)
		case "origin":
			e.Origin, ok = fastString(v)
		case "params_digest":
			if len(v) > 4 && string(v[:4]) == `"v2:` {
				e.Params.Hiding = true
				v = append([]byte{'"'}, v[4:]...)
			}
			e.Params.Digest, ok = fastDigest(v)
		case "params_size":
			var size uint64
			size, ok = fastUint(v)
			e.Params.Size = int(size)
		case "pending_ttl_ms":
			e.PendingTTL, ok = fastTTL(v)
		case "policies":
			e.Policies, ok = fastStrings(v)
		case "policy_errors":
			e.PolicyErrors, ok = fastStrings(v)
		case "policy_set":
			e.PolicySet, ok = fastDigest(v)
		case "prev":
			e.Prev, ok = fastDigest(v)
		case "preview_digest":
			e.PreviewDigest, ok = fastDigest(v)
		case "principal":
			e.Principal, ok = fastString(v)
		case "request":
			e.Request, ok = fastUint(v)
		case "result":
			var s string
			s, ok = fastString(v)
			e.Result = Result(s)
		case "sig":
			e.Signature, ok = fastSignature(v)
		case "tiers_digest":
			e.Tiers, ok = fastDigest(v)
		case "time":
			e.Time, ok = fastTime(v)
		case "verdict":
			var s string
			s, ok = fastString(v)
			e.Verdict = Verdict(s)
		case "version":
			// Written by the encoder from the other members: the
			// comparison below checks it.
		default:
			ok = false
		}
		if !ok {
			return nil, buf
		}
	}

	m, err := e.AppendSignedMessage(buf)
	if err != nil {
		return nil, buf
	}
	body := m[len(buf)+len(e.separator()):]
	if len(body) != len(b)-(sigEnd-sigStart) || !bytes.Equal(body[:sigStart], b[:sigStart]) || !bytes.Equal(body[sigStart:], b[sigEnd:]) {
		return nil, buf
	}
	return e, m
}

// skipValue returns the offset just after the JSON value that begins at
// b[i], or -1 if it is not one parseFast reads: a string without escapes
// or control characters, a run of digits, an array of such strings, or an
// object (the attributes, whose own text commit.Canonicalize checks). It
// checks no more of the syntax than it needs to find the end: the caller
// compares the whole entry with what the encoder writes.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c >= '0' && c <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i
	case c == '[':
		i++
		if i < len(b) && b[i] == ']' {
			return i + 1
		}
		for {
			if i = skipString(b, i); i < 0 || i >= len(b) {
				return -1
			}
			switch b[i] {
			case ']':
				return i + 1
			case ',':
				i++
			default:
				return -1
			}
		}
	case c == '{':
		depth, inString := 0, false
		for ; i < len(b); i++ {
			switch c := b[i]; {
			case inString && c == '\\':
				i++ // the escaped character cannot end the string
			case c == '"':
				inString = !inString
			case inString:
			case c == '{' || c == '[':
				depth++
			case c == '}' || c == ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	return -1
}

// skipString returns the offset after the string that begins at b[i], or
// -1 if there is none or it holds an escape or a control character.
func skipString(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\' || c < 0x20:
			return -1
		}
	}
	return -1
}

func fastString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	return string(v[1 : len(v)-1]), true
}

// fastStrings reads an array of strings; an empty one is a non-nil empty
// slice, as parseStrict returns it.
func fastStrings(v []byte) ([]string, bool) {
	if v[0] != '[' {
		return nil, false
	}
	count := 0
	for _, c := range v {
		if c == '"' {
			count++
		}
	}
	out := make([]string, 0, count/2)
	for i := 1; i < len(v)-1; {
		end := skipString(v, i)
		if end < 0 {
			return nil, false
		}
		out = append(out, string(v[i+1:end-1]))
		i = end + 1 // the ',' or the final ']'
	}
	return out, true
}

func fastDigest(v []byte) (commit.Digest, bool) {
	var d commit.Digest
	const prefix = `"sha256:`
	if len(v) != len(prefix)+2*len(d)+1 || string(v[:len(prefix)]) != prefix {
		return d, false
	}
	h := v[len(prefix) : len(v)-1]
	for i := range d {
		hi, ok1 := lowerHex(h[2*i])
		lo, ok2 := lowerHex(h[2*i+1])
		if !ok1 || !ok2 {
			return commit.Digest{}, false
		}
		d[i] = hi<<4 | lo
	}
	return d, true
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// fastUint reads an integer in 0..2^53-1, as parseStrict's decoder
// requires; its spelling is left to the comparison.
func fastUint(v []byte) (uint64, bool) {
	if len(v) == 0 || len(v) > 16 {
		return 0, false
	}
	var n uint64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = 10*n + uint64(c-'0')
	}
	return n, n <= commit.MaxSafeInteger
}

func fastTTL(v []byte) (time.Duration, bool) {
	ms, ok := fastUint(v)
	if !ok || ms > uint64(MaxTTL.Milliseconds()) {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// fastTime reads the digits of a time at the places TimeLayout puts them;
// whether they make a valid time written canonically is left to the
// comparison (time.Date normalizes February 30 to March 2, which the
// encoder then writes differently).
func fastTime(v []byte) (time.Time, bool) {
	// "2006-01-02T15:04:05.000000Z", quoted.
	if len(v) != len(TimeLayout)+2 || v[0] != '"' || v[5] != '-' || v[8] != '-' || v[11] != 'T' ||
		v[14] != ':' || v[17] != ':' || v[20] != '.' || v[27] != 'Z' || v[28] != '"' {
		return time.Time{}, false
	}
	ok := true
	num := func(from, to int) int {
		n := 0
		for _, c := range v[from:to] {
			if c < '0' || c > '9' {
				ok = false
			}
			n = 10*n + int(c-'0')
		}
		return n
	}
	t := time.Date(num(1, 5), time.Month(num(6, 8)), num(9, 11), num(12, 14), num(15, 17), num(18, 20),
		1000*num(21, 27), time.UTC)
	return t, ok
}

// fastSignature decodes the base64 of a signature, and requires the text
// to be exactly the encoder's spelling of it.
func fastSignature(v []byte) ([]byte, bool) {
	const n = 64
	var text [88]byte // base64.StdEncoding.EncodedLen(64)
	if len(v) != len(text)+2 || v[0] != '"' {
		return nil, false
	}
	sig := make([]byte, base64.StdEncoding.DecodedLen(len(text)))
	k, err := base64.StdEncoding.Strict().Decode(sig, v[1:len(v)-1])
	if err != nil || k != n {
		return nil, false
	}
	base64.StdEncoding.Encode(text[:], sig[:n])
	if !bytes.Equal(text[:], v[1:len(v)-1]) {
		return nil, false
	}
	return sig[:n:n], true
}

// plainCanonical reports whether v is, for certain, a JSON value in
// canonical form inside attributesDomain, using only the plainest
// spellings: printable ASCII strings without escapes, integers of at most
// 15 digits (all below 2^53), members in strictly increasing byte order
// (for ASCII names the UTF-16 order RFC 8785 sorts by), no whitespace,
// nesting within the domain's bound. It allocates nothing. False means
// only "not this plain": the caller then asks commit.Canonicalize, which
// decides everything else (escapes, other text, other numbers).
func plainCanonical(v []byte) bool {
	end, ok := plainValue(v, 0, 1)
	return ok && end == len(v)
}

// plainValue reads the plain canonical value at v[i] inside a container
// at nesting depth depth (the entry's object is at depth 1, as the domain
// counts it), and returns the offset after it.
func plainValue(v []byte, i, depth int) (int, bool) {
	if i >= len(v) {
		return 0, false
	}
	switch c := v[i]; {
	case c == '"':
		return plainString(v, i)
	case c == '-' || c >= '0' && c <= '9':
		start := i
		if c == '-' {
			i++
		}
		digits := i
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		n := i - digits
		// No leading zero, no -0, at most 15 digits; a fraction or an
		// exponent follows no plain integer.
		if n == 0 || n > 15 || v[digits] == '0' && (n > 1 || digits > start) {
			return 0, false
		}
		return i, true
	case c == 't' && bytes.HasPrefix(v[i:], []byte("true")):
		return i + 4, true
	case c == 'f' && bytes.HasPrefix(v[i:], []byte("false")):
		return i + 5, true
	case c == 'n' && bytes.HasPrefix(v[i:], []byte("null")):
		return i + 4, true
	case c == '[' || c == '{':
		if depth+1 > commit.DefaultMaxDepth {
			return 0, false
		}
		closing := byte(']')
		if c == '{' {
			closing = '}'
		}
		i++
		if i < len(v) && v[i] == closing {
			return i + 1, true
		}
		var last []byte
		for {
			if c == '{' {
				end, ok := plainString(v, i)
				if !ok || end >= len(v) || v[end] != ':' {
					return 0, false
				}
				name := v[i+1 : end-1]
				if last != nil && bytes.Compare(last, name) >= 0 {
					return 0, false
				}
				last, i = name, end+1
			}
			end, ok := plainValue(v, i, depth+1)
			if !ok || end >= len(v) {
				return 0, false
			}
			switch v[end] {
			case closing:
				return end + 1, true
			case ',':
				i = end + 1
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

// plainString reads a string of printable ASCII without escapes.
func plainString(v []byte, i int) (int, bool) {
	if i >= len(v) || v[i] != '"' {
		return 0, false
	}
	for i++; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return 0, false
		}
	}
	return 0, false
}
