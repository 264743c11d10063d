// Package progress draws the progress line of a long run (an export
// verified, a store checked) on a terminal, and nowhere else.
//
// # The line
//
// A Meter counts a run of items, of a known total or not. On a terminal it
// shows one line, rewritten in place: a carriage return, the text, then
// "\x1b[K" (erase to the end of the line, so that a shorter line leaves
// nothing of a longer one):
//
//	ledger-verify: export: 120000 of 500000 entries (24%), 85000 entries/s, 4s left
//
// The percent is rounded down; the rate is the run's so far (items since
// New over the time since New), the time left the remaining items at that
// rate, rounded to the second. Rate and time left appear once the run is a
// second old, before which they mean little. With the total unknown (0)
// the line is "LABEL: 120000 entries, 85000 entries/s". A Meter of bytes
// (unit "bytes") shows binary multiples: "1.5 MiB of 12.0 MiB (12%),
// 3.2 MiB/s, 3s left". A line wider than the terminal is cut to its width
// less one column, so that it never wraps (a wrapped line cannot be
// rewritten).
//
// The line is drawn at most four times a second, and not before the run
// is a second old: a run that ends within its first second prints nothing
// at all. When the run ends, by Finish or by an update that reaches the
// total, a line drawn is erased ("\r\x1b[K"), so that whatever the command
// prints next starts at the beginning of a clean line.
//
// # Where it draws
//
// Only on a terminal: the writer must be an *os.File whose descriptor
// answers the terminal ioctl (TCGETS on Linux, TIOCGETA on macOS and the
// BSDs; elsewhere nothing is a terminal). The os.ModeCharDevice test is not
// enough: /dev/null is a character device but not a terminal. Never on a
// pipe or a file, whatever the environment says; not when TERM is "dumb"
// (no "\x1b[K").
//
// The environment variable LEDGER_PROGRESS chooses, on a terminal:
//
//	unset, "auto"  as above
//	"off"          never draw
//	"now"          draw from the first update, without the one-second
//	               wait, even when that update is the last (for a
//	               demonstration, or a test of a short run)
//
// Any other value is taken as "auto".
//
// # Cost
//
// New returns nil when the meter would never draw, and a nil *Meter's
// methods do nothing; its Hook is nil, so that a loop calling a hook only
// when set does not even make the call. A Meter's Update reads the clock
// only every so many calls, a stride adapted to the rate so that it looks
// about twenty times a second; between, an update stores two numbers and
// counts down.
//
// A Meter is not safe for concurrent use: its updates and Finish MUST come
// from one goroutine at a time, in order (verify.ExportOptions.Progress is
// called so).
package progress

import (
	"io"
	"os"
	"strconv"
	"time"
)

// Env is the environment variable that chooses whether a Meter draws.
const Env = "LEDGER_PROGRESS"

const (
	quiet     = time.Second            // no line before the run is this old
	redraw    = 250 * time.Millisecond // at most four lines a second
	lookEvery = 50 * time.Millisecond  // how often Update aims to read the clock
	maxStride = 1 << 16
)

// Meter is the progress line of one run. The zero value is not usable:
// make one with New.
type Meter struct {
	w     io.Writer
	label string
	unit  string
	bytes bool
	width int // the terminal's columns; 0: unknown, nothing cut
	now   func() time.Time
	wait  time.Duration // before the first line: quiet, or 0 for "now"

	start       time.Time
	done, total uint64

	skip   uint64    // updates left before the clock is read again
	stride uint64    // updates between readings of the clock
	looked time.Time // when the clock was last read
	drawn  time.Time // when the line was last drawn
	shown  bool      // a line is on the terminal, not yet erased
	ended  bool      // Finish was called
	buf    []byte
}

// New returns a Meter drawing on w, whose line starts with label (the
// command's own words, such as "ledger-verify: export", not input) and
// counts unit (such as "entries"; "bytes" shows binary multiples). It
// returns nil, a Meter that never draws, when w is not a terminal, TERM is
// "dumb" or LEDGER_PROGRESS is "off". The run starts now.
func New(w io.Writer, label, unit string) *Meter {
	mode := os.Getenv(Env)
	if mode == "off" || os.Getenv("TERM") == "dumb" {
		return nil
	}
	f, ok := w.(*os.File)
	if !ok || !isTerminal(int(f.Fd())) {
		return nil
	}
	return newMeter(w, label, unit, terminalWidth(int(f.Fd())), time.Now, mode == "now")
}

// IsTerminal reports whether w is a terminal as New tests it.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(int(f.Fd()))
}

func newMeter(w io.Writer, label, unit string, width int, now func() time.Time, immediate bool) *Meter {
	m := &Meter{w: w, label: label, unit: unit, bytes: unit == "bytes", width: width, now: now, wait: quiet}
	if immediate {
		m.wait = 0
	}
	m.start = now()
	m.looked = m.start
	return m
}

// Update says that done of total items are done; total 0 means unknown.
// An update with done at least a known total ends the run's line as
// Finish does.
func (m *Meter) Update(done, total uint64) {
	if m == nil {
		return
	}
	m.done, m.total = done, total
	if m.skip > 0 && (total == 0 || done < total) {
		m.skip--
		return
	}
	m.look()
}

// Hook returns m.Update, or nil for a nil Meter: a hook, such as
// verify.ExportOptions.Progress, that the caller skips when nothing would
// draw.
func (m *Meter) Hook() func(done, total uint64) {
	if m == nil {
		return nil
	}
	return m.Update
}

// Finish ends the run: a line drawn is erased. Later updates draw nothing.
func (m *Meter) Finish() {
	if m == nil {
		return
	}
	m.ended = true
	m.erase()
}

// look reads the clock, sets the next stride, and draws if it is time.
func (m *Meter) look() {
	if m.ended {
		return
	}
	t := m.now()
	calls := m.stride + 1
	if since := t.Sub(m.looked); since > 0 {
		// The updates in lookEvery at the rate since the last reading,
		// growing at most twofold so that one fast burst cannot blind it.
		per := uint64(float64(calls) * float64(lookEvery) / float64(since))
		m.stride = min(max(per, 1)-1, 2*calls, maxStride)
	} else {
		m.stride = min(2*calls, maxStride)
	}
	m.skip = m.stride
	m.looked = t
	end := m.total > 0 && m.done >= m.total
	if end && (m.wait > 0 || !m.drawn.IsZero()) {
		m.erase()
		return
	}
	if t.Sub(m.start) < m.wait || (m.shown && t.Sub(m.drawn) < redraw) {
		return
	}
	m.draw(t)
	if end { // "now", and the first update is the last: drawn once, erased
		m.erase()
	}
}

func (m *Meter) draw(t time.Time) {
	m.drawn = t
	m.shown = true
	m.buf = append(m.buf[:0], '\r')
	line := m.line(t.Sub(m.start))
	if m.width > 1 && len(line) > m.width-1 {
		line = line[:m.width-1] // the label and counts are ASCII
	}
	m.buf = append(m.buf, line...)
	m.buf = append(m.buf, "\x1b[K"...)
	m.w.Write(m.buf)
}

func (m *Meter) erase() {
	if m.shown {
		m.shown = false
		io.WriteString(m.w, "\r\x1b[K")
	}
}

// line is the text of the line after elapsed of the run.
func (m *Meter) line(elapsed time.Duration) string {
	b := append([]byte(m.label), ": "...)
	b = m.amount(b, m.done)
	if m.total > 0 {
		b = append(b, " of "...)
		b = m.amount(b, m.total)
	}
	if !m.bytes {
		b = append(b, ' ')
		b = append(b, m.unit...)
	}
	if m.total > 0 {
		pct := min(uint64(float64(m.done)/float64(m.total)*100), 100)
		b = append(b, " ("...)
		b = strconv.AppendUint(b, pct, 10)
		b = append(b, "%)"...)
	}
	if elapsed < quiet {
		return string(b)
	}
	rate := float64(m.done) / elapsed.Seconds()
	b = append(b, ", "...)
	if m.bytes {
		b = appendBytes(b, rate)
		b = append(b, "/s"...)
	} else {
		b = strconv.AppendFloat(b, rate, 'f', 0, 64)
		b = append(b, ' ')
		b = append(b, m.unit...)
		b = append(b, "/s"...)
	}
	if m.total > 0 && m.done > 0 && m.done < m.total {
		left := time.Duration(float64(m.total-m.done) / rate * float64(time.Second))
		b = append(b, ", "...)
		b = append(b, left.Round(time.Second).String()...)
		b = append(b, " left"...)
	}
	return string(b)
}

func (m *Meter) amount(b []byte, n uint64) []byte {
	if m.bytes {
		return appendBytes(b, float64(n))
	}
	return strconv.AppendUint(b, n, 10)
}

// appendBytes appends n bytes in binary multiples: "512 B", "1.5 MiB".
func appendBytes(b []byte, n float64) []byte {
	if n < 1024 {
		b = strconv.AppendFloat(b, n, 'f', 0, 64)
		return append(b, " B"...)
	}
	const units = "KMGTPE"
	i := 0
	for n /= 1024; n >= 1024 && i < len(units)-1; n /= 1024 {
		i++
	}
	b = strconv.AppendFloat(b, n, 'f', 1, 64)
	return append(b, ' ', units[i], 'i', 'B')
}
