package entry

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/decisionledger/ledger/commit"
)

// chainAt is where the values of the members a sequencer sets when it
// chains an entry (index, prev, time) begin in an encoding: index's value
// spans [index, indexEnd); prev's (a digest's text) and time's (TimeLayout)
// have fixed lengths.
type chainAt struct {
	index, indexEnd, prev, time int
}

// Lengths of the fixed-length chained values: a digest's text form and a
// time in TimeLayout for the years 0001-9999 that check allows.
const (
	digestTextLen = len("sha256:") + 2*len(commit.Digest{})
	timeTextLen   = len(TimeLayout)
)

// A Template is an entry of version 1, 2 or 3, checked and encoded before
// it is chained: its signed message with the values of index, prev and
// time still to be set. A sequencer makes each entry's template where the
// record arrives (refusing a bad record there), and then, in its single
// chaining step, sets the three values with Message instead of checking
// and encoding every member again. The message Message returns is byte
// for byte what SignedMessage returns for the entry with those values.
//
// Once the entry is signed, Signed builds the signed entry in the same
// buffer: the entry is encoded once, into one allocation.
//
// A Template is not safe for concurrent use.
type Template struct {
	msg []byte
	sep int // the length of the domain separator msg begins with
	at  chainAt
}

// Template checks e as SignedMessage does and returns its template. It
// refuses a version 4 or 5 entry (whose checks depend on its index) with
// a *FieldError for "kind".
func (e *Entry) Template() (*Template, error) {
	if e.Kind.isVersion4() {
		return nil, fieldError("kind", "a version 4 or 5 entry has no template: its checks depend on its index")
	}
	if err := e.check(); err != nil {
		return nil, err
	}
	sep := e.separator()
	// Room for the longest index, so that setting it never reallocates,
	// and for the signature member Signed inserts.
	b := make([]byte, 0, e.sizeHint()+len("9007199254740991")+len(sigMember))
	b = append(b, sep...)
	t := &Template{sep: len(sep)}
	b, err := e.appendJSON(b, false, &t.at)
	if err != nil {
		return nil, err
	}
	t.msg = b
	if err := t.checkBound(); err != nil {
		return nil, err
	}
	return t, nil
}

// errTemplateSpent is the error of a Template's methods after Signed.
var errTemplateSpent = errors.New("entry: the template is spent: Signed built its entry")

// checkBound refuses, as AppendSignedMessage does, a message whose signed
// entry would exceed MaxEntryBytes.
func (t *Template) checkBound() error {
	if len(t.msg)-t.sep+len(sigMember) > MaxEntryBytes {
		return fieldError("", "the signed entry would be longer than %d bytes", MaxEntryBytes)
	}
	return nil
}

// Message sets the entry's index, time and prev, and returns its signed
// message: what SignedMessage returns for the template's entry with Index,
// Time and Prev set to index, tm and prev, or the error it returns (an
// index beyond 2^53-1, a time outside the years 0001-9999, an entry that
// the longer index makes too long). The message is the template's own
// buffer: it is valid until the next call.
func (t *Template) Message(index uint64, tm time.Time, prev commit.Digest) ([]byte, error) {
	if t.msg == nil {
		return nil, errTemplateSpent
	}
	if index > commit.MaxSafeInteger {
		return nil, fieldError("index", "beyond 2^53-1")
	}
	if tm.IsZero() || tm.Year() < 1 || tm.Year() > 9999 {
		return nil, fieldError("time", "outside years 0001-9999")
	}
	var scratch [digestTextLen]byte // the longest text set: a digest's
	digits := strconv.AppendUint(scratch[:0], index, 10)
	if moved := len(digits) - (t.at.indexEnd - t.at.index); moved != 0 {
		t.msg = slices.Replace(t.msg, t.at.index, t.at.indexEnd, digits...)
		t.at.indexEnd += moved
		t.at.prev += moved
		t.at.time += moved
	} else {
		copy(t.msg[t.at.index:], digits)
	}
	if err := t.checkBound(); err != nil {
		return nil, err
	}
	text, _ := prev.AppendText(scratch[:0])
	copy(t.msg[t.at.prev:t.at.prev+digestTextLen], text)
	// Formatted aside, not in place: AppendFormat writes all nine digits
	// of the nanoseconds before it cuts them to six.
	text = tm.UTC().AppendFormat(scratch[:0], TimeLayout)
	copy(t.msg[t.at.time:t.at.time+timeTextLen], text)
	return t.msg, nil
}

// Signed returns the signed entry of the last message Message returned,
// with signature sig: what SignedEntry returns for that message. It
// builds the entry in the template's buffer, inserting the "sig" member
// and dropping the domain separator, so the message is no longer valid
// and the template is spent: Message and Signed must not be called
// again.
func (t *Template) Signed(sig []byte) ([]byte, error) {
	if len(sig) != ed25519.SignatureSize {
		return nil, fieldError("sig", "not a %d-byte Ed25519 signature", ed25519.SignatureSize)
	}
	if t.msg == nil {
		return nil, errTemplateSpent
	}
	at := sigAt(t.msg[t.sep:])
	if at < 0 {
		return nil, fmt.Errorf("%w: not a signed message", ErrMalformed)
	}
	at += t.sep
	n := len(t.msg)
	// The tail moves right by the member's length (the buffer has room
	// for it, from Template), and the member is written into the gap.
	b := slices.Grow(t.msg, len(sigMember))[:n+len(sigMember)]
	copy(b[at+len(sigMember):], b[at:n])
	k := at + copy(b[at:], `,"sig":"`)
	base64.StdEncoding.Encode(b[k:], sig)
	b[at+len(sigMember)-1] = '"'
	t.msg = nil
	// The separator stays in the buffer, unused; the full slice
	// expression keeps an append to the entry from writing past it.
	entry := b[t.sep:len(b):len(b)]
	if len(entry) > MaxEntryBytes {
		return nil, fieldError("", "longer than %d bytes", MaxEntryBytes)
	}
	return entry, nil
}
