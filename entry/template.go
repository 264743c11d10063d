package entry

import (
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
	// Room for the longest index, so that setting it never reallocates.
	b := make([]byte, 0, e.sizeHint()+len("9007199254740991"))
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
