package progress

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/ptytest"
)

// clock is a fake clock: a Meter reads it, the test moves it.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTest(unit string, total uint64, immediate bool) (*Meter, *bytes.Buffer, *clock) {
	var out bytes.Buffer
	c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	return newMeter(&out, "cmd: run", unit, 0, c.now, immediate), &out, c
}

// run updates m every step for n items of total (0: unknown), moving the
// clock step before each update.
func run(m *Meter, c *clock, n, total uint64, step time.Duration) {
	for i := uint64(1); i <= n; i++ {
		c.t = c.t.Add(step)
		m.Update(i, total)
	}
}

// lines are the lines drawn in out, each without its "\r" and "\x1b[K".
func lines(out string) []string {
	var l []string
	for _, s := range strings.Split(out, "\r") {
		if s = strings.TrimSuffix(s, "\x1b[K"); s != "" {
			l = append(l, s)
		}
	}
	return l
}

func TestLine(t *testing.T) {
	for _, tc := range []struct {
		unit        string
		done, total uint64
		elapsed     time.Duration
		want        string
	}{
		{"entries", 500, 1000, 2 * time.Second, "cmd: run: 500 of 1000 entries (50%), 250 entries/s, 2s left"},
		{"entries", 1, 3, 3 * time.Second, "cmd: run: 1 of 3 entries (33%), 0 entries/s, 6s left"},
		{"entries", 999999, 1000000, 10 * time.Second, "cmd: run: 999999 of 1000000 entries (99%), 100000 entries/s, 0s left"},
		{"entries", 0, 1000, 2 * time.Second, "cmd: run: 0 of 1000 entries (0%), 0 entries/s"},
		{"entries", 120000, 0, 4 * time.Second, "cmd: run: 120000 entries, 30000 entries/s"},
		{"entries", 5, 10, 500 * time.Millisecond, "cmd: run: 5 of 10 entries (50%)"},
		{"entries", 5, 0, 0, "cmd: run: 5 entries"},
		{"bytes", 3 << 19, 12 << 20, 2 * time.Second, "cmd: run: 1.5 MiB of 12.0 MiB (12%), 768.0 KiB/s, 14s left"},
		{"bytes", 512, 0, time.Second, "cmd: run: 512 B, 512 B/s"},
		{"entries", 90, 100, 90 * time.Minute, "cmd: run: 90 of 100 entries (90%), 0 entries/s, 10m0s left"},
	} {
		m, _, _ := newTest(tc.unit, tc.total, false)
		m.done, m.total = tc.done, tc.total
		got := m.line(tc.elapsed)
		if got != tc.want {
			t.Errorf("%d of %d %s after %v:\n got %q\nwant %q", tc.done, tc.total, tc.unit, tc.elapsed, got, tc.want)
		}
	}
}

// A run that ends within its first second prints nothing, whether it
// reaches its total or is finished short of it.
func TestShortRunSilent(t *testing.T) {
	m, out, c := newTest("entries", 900, false)
	run(m, c, 900, 900, time.Millisecond)
	m.Finish()
	m2, out2, c2 := newTest("entries", 0, false)
	run(m2, c2, 990, 0, time.Millisecond)
	m2.Finish()
	if out.Len() != 0 || out2.Len() != 0 {
		t.Fatalf("a run of 0.9 s printed %q and %q; want nothing", out.String(), out2.String())
	}
}

// After a second the line appears, is redrawn at most four times a
// second, shows the run so far, and is erased when the total is reached.
func TestLongRun(t *testing.T) {
	m, out, c := newTest("entries", 10000, false)
	run(m, c, 4000, 10000, time.Millisecond) // 4 s at 1000 entries/s
	l := lines(out.String())
	// Drawn from 1 s to 4 s: at most 4 a second, and at least every
	// quarter second give or take the clock's readings.
	if len(l) < 10 || len(l) > 13 {
		t.Fatalf("%d lines in 3 s of drawing, want 10 to 13: %q", len(l), l)
	}
	if !strings.HasPrefix(l[0], "cmd: run: 10") || !strings.HasSuffix(l[0], " of 10000 entries (10%), 1000 entries/s, 9s left") {
		t.Errorf("first line %q, want about 1000 of 10000 after 1 s", l[0])
	}
	last := l[len(l)-1]
	if !regexp.MustCompile(`^cmd: run: 3[7-9]\d\d of 10000 entries \(3[7-9]%\), 1000 entries/s, 6s left$`).MatchString(last) {
		t.Errorf("last line %q, want about 3750 to 4000 of 10000 after 4 s", last)
	}
	if !strings.HasPrefix(out.String(), "\rcmd: run: ") || !strings.HasSuffix(out.String(), "\x1b[K") {
		t.Errorf("lines not drawn in place: %q", out.String())
	}
	before := out.Len()
	run(m, c, 10000, 10000, 0) // the rest at once, to the total
	if got := out.String()[before:]; got != "\r\x1b[K" {
		t.Errorf("reaching the total wrote %q, want the line erased", got)
	}
	m.Finish()
	if out.Len() != before+len("\r\x1b[K") {
		t.Errorf("Finish after the line was erased wrote %q", out.String()[before:])
	}
}

// Finish erases a line shown short of the total; nothing is drawn after.
func TestFinish(t *testing.T) {
	m, out, c := newTest("entries", 0, false)
	run(m, c, 2000, 0, time.Millisecond)
	if l := lines(out.String()); len(l) == 0 || !strings.HasSuffix(l[len(l)-1], " entries, 1000 entries/s") {
		t.Fatalf("unknown total: lines %q, want \"N entries, 1000 entries/s\"", l)
	}
	m.Finish()
	if !strings.HasSuffix(out.String(), "\x1b[K\r\x1b[K") {
		t.Fatalf("Finish did not erase the line: %q", out.String())
	}
	n := out.Len()
	run(m, c, 5000, 0, time.Millisecond)
	if out.Len() != n {
		t.Fatalf("drawn after Finish: %q", out.String()[n:])
	}
}

// "now" draws at the first update.
func TestImmediate(t *testing.T) {
	m, out, c := newTest("entries", 20, true)
	run(m, c, 1, 20, time.Microsecond)
	if out.String() != "\rcmd: run: 1 of 20 entries (5%)\x1b[K" {
		t.Fatalf("first update with LEDGER_PROGRESS=now drew %q", out.String())
	}
	run(m, c, 20, 20, time.Microsecond)
	if !strings.HasSuffix(out.String(), "\r\x1b[K") {
		t.Fatalf("not erased at the total: %q", out.String())
	}
}

// "now" draws a run whose first update is its last, and erases it; auto
// draws nothing for it.
func TestImmediateOneUpdate(t *testing.T) {
	m, out, c := newTest("entries", 600, true)
	run(m, c, 0, 600, 0)
	m.Update(600, 600)
	if out.String() != "\rcmd: run: 600 of 600 entries (100%)\x1b[K\r\x1b[K" {
		t.Fatalf("one update with LEDGER_PROGRESS=now drew %q", out.String())
	}
	m, out, c = newTest("entries", 600, false)
	c.t = c.t.Add(2 * time.Second)
	m.Update(600, 600)
	if out.Len() != 0 {
		t.Fatalf("one update, the last, after 2 s without LEDGER_PROGRESS=now drew %q", out.String())
	}
}

// A line wider than the terminal is cut to one column less.
func TestWidth(t *testing.T) {
	var out bytes.Buffer
	c := &clock{t: time.Unix(0, 0)}
	m := newMeter(&out, "cmd: run", "entries", 20, c.now, true)
	m.Update(1, 20)
	if out.String() != "\rcmd: run: 1 of 20 e\x1b[K" {
		t.Fatalf("cut to 19 columns: %q", out.String())
	}
}

// The clock is read far less often than once an update in a fast loop,
// and still about every lookEvery.
func TestStride(t *testing.T) {
	var reads int
	c := &clock{t: time.Unix(0, 0)}
	m := newMeter(&bytes.Buffer{}, "cmd: run", "entries", 0, func() time.Time { reads++; return c.t }, false)
	const n = 1_000_000
	for i := uint64(1); i <= n; i++ {
		c.t = c.t.Add(time.Microsecond) // a second in all
		m.Update(i, 0)
	}
	// A reading every 50 ms is 20; the stride's doubling from 1 takes
	// some 16 more.
	if reads > 60 || reads < 15 {
		t.Fatalf("%d clock readings for %d updates in 1 s; want about 20 plus the ramp", reads, n)
	}
}

// A nil Meter does nothing, and its hook is nil; a Meter's hook is its
// Update.
func TestNil(t *testing.T) {
	var m *Meter
	m.Update(1, 2)
	m.Finish()
	if m.Hook() != nil {
		t.Error("a nil Meter's hook is not nil")
	}
	m2, out, _ := newTest("entries", 2, true)
	m2.Hook()(1, 2)
	if out.Len() == 0 {
		t.Error("a Meter's hook does not update it")
	}
}

// New draws only on a terminal: not on a buffer, a pipe, a file or
// /dev/null (a character device), and on a terminal not with
// LEDGER_PROGRESS=off or TERM=dumb.
func TestNew(t *testing.T) {
	t.Setenv(Env, "now")
	t.Setenv("TERM", "xterm")
	if New(&bytes.Buffer{}, "x", "entries") != nil {
		t.Error("a Meter on a bytes.Buffer")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if New(w, "x", "entries") != nil {
		t.Error("a Meter on a pipe")
	}
	f, err := os.Create(t.TempDir() + "/file")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if New(f, "x", "entries") != nil {
		t.Error("a Meter on a file")
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if st, _ := null.Stat(); st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("%s is not a character device here", os.DevNull)
	}
	if New(null, "x", "entries") != nil {
		t.Errorf("a Meter on %s", os.DevNull)
	}

	pty := ptytest.Open(t)
	if New(pty.Terminal, "x", "entries") == nil {
		t.Fatal("no Meter on a terminal")
	}
	for _, env := range [][2]string{{Env, "off"}, {"TERM", "dumb"}} {
		t.Run(env[0]+"="+env[1], func(t *testing.T) {
			t.Setenv(env[0], env[1])
			if New(pty.Terminal, "x", "entries") != nil {
				t.Errorf("a Meter on a terminal with %s=%s", env[0], env[1])
			}
		})
	}
	t.Setenv(Env, "")
	m := New(pty.Terminal, "x", "entries")
	if m == nil || m.wait != quiet {
		t.Errorf("LEDGER_PROGRESS unset: %+v, want a Meter that waits a second", m)
	}
	m.Update(1, 2) // within its first second: nothing
	t.Setenv(Env, "now")
	m = New(pty.Terminal, "x", "entries")
	m.Update(1, 2)
	m.Finish()
	if got := string(pty.Output()); got != "\rx: 1 of 2 entries (50%)\x1b[K\r\x1b[K" {
		t.Errorf("on the terminal: %q", got)
	}
}

// BenchmarkUpdate is the cost of one update in a hot loop on a terminal
// while the meter does not draw (the run's first second, stretched): the
// counter, and the clock read every stride.
func BenchmarkUpdate(b *testing.B) {
	var out bytes.Buffer
	m := newMeter(&out, "cmd: run", "entries", 0, time.Now, false)
	m.wait = time.Hour
	for i := range uint64(b.N) {
		m.Update(i, uint64(b.N)+1)
	}
	if out.Len() != 0 {
		b.Fatal("drawn")
	}
}

// BenchmarkNil is the cost of an update of a Meter that never draws.
func BenchmarkNil(b *testing.B) {
	var m *Meter
	for i := range uint64(b.N) {
		m.Update(i, uint64(b.N)+1)
	}
}
