package ledger

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
)

// entryHead is what fsck needs of an entry to check the chain: its
// members index, prev, time, key_id and origin, and its entry hash,
// SHA-256 of the signed message.
//
// scanEntry reads them without decoding the entry: with entry.Parse (a
// strict decoding and a re-encoding) BenchmarkFsck spent 19-23 µs of CPU
// per entry, against 5.6 with scanEntry (docs/performance.md "fsck"),
// while the chain needs five members. Whether the bytes are the
// canonical form of a valid entry is not what the chain check asks: every
// byte of every entry is covered by its leaf hash, which fsck checks
// against the tiles and the signed root, and fsck with Signatures parses
// every entry strictly. A stored entry is canonical (the ledger writes it
// with entry.SignedEntry), and the signed message of a canonical entry is
// its separator followed by its bytes without the "sig" member: the
// inverse of entry.SignedEntry, which is what scanEntry hashes.
type entryHead struct {
	index  uint64
	prev   commit.Digest
	time   int64  // microseconds since the Unix epoch
	keyID  []byte // a window into the entry's bytes: valid while they are
	origin []byte // idem
	hash   commit.Digest
	// sig is the signature member's value, base64 (a window too).
	sig []byte
	// sigFrom and sigTo delimit the member ,"sig":"..." in the entry.
	sigFrom, sigTo int
	version        int
}

func scanError(format string, args ...any) error {
	return fmt.Errorf(format, args...)
}

// scanEntry walks the top-level members of b, a JSON object, skipping
// every value but those of index, key_id, origin, prev, sig, time and
// version, and hashes the signed message with h. It refuses bytes that are
// not a JSON object with those members in the forms the entry format
// writes.
func scanEntry(b []byte, h hash.Hash) (entryHead, error) {
	var e entryHead
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return e, scanError("not a JSON object")
	}
	var have struct{ index, keyID, origin, prev, sig, time, version bool }
	i := 1
	for {
		if i >= len(b) || b[i] != '"' {
			return e, scanError("no member name at byte %d", i)
		}
		nameEnd := bytes.IndexByte(b[i+1:], '"')
		if nameEnd < 0 {
			return e, scanError("unterminated member name at byte %d", i)
		}
		name := b[i+1 : i+1+nameEnd]
		if bytes.IndexByte(name, '\\') >= 0 {
			return e, scanError("escaped member name at byte %d", i)
		}
		memberFrom := i
		i += nameEnd + 2
		if i >= len(b) || b[i] != ':' {
			return e, scanError("no ':' after member %q", name)
		}
		i++
		end, err := skipValue(b, i)
		if err != nil {
			return e, scanError("member %q: %v", name, err)
		}
		v := b[i:end]
		switch string(name) {
		case "index":
			e.index, err = strconv.ParseUint(string(v), 10, 64)
			if err != nil || (len(v) > 1 && v[0] == '0') {
				return e, scanError("index %q is not a whole number", v)
			}
			have.index = true
		case "key_id":
			if e.keyID, err = plainString(v); err != nil {
				return e, scanError("key_id: %v", err)
			}
			have.keyID = true
		case "origin":
			if e.origin, err = plainString(v); err != nil {
				return e, scanError("origin: %v", err)
			}
			have.origin = true
		case "prev":
			s, err := plainString(v)
			hexPart, ok := bytes.CutPrefix(s, []byte("sha256:"))
			if err != nil || !ok || len(hexPart) != 2*len(e.prev) {
				return e, scanError("prev is not a digest")
			}
			if _, err := hex.Decode(e.prev[:], hexPart); err != nil {
				return e, scanError("prev is not a digest")
			}
			have.prev = true
		case "sig":
			if e.sig, err = plainString(v); err != nil {
				return e, scanError("sig: %v", err)
			}
			if memberFrom < 2 || b[memberFrom-1] != ',' {
				return e, scanError("sig is the first member")
			}
			e.sigFrom, e.sigTo = memberFrom-1, end
			have.sig = true
		case "time":
			s, err := plainString(v)
			if err != nil || len(s) != len(entry.TimeLayout) {
				return e, scanError("time is not written as %s", entry.TimeLayout)
			}
			t, err := time.Parse(entry.TimeLayout, string(s))
			if err != nil {
				return e, scanError("time is not written as %s", entry.TimeLayout)
			}
			e.time = t.UnixMicro()
			have.time = true
		case "version":
			n, err := strconv.Atoi(string(v))
			if err != nil || n < entry.Version1 || n > entry.Version5 {
				return e, scanError("version %q is not 1 to %d", v, entry.Version5)
			}
			e.version = n
			have.version = true
		}
		i = end
		if i < len(b) && b[i] == ',' {
			i++
			continue
		}
		if i != len(b)-1 {
			return e, scanError("bytes after member %q", name)
		}
		break
	}
	switch {
	case !have.index:
		return e, scanError("no index")
	case !have.keyID:
		return e, scanError("no key_id")
	case !have.origin:
		return e, scanError("no origin")
	case !have.prev:
		return e, scanError("no prev")
	case !have.sig:
		return e, scanError("no sig")
	case !have.time:
		return e, scanError("no time")
	case !have.version:
		return e, scanError("no version")
	}
	h.Reset()
	h.Write([]byte(separators[e.version]))
	h.Write(b[:e.sigFrom])
	h.Write(b[e.sigTo:])
	h.Sum(e.hash[:0])
	return e, nil
}

// separators[v] is the signed message's prefix in entry format version v.
var separators = [...]string{
	entry.Version1: entry.SignedDomainSeparator,
	entry.Version2: entry.SignedDomainSeparatorV2,
	entry.Version3: entry.SignedDomainSeparatorV3,
	entry.Version4: entry.SignedDomainSeparatorV4,
	entry.Version5: entry.SignedDomainSeparatorV5,
}

// plainString returns the contents of v, a JSON string without escapes:
// every string scanEntry reads is an identifier, a digest, a time or
// base64, which the canonical form writes without one.
func plainString(v []byte) ([]byte, error) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return nil, errors.New("not a string")
	}
	s := v[1 : len(v)-1]
	if bytes.IndexByte(s, '\\') >= 0 {
		return nil, errors.New("an escape where the canonical form has none")
	}
	return s, nil
}

// skipValue returns the end of the JSON value that starts at b[i]: a
// string, an object or an array (nested to any depth), or a number or
// literal. It checks only what it needs to find the end.
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errors.New("no value")
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errors.New("unterminated object or array")
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
		j++
	}
	if j == i {
		return 0, errors.New("no value")
	}
	return j, nil
}

// skipString returns the end of the JSON string that starts at b[i].
func skipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, errors.New("unterminated string")
}
