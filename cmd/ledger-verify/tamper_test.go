package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
)

// frame is one frame of an export file.
type frame struct {
	tag     string
	payload []byte
}

func splitFrames(t *testing.T, data []byte) []frame {
	t.Helper()
	rest, ok := bytes.CutPrefix(data, []byte(ledger.ExportHeader))
	if !ok {
		t.Fatal("no export header")
	}
	var frames []frame
	for len(rest) > 0 {
		line, after, _ := bytes.Cut(rest, []byte("\n"))
		tag, lenText, _ := strings.Cut(string(line), " ")
		n, err := strconv.Atoi(lenText)
		if err != nil {
			t.Fatalf("frame header %q", line)
		}
		frames = append(frames, frame{tag, bytes.Clone(after[:n])})
		rest = after[n+1:]
	}
	return frames
}

func joinFrames(frames []frame) []byte {
	var b bytes.Buffer
	b.WriteString(ledger.ExportHeader)
	for _, f := range frames {
		fmt.Fprintf(&b, "%s %d\n", f.tag, len(f.payload))
		b.Write(f.payload)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// entryFrame returns the position of the frame holding entry index.
func entryFrame(frames []frame, index int) int {
	for i, f := range frames {
		if f.tag == "entry" && bytes.Contains(f.payload, []byte(`"index":`+strconv.Itoa(index)+`,`)) {
			return i
		}
	}
	return -1
}

// TestTamperSuite tampers with a 1,200-entry export of a real ledger in 30
// ways; ledger-verify must refuse each with exit 1 and name the entry (or
// the part) and the check. The untampered files pass.
func TestTamperSuite(t *testing.T) {
	if testing.Short() {
		// About a minute under the race detector (.ci/run's -race -short
		// pass) for code with no concurrency: the full pass runs it.
		t.Skip("verifies 30 tampered exports of 1,200 entries, one at a time; runs without -short")
	}
	dir := t.TempDir()
	skey, err := fixture(dir, 1200, "")
	if err != nil {
		t.Fatal(err)
	}
	// A fork: the same key signs a second history of the same length.
	forkDir := filepath.Join(dir, "fork")
	os.Mkdir(forkDir, 0o755)
	if _, err := fixture(forkDir, 1200, skey); err != nil {
		t.Fatal(err)
	}
	otherSkey, _, _ := ledger.GenerateKey("ledger.example.com/log")
	otherKey, _ := ledger.ParseKey([]byte(otherSkey), ledger.KeyOptions{})
	foreignSkey, _, _ := ledger.GenerateKey("ledger.example.org/other")
	foreignDir := filepath.Join(dir, "foreign")
	os.Mkdir(foreignDir, 0o755)
	if _, err := fixture(foreignDir, 20, foreignSkey); err != nil {
		t.Fatal(err)
	}

	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	full := read("export.ledger")
	tail := read("tail.ledger")

	// mutateEntry rewrites entry index in a copy of the full export.
	mutateEntry := func(data []byte, index int, change func(t *testing.T, e []byte) []byte) []byte {
		frames := splitFrames(t, data)
		i := entryFrame(frames, index)
		if i < 0 {
			t.Fatalf("no entry %d", index)
		}
		before := frames[i].payload
		frames[i].payload = change(t, bytes.Clone(before))
		if bytes.Equal(before, frames[i].payload) {
			t.Fatalf("mutation of entry %d changed nothing", index)
		}
		return joinFrames(frames)
	}
	replaceIn := func(old, new string) func(*testing.T, []byte) []byte {
		return func(t *testing.T, e []byte) []byte {
			return []byte(strings.Replace(string(e), old, new, 1))
		}
	}
	// flipHex changes one hex digit inside a member's digest value.
	flipHex := func(member string) func(*testing.T, []byte) []byte {
		return func(t *testing.T, e []byte) []byte {
			i := bytes.Index(e, []byte(`"`+member+`":"sha256:`))
			j := i + len(member) + len(`"":"sha256:`) + 10
			if e[j] == '0' {
				e[j] = '1'
			} else {
				e[j] = '0'
			}
			return e
		}
	}
	resign := func(t *testing.T, b []byte) []byte {
		e, err := entry.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		e.Signature = nil
		if _, err := e.Sign(otherKey.ID(), otherKey.Sign); err != nil {
			t.Fatal(err)
		}
		out, _ := e.Marshal()
		return out
	}
	frameEdit := func(data []byte, edit func([]frame) []frame) []byte {
		return joinFrames(edit(splitFrames(t, data)))
	}
	moveEntry := func(from, to int) func([]frame) []frame {
		return func(fs []frame) []frame {
			i, j := entryFrame(fs, from), entryFrame(fs, to)
			fs[i], fs[j] = fs[j], fs[i]
			return fs
		}
	}

	type tamper struct {
		name    string
		file    []byte
		args    []string // extra arguments before the file
		want    string   // regexp the error output must match
		command string   // "export" unless set
	}
	cases := []tamper{
		{name: "attributes", file: mutateEntry(full, 517, replaceIn(`"payee_known":true`, `"payee_known":false`)), want: `entry 517: signature`},
		{name: "decision", file: mutateEntry(full, 517, replaceIn(`"decision":"allow"`, `"decision":"deny"`)), want: `entry 517: signature`},
		{name: "policy-ids", file: mutateEntry(full, 517, replaceIn(`"payments.limit"`, `"payments.limiz"`)), want: `entry 517: signature`},
		{name: "params-digest", file: mutateEntry(full, 517, flipHex("params_digest")), want: `entry 517: signature`},
		{name: "tiers-digest", file: mutateEntry(full, 517, flipHex("tiers_digest")), want: `entry 517: signature`},
		{name: "time", file: mutateEntry(full, 517, func(t *testing.T, e []byte) []byte {
			return regexp.MustCompile(`\.(\d)`).ReplaceAllFunc(e, func(m []byte) []byte {
				return []byte{'.', '0' + (m[1]-'0'+1)%10}
			})
		}), want: `entry 517: signature`},
		{name: "prev", file: mutateEntry(full, 517, flipHex("prev")), want: `entry 517: signature`},
		{name: "signature", file: mutateEntry(full, 517, func(t *testing.T, e []byte) []byte {
			i := bytes.Index(e, []byte(`"sig":"`)) + 10
			if e[i] == 'A' {
				e[i] = 'B'
			} else {
				e[i] = 'A'
			}
			return e
		}), want: `entry 517: signature`},
		{name: "key-id", file: mutateEntry(full, 517, func(t *testing.T, e []byte) []byte {
			return regexp.MustCompile(`"key_id":"([^"]*)\+[0-9a-f]{8}"`).ReplaceAll(e, []byte(`"key_id":"$1+00000000"`))
		}), want: `entry 517: key`},
		{name: "mediator", file: mutateEntry(full, 517, replaceIn(`"mediator-1"`, `"mediator-2"`)), want: `entry 517: signature`},
		{name: "principal", file: mutateEntry(full, 517, replaceIn(`"agent-1"`, `"agent-9"`)), want: `entry 517: signature`},
		{name: "index-field", file: mutateEntry(full, 517, replaceIn(`"index":517,`, `"index":518,`)), want: `entry 517: index`},
		{name: "origin-field", file: mutateEntry(full, 517, replaceIn(`"origin":"ledger.example.com/log"`, `"origin":"ledger.example.com/lag"`)), want: `entry 517: key`},
		{name: "resigned-other-key", file: mutateEntry(full, 517, resign), want: `entry 517: key`},
		{name: "non-canonical-whitespace", file: mutateEntry(full, 517, replaceIn(`,"decision":`, `, "decision":`)), want: `entry 517: encoding`},
		{name: "non-canonical-order", file: mutateEntry(full, 517, func(t *testing.T, e []byte) []byte {
			// Move "action" after "attributes": same members, other order.
			re := regexp.MustCompile(`^\{("action":"[^"]*"),("attributes":\{.*?\}\}),("decision")`)
			return re.ReplaceAll(e, []byte(`{$2,$1,$3`))
		}), want: `entry 517: encoding`},
		{name: "drop", file: frameEdit(full, func(fs []frame) []frame {
			i := entryFrame(fs, 517)
			return append(fs[:i:i], fs[i+1:]...)
		}), want: `entry 517: index`},
		{name: "duplicate", file: frameEdit(full, func(fs []frame) []frame {
			i := entryFrame(fs, 517)
			return append(fs[:i+1:i+1], fs[i:]...)
		}), want: `entry 518: index`},
		{name: "reorder", file: frameEdit(full, moveEntry(517, 518)), want: `entry 517: index`},
		{name: "insert", file: frameEdit(full, func(fs []frame) []frame {
			i := entryFrame(fs, 517)
			return append(fs[:i:i], append([]frame{fs[entryFrame(fs, 3)]}, fs[i:]...)...)
		}), want: `entry 517: index`},
		{name: "forged-checkpoint", file: frameEdit(full, func(fs []frame) []frame {
			fs[0].payload = bytes.Replace(fs[0].payload, []byte("\n1200\n"), []byte("\n1201\n"), 1)
			return fs
		}), want: `checkpoint: checkpoint-signature`},
		{name: "foreign-log-checkpoint", file: frameEdit(full, func(fs []frame) []frame {
			foreign := splitFrames(t, must(os.ReadFile(filepath.Join(foreignDir, "export.ledger"))))
			fs[0] = foreign[0]
			return fs
		}), want: `checkpoint: checkpoint-signature`},
		{name: "untrusted-key", file: full, args: []string{"--key-file", filepath.Join(dir, "other.vkey")}, want: `checkpoint: checkpoint-signature`},
		{name: "range-proof-hash", file: frameEdit(tail, func(fs []frame) []frame {
			for i := range fs {
				if fs[i].tag == "left" {
					fs[i].payload[5] ^= 1
				}
			}
			return fs
		}), want: `range: range-proof`},
		{name: "prev-link-frame", file: frameEdit(tail, func(fs []frame) []frame {
			for i := range fs {
				if fs[i].tag == "prev" {
					if fs[i].payload[20] == '0' {
						fs[i].payload[20] = '1'
					} else {
						fs[i].payload[20] = '0'
					}
				}
			}
			return fs
		}), want: `entry 600: prev`},
		{name: "truncated", file: full[:len(full)*2/3], want: `entry \d+: format: file ends`},
		{name: "trailing-content", file: append(bytes.Clone(full), "entry 0\n\n"...), want: `export file: format: content after the end frame`},
		{name: "forked-history", file: must(os.ReadFile(filepath.Join(forkDir, "tail.ledger"))),
			args: []string{"--trusted", filepath.Join(dir, "half.checkpoint")}, want: `consistency proof: consistency`},
		{name: "wrong-params-value", command: "params", file: full,
			args: []string{"--index", "7", filepath.Join(dir, "params-8.json")}, want: `mismatch: entry 7`},
		{name: "wrong-params-added-key", command: "params", file: full,
			args: []string{"--index", "7", filepath.Join(dir, "added.json")}, want: `mismatch: entry 7`},
	}
	p7 := read("params-7.json")
	os.WriteFile(filepath.Join(dir, "added.json"), bytes.Replace(p7, []byte(`{`), []byte(`{"cc":null,`), 1), 0o644)

	if len(cases) < 25 {
		t.Fatalf("only %d tamper classes", len(cases))
	}
	run1 := func(command string, args []string, file []byte) (int, string) {
		path := filepath.Join(t.TempDir(), "tampered.ledger")
		if err := os.WriteFile(path, file, 0o644); err != nil {
			t.Fatal(err)
		}
		full := []string{command, "--key-file", filepath.Join(dir, "ledger.vkey")}
		if command == "params" {
			full = append(full, "--export", path)
			full = append(full, args...)
		} else {
			if len(args) > 0 && args[0] == "--key-file" {
				full = []string{command}
			}
			full = append(full, args...)
			full = append(full, path)
		}
		var stdout, stderr bytes.Buffer
		code := run(full, strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			command := c.command
			if command == "" {
				command = "export"
			}
			code, out := run1(command, c.args, c.file)
			if code != exitFailed || !regexp.MustCompile(c.want).MatchString(out) {
				t.Fatalf("exit %d, output:\n%s\nwant exit 1 and %q", code, out, c.want)
			}
		})
	}
	// The untampered files pass.
	for _, c := range []struct {
		command string
		args    []string
		file    []byte
	}{
		{"export", nil, full},
		{"export", []string{"--trusted", filepath.Join(dir, "half.checkpoint")}, tail},
		{"params", []string{"--index", "7", filepath.Join(dir, "params-7.json")}, full},
	} {
		if code, out := run1(c.command, c.args, c.file); code != exitOK {
			t.Errorf("untampered %s: exit %d\n%s", c.command, code, out)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
