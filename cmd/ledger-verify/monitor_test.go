package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
	tlog "github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

// tileLog is a real ledger (in memory) behind a C2SP tlog-tiles server,
// as ledgerd serves one, whose answers a test can rewrite.
type tileLog struct {
	l     *ledger.Ledger // changed only under mu (rotate), read by serve under it
	mu    sync.Mutex
	store *memory.Store
	now   func() time.Time
	srv   *httptest.Server
	// lie, if set, rewrites the body of an answer (path, body).
	lie atomic.Pointer[func(path string, b []byte) []byte]
	// checkpointAt, if not 0, serves the checkpoint of that size as the
	// latest.
	checkpointAt atomic.Uint64
}

func newTileLog(t *testing.T, skey string) *tileLog {
	t.Helper()
	key, err := ledger.ParseKey([]byte(skey), ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A fixed clock: two logs given the same records hold the same
	// entries.
	now := func() time.Time { return time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC) }
	store := memory.New()
	l, err := ledger.Open(context.Background(), store, key, ledger.Options{CheckpointInterval: -1, Logger: slog.New(slog.DiscardHandler), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	tl := &tileLog{l: l, store: store, now: now}
	tl.srv = httptest.NewServer(http.HandlerFunc(tl.serve))
	t.Cleanup(func() { tl.srv.Close(); tl.ledger().Close() })
	return tl
}

func (tl *tileLog) ledger() *ledger.Ledger {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.l
}

// rotate rotates the log's key from old to newSkey (ledger.Rotate, with
// the ledger stopped) and reopens it with the new key, old listed as a
// previous key; it returns the rotation checkpoint.
func (tl *tileLog) rotate(t *testing.T, oldSkey, newSkey string) []byte {
	t.Helper()
	ctx := context.Background()
	oldKey, err := ledger.ParseKey([]byte(oldSkey), ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := ledger.ParseKey([]byte(newSkey), ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.l.Close()
	quiet := slog.New(slog.DiscardHandler)
	signed, err := ledger.Rotate(ctx, tl.store, oldKey, newKey, ledger.Options{Logger: quiet, Now: tl.now})
	if err != nil {
		t.Fatal(err)
	}
	if tl.l, err = ledger.Open(ctx, tl.store, newKey, ledger.Options{CheckpointInterval: -1, Logger: quiet, Now: tl.now,
		PreviousKeys: []string{oldKey.VerifierKey()}}); err != nil {
		t.Fatal(err)
	}
	return signed
}

// add appends n entries (payee seed differs by log), then signs a
// checkpoint.
func (tl *tileLog) add(t *testing.T, seed string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		p, err := commit.Params([]byte(fmt.Sprintf(`{"to":"%s-%d@example.com"}`, seed, i)))
		if err != nil {
			t.Fatal(err)
		}
		rec := ledger.Record{Mediator: "mediator-1", Principal: "agent-1", Action: "send_email",
			Decision: entry.Allow, Policies: []string{"email.allow"}, Params: p,
			Tiers: commit.Digest{1}, Attributes: []byte(`{}`)}
		if _, err := tl.l.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tl.l.Publish(ctx); err != nil {
		t.Fatal(err)
	}
}

func (tl *tileLog) serve(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	l := tl.ledger()
	var b []byte
	var err error
	switch p := r.URL.Path; {
	case p == "/checkpoint":
		b, _ = l.Checkpoint()
		if size := tl.checkpointAt.Load(); size != 0 {
			b, err = l.CheckpointAt(ctx, size)
		}
	case strings.HasPrefix(p, "/tile/"):
		rest := strings.TrimPrefix(p, "/tile/")
		width := ledger.TileWidth
		if head, partial, ok := strings.Cut(rest, ".p/"); ok {
			rest = head
			width, _ = strconv.Atoi(partial)
		}
		level, indexPath, _ := strings.Cut(rest, "/")
		index, _ := strconv.ParseUint(strings.NewReplacer("x", "", "/", "").Replace(indexPath), 10, 64)
		if level == "entries" {
			b, err = l.EntryBundle(ctx, index, width)
		} else {
			lv, _ := strconv.Atoi(level)
			b, err = l.Tile(ctx, uint8(lv), index, width)
		}
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		http.Error(w, `{"error":{"code":"not_found","message":"no such tile"}}`, http.StatusNotFound)
		return
	}
	if lie := tl.lie.Load(); lie != nil {
		b = (*lie)(r.URL.Path, bytes.Clone(b))
	}
	w.Write(b)
}

// lieAbout rewrites the answers for paths with the given prefix.
func (tl *tileLog) lieAbout(prefix string, change func(b []byte) []byte) {
	f := func(path string, b []byte) []byte {
		if strings.HasPrefix(path, prefix) {
			return change(b)
		}
		return b
	}
	tl.lie.Store(&f)
}

// fetchFrom reads path from a tile log, as a cache that mixed up two
// logs would serve it.
func fetchFrom(t *testing.T, tl *tileLog, path string) []byte {
	resp, err := http.Get(tl.srv.URL + path)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %d %v", path, resp.StatusCode, err)
	}
	return b
}

// monitorOnce runs ledger-verify monitor with the key in vkey and the
// state in dir, and returns its exit status and output.
func monitorOnce(t *testing.T, dir, vkey, url string, extra ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args := append([]string{"monitor", "--key", vkey, "--state", filepath.Join(dir, "state")}, extra...)
	code := run(append(args, url), nil, &out, &errOut)
	return code, out.String() + errOut.String()
}

// The monitor refuses, with its documented status and the state left as
// it was, every way a log can serve something other than one honest
// history: each case starts from a state at tree size 300 and a log
// grown to 700.
func TestMonitorRefusals(t *testing.T) {
	skey, vkey, err := ledger.GenerateKey("ledger.example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	otherSkey, otherVkey, _ := ledger.GenerateKey("ledger.example.com/log")

	// The honest log; a twin under the same key holding the same first
	// 300 entries, then others (consistent with the state, but not the
	// honest log's history); a fork under the same key from the first
	// entry; and a fork of the same size as the state.
	honest := newTileLog(t, skey)
	honest.add(t, "a", 300)
	twin := newTileLog(t, skey)
	twin.add(t, "a", 300)
	fork := newTileLog(t, skey)
	fork.add(t, "b", 300)
	sameSize := newTileLog(t, skey)
	sameSize.add(t, "b", 300)
	other := newTileLog(t, otherSkey)
	other.add(t, "a", 700)

	base := t.TempDir()
	if code, out := monitorOnce(t, base, vkey, honest.srv.URL, "--init"); code != exitOK {
		t.Fatalf("first run: %d\n%s", code, out)
	}
	state300, err := os.ReadFile(filepath.Join(base, "state"))
	if err != nil {
		t.Fatal(err)
	}
	honest.add(t, "a", 400)
	twin.add(t, "c", 400)
	fork.add(t, "b", 400)

	flipAt := func(off int) func([]byte) []byte {
		return func(b []byte) []byte {
			if off < 0 {
				off += len(b)
			}
			b[off] ^= 1
			return b
		}
	}
	// dropFirst removes the first entry of a bundle.
	dropFirst := func(b []byte) []byte { return b[2+binary.BigEndian.Uint16(b):] }
	// swapFirst swaps the first two entries of a bundle.
	swapFirst := func(b []byte) []byte {
		n1 := 2 + int(binary.BigEndian.Uint16(b))
		n2 := 2 + int(binary.BigEndian.Uint16(b[n1:]))
		return append(append(append([]byte{}, b[n1:n1+n2]...), b[:n1]...), b[n1+n2:]...)
	}
	for _, c := range []struct {
		name  string
		log   *tileLog
		setup func(tl *tileLog)
		key   string
		state func([]byte) []byte // rewrites the state file
		want  int
		msg   string
	}{
		{name: "honest", log: honest, want: exitOK, msg: "verified: entries 300 to 699 (400 new)"},
		{name: "entry byte flipped", log: honest, setup: func(tl *tileLog) { tl.lieAbout("/tile/entries/002", flipAt(100)) },
			want: exitFailed, msg: "entry 512: "},
		{name: "last entry's byte flipped", log: honest, setup: func(tl *tileLog) { tl.lieAbout("/tile/entries/002", flipAt(-3)) },
			want: exitFailed, msg: "entry 699: encoding"},
		{name: "entry dropped", log: honest, setup: func(tl *tileLog) { tl.lieAbout("/tile/entries/002", dropFirst) },
			want: exitFailed, msg: "entry 512: index"},
		{name: "bundle with a byte more", log: honest, setup: func(tl *tileLog) { tl.lieAbout("/tile/entries/002", func(b []byte) []byte { return append(b, 0) }) },
			want: exitFailed, msg: "1 bytes after its 188 entries"},
		{name: "bundle cut", log: honest, setup: func(tl *tileLog) { tl.lieAbout("/tile/entries/002", func(b []byte) []byte { return b[:len(b)-1] }) },
			want: exitFailed, msg: "malformed tile"},
		{name: "entries reordered", log: honest, setup: func(tl *tileLog) { tl.lieAbout("/tile/entries/002", swapFirst) },
			want: exitFailed, msg: "entry 512: index"},
		// Hash tiles that do not give the log's own signed root prove
		// nothing about the log: not a fork, and no evidence.
		{name: "hash in the old range flipped", log: honest, setup: func(tl *tileLog) { tl.lieAbout("/tile/0/001", flipAt(0)) },
			want: exitFailed, msg: "tile /tile/0/001 does not hash to node 8/1, which tile /tile/1/000.p/2 holds"},
		{name: "hash in the new range flipped", log: honest, setup: func(tl *tileLog) { tl.lieAbout("/tile/0/001", flipAt(-1)) },
			want: exitFailed, msg: "tile /tile/0/001 does not hash to node 8/1"},
		{name: "level-1 hash flipped", log: honest, setup: func(tl *tileLog) { tl.lieAbout("/tile/1/000", flipAt(0)) },
			want: exitFailed, msg: "the partial tiles at the tree's right edge (/tile/0/002.p/188, /tile/1/000.p/2) do not hash to its signed root"},
		{name: "hash tile cut", log: honest, setup: func(tl *tileLog) { tl.lieAbout("/tile/0/001", func(b []byte) []byte { return b[:len(b)-32] }) },
			want: exitFailed, msg: "tile /tile/0/001: 8160 bytes, want 8192 (256 hashes)"},
		{name: "hash tile of another tree", log: honest, setup: func(tl *tileLog) {
			tl.lieAbout("/tile/0/001", func([]byte) []byte { return fetchFrom(t, fork, "/tile/0/001") })
		},
			want: exitFailed, msg: "tile /tile/0/001 does not hash to node 8/1"},
		{name: "edge tile of another tree", log: honest, setup: func(tl *tileLog) {
			tl.lieAbout("/tile/0/002.p/188", func([]byte) []byte { return fetchFrom(t, twin, "/tile/0/002.p/188") })
		},
			want: exitFailed, msg: "right edge"},
		{name: "all hash tiles of another tree", log: honest, setup: func(tl *tileLog) {
			f := func(path string, b []byte) []byte {
				if strings.HasPrefix(path, "/tile/") && !strings.HasPrefix(path, "/tile/entries/") {
					return fetchFrom(t, fork, path)
				}
				return b
			}
			tl.lie.Store(&f)
		}, want: exitFailed, msg: "This is not a fork"},
		{name: "entries of another history under the same key", log: honest, setup: func(tl *tileLog) {
			f := func(path string, b []byte) []byte {
				if strings.HasPrefix(path, "/tile/entries/") {
					return fetchFrom(t, twin, path)
				}
				return b
			}
			tl.lie.Store(&f)
		}, want: exitFailed, msg: "range-proof"},
		{name: "swapped key", log: honest, key: otherVkey, want: exitFailed, msg: "not signed by the trusted key"},
		{name: "log signed by another key", log: other, want: exitFailed, msg: "the log's latest checkpoint"},
		{name: "checkpoint smaller than the state's", log: honest, setup: func(tl *tileLog) { tl.checkpointAt.Store(0) },
			state: func([]byte) []byte { return nil }, want: exitFailed, msg: "smaller than the state's (700)"},
		{name: "fork", log: fork, want: exitInconsistent, msg: "FORK: the log's checkpoint of tree size 700 is signed by the trusted key but not consistent with the checkpoint of tree size 300 the state holds: the hashes of its tiles lead to its signed root"},
		{name: "fork of the same size", log: sameSize, want: exitInconsistent, msg: "same tree size with different roots"},
		{name: "prev across runs", log: honest, state: func(b []byte) []byte {
			i := bytes.Index(b, []byte(`"last_entry_hash": "sha256:`)) + len(`"last_entry_hash": "sha256:`)
			// Another lower-case hex digit, whatever the first one was
			// (b[i]^1 turns 'a' and 'f' into non-hex characters).
			if b[i] == '0' {
				b[i] = '1'
			} else {
				b[i] = '0'
			}
			return b
		}, want: exitFailed, msg: "entry 300: prev"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			st := bytes.Clone(state300)
			if c.state != nil {
				if c.name == "checkpoint smaller than the state's" {
					// A state at 700, from an honest run; the log then
					// serves its checkpoint of size 300.
					if code, out := monitorOnce(t, dir, vkey, honest.srv.URL, "--init"); code != exitOK {
						t.Fatalf("%d %s", code, out)
					}
					honest.checkpointAt.Store(300)
					t.Cleanup(func() { honest.checkpointAt.Store(0) })
					st, _ = os.ReadFile(filepath.Join(dir, "state"))
				} else {
					st = c.state(st)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "state"), st, 0o644); err != nil {
				t.Fatal(err)
			}
			if c.setup != nil && c.name != "checkpoint smaller than the state's" {
				c.setup(c.log)
				t.Cleanup(func() { c.log.lie.Store(nil) })
			}
			key := vkey
			if c.key != "" {
				key = c.key
			}
			code, out := monitorOnce(t, dir, key, c.log.srv.URL)
			if code != c.want || !strings.Contains(out, c.msg) {
				t.Fatalf("exit %d, want %d with %q:\n%s", code, c.want, c.msg, out)
			}
			after, _ := os.ReadFile(filepath.Join(dir, "state"))
			if c.want != exitOK && !bytes.Equal(after, st) {
				t.Errorf("a refused run changed the state")
			}
			for _, suffix := range []string{".fork-old.checkpoint", ".fork-new.checkpoint", ".fork-proof.json"} {
				_, err := os.Stat(filepath.Join(dir, "state"+suffix))
				switch want := c.want == exitInconsistent && (suffix != ".fork-proof.json" || c.log != sameSize); {
				case want && err != nil:
					t.Errorf("no evidence file: %v", err)
				case !want && err == nil:
					t.Errorf("evidence file %s written", suffix)
				}
			}
		})
	}

	// A checkpoint of size 0 whose root is not the empty tree's, signed
	// with the log's key: refused on the first run, and no state saved.
	t.Run("empty tree with another root", func(t *testing.T) {
		key, _ := ledger.ParseKey([]byte(skey), ledger.KeyOptions{})
		text := tlog.Checkpoint{Origin: key.Name(), Size: 0, Hash: bytes.Repeat([]byte{7}, 32)}.Marshal()
		bogus, err := note.Sign(&note.Note{Text: string(text)}, key.Signer())
		if err != nil {
			t.Fatal(err)
		}
		empty := newTileLog(t, skey)
		empty.lieAbout("/checkpoint", func([]byte) []byte { return bogus })
		dir := t.TempDir()
		if code, out := monitorOnce(t, dir, vkey, empty.srv.URL, "--init"); code != exitFailed || !strings.Contains(out, "does not have the empty tree's root hash") {
			t.Fatalf("exit %d, want %d:\n%s", code, exitFailed, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
			t.Error("a state was saved")
		}
	})

	// A log that cannot be read: its own status, the state unchanged.
	t.Run("unreachable", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "state"), state300, 0o644)
		dead := httptest.NewServer(http.NotFoundHandler())
		dead.Close()
		if code, out := monitorOnce(t, dir, vkey, dead.URL); code != exitUnreachable || !strings.Contains(out, "could not be read") {
			t.Fatalf("exit %d, want %d:\n%s", code, exitUnreachable, out)
		}
		failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":{"code":"internal","message":"the tile could not be read"}}`, 500)
		}))
		defer failing.Close()
		if code, out := monitorOnce(t, dir, vkey, failing.URL); code != exitUnreachable || !strings.Contains(out, "HTTP 500") {
			t.Fatalf("exit %d, want %d:\n%s", code, exitUnreachable, out)
		}
		if after, _ := os.ReadFile(filepath.Join(dir, "state")); !bytes.Equal(after, state300) {
			t.Error("the state changed")
		}
	})
}

// A proven fork leaves three files that anyone can re-check offline with
// the log's verifier key: 'ledger-verify consistency OLD NEW PROOF' says
// FORK (exit status 3) for them as written, and nothing of the kind once
// any byte of any of them is changed. From tree size 256, a power of two,
// an RFC 6962 proof could not show it (it holds no hash of the older
// tree); the prefix proof does, as from 300.
func TestMonitorForkEvidence(t *testing.T) {
	skey, vkey, err := ledger.GenerateKey("ledger.example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{256, 300} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			honest, fork := newTileLog(t, skey), newTileLog(t, skey)
			honest.add(t, "a", size)
			fork.add(t, "b", size) // a checkpoint at the state's size too
			fork.add(t, "c", 44)
			dir := t.TempDir()
			if code, out := monitorOnce(t, dir, vkey, honest.srv.URL, "--init"); code != exitOK {
				t.Fatalf("first run: %d\n%s", code, out)
			}
			code, out := monitorOnce(t, dir, vkey, fork.srv.URL)
			if code != exitInconsistent || !strings.Contains(out, "FORK") || !strings.Contains(out, "state.fork-proof.json, the prefix proof") {
				t.Fatalf("exit %d, want %d:\n%s", code, exitInconsistent, out)
			}
			names := []string{"state.fork-old.checkpoint", "state.fork-new.checkpoint", "state.fork-proof.json"}
			files := make([][]byte, len(names))
			for i, name := range names {
				if files[i], err = os.ReadFile(filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			if want, _ := fork.l.Checkpoint(); !bytes.Equal(files[1], want) {
				t.Errorf("the new checkpoint's evidence is not the fork's checkpoint")
			}
			recheck := func() (int, string) {
				var out, errOut bytes.Buffer
				args := []string{"consistency", "--key", vkey}
				for _, name := range names {
					args = append(args, filepath.Join(dir, name))
				}
				code := run(args, nil, &out, &errOut)
				return code, out.String() + errOut.String()
			}
			if code, out := recheck(); code != exitInconsistent || !strings.Contains(out, "NOT CONSISTENT") || !strings.Contains(out, "leads to the newer signed root") {
				t.Fatalf("the evidence does not re-check: exit %d\n%s", code, out)
			}
			for i, name := range names {
				for off := range files[i] {
					changed := bytes.Clone(files[i])
					changed[off] ^= 1
					if err := os.WriteFile(filepath.Join(dir, name), changed, 0o644); err != nil {
						t.Fatal(err)
					}
					if code, out := recheck(); code == exitInconsistent || code == exitOK {
						t.Fatalf("%s with byte %d changed (%q): exit %d\n%s", name, off, files[i][off], code, out)
					}
				}
				if err := os.WriteFile(filepath.Join(dir, name), files[i], 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if code, out := recheck(); code != exitInconsistent {
				t.Fatalf("restored evidence: exit %d\n%s", code, out)
			}
			// The same proof decides the other way too: with the forked
			// log's own checkpoint of the older size, it proves them
			// consistent.
			own, err := fork.l.CheckpointAt(context.Background(), uint64(size))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, names[0]), own, 0o644)
			if code, out := recheck(); code != exitOK || !strings.Contains(out, "consistent: the tree of size") {
				t.Fatalf("the prefix proof with the fork's own checkpoint: exit %d\n%s", code, out)
			}
		})
	}
}

// A proof file is parsed strictly: one spelling of each member name and
// hash, one kind of proof, one JSON value.
func TestParseConsistencyProof(t *testing.T) {
	h := `"` + strings.Repeat("A", 43) + `="`
	for _, c := range []struct{ name, in, err string }{
		{"rfc 6962", `{"size1":1,"tree_size":2,"hashes":[` + h + `]}`, ""},
		{"prefix proof", `{"size1":1,"tree_size":2,"prefix":[` + h + `],"rest":[` + h + `]}`, ""},
		{"name in another case", `{"Size1":1,"tree_size":2,"hashes":[` + h + `]}`, "member Size1"},
		{"name twice", `{"size1":1,"size1":1,"tree_size":2,"hashes":[` + h + `]}`, "member size1 twice"},
		{"both kinds", `{"size1":1,"tree_size":2,"hashes":[],"prefix":[],"rest":[]}`, "either hashes"},
		{"prefix without rest", `{"size1":1,"tree_size":2,"prefix":[]}`, "either hashes"},
		{"padding bits set", `{"size1":1,"tree_size":2,"hashes":["` + strings.Repeat("A", 42) + `B="]}`, "canonical standard base64"},
		{"a line break in a hash", `{"size1":1,"tree_size":2,"hashes":["` + strings.Repeat("A", 42) + `\nA="]}`, "canonical standard base64"},
		{"short hash", `{"size1":1,"tree_size":2,"hashes":["AAAA"]}`, "a hash of 3 bytes"},
		{"two values", `{"size1":1,"tree_size":2,"hashes":[]} {}`, "more than one JSON value"},
		{"no sizes", `{"hashes":[]}`, "size1 and tree_size are required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseConsistencyProof([]byte(c.in))
			if (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error %v, want %q", err, c.err)
			}
		})
	}
}

// A monitor started on an empty log keeps the empty tree's signed
// checkpoint as its state (tree size 0, no last entry hash), and its next
// run, from size 0, verifies the whole log as it then is.
func TestMonitorEmptyState(t *testing.T) {
	skey, vkey, err := ledger.GenerateKey("ledger.example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	tl := newTileLog(t, skey)
	dir := t.TempDir()
	if code, out := monitorOnce(t, dir, vkey, tl.srv.URL, "--init"); code != exitOK || !strings.Contains(out, "tree size 0, as the state's") || !strings.Contains(out, "state saved") {
		t.Fatalf("first run on the empty log: exit %d\n%s", code, out)
	}
	st, err := os.ReadFile(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	if empty, _ := tl.l.CheckpointAt(context.Background(), 0); !bytes.Contains(st, bytes.ReplaceAll(bytes.TrimSuffix(empty, []byte("\n")), []byte("\n"), []byte(`\n`))) || bytes.Contains(st, []byte("last_entry_hash")) {
		t.Fatalf("state at size 0:\n%s", st)
	}
	if code, out := monitorOnce(t, dir, vkey, tl.srv.URL); code != exitOK || !strings.Contains(out, "no new entries") {
		t.Fatalf("second run, nothing new: exit %d\n%s", code, out)
	}
	tl.add(t, "a", 300)
	if code, out := monitorOnce(t, dir, vkey, tl.srv.URL); code != exitOK || !strings.Contains(out, "verified: entries 0 to 299 (300 new)") ||
		!strings.Contains(out, "consistent with the state's (tree size 0)") {
		t.Fatalf("run from the size-0 state: exit %d\n%s", code, out)
	}
}

// A log whose latest checkpoint is smaller than the state's is behind
// what this monitor verified: the hint says so (a rollback or a fork, or
// a lagging cache), names the evidence, and suggests no consistency proof,
// which a log behind the state's tree cannot serve.
func TestMonitorStateAheadOfLog(t *testing.T) {
	skey, vkey, err := ledger.GenerateKey("ledger.example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	tl := newTileLog(t, skey)
	tl.add(t, "a", 300)
	tl.add(t, "a", 100)
	dir := t.TempDir()
	if code, out := monitorOnce(t, dir, vkey, tl.srv.URL, "--init"); code != exitOK {
		t.Fatalf("first run: exit %d\n%s", code, out)
	}
	st, _ := os.ReadFile(filepath.Join(dir, "state"))
	tl.checkpointAt.Store(300)
	code, out := monitorOnce(t, dir, vkey, tl.srv.URL)
	if code != exitFailed || !strings.Contains(out, "smaller than the state's (400)") {
		t.Fatalf("exit %d, want %d:\n%s", code, exitFailed, out)
	}
	for _, want := range []string{"behind what this monitor verified", "rollback", "fork", "keep the evidence: the state file", "curl --fail -o"} {
		if !strings.Contains(out, want) {
			t.Errorf("the hint does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "consistency --url") {
		t.Errorf("the hint suggests a consistency proof the log cannot serve:\n%s", out)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "state")); !bytes.Equal(after, st) {
		t.Error("the state changed")
	}
}

// The monitor's state keeps the rotations it saw, as a trust file's
// retired-at would: after the log's key rotated at tree size 300, a log
// served under the old key alone that continues the tree past 300 (what
// a stolen old key can sign) is refused, whether the monitor saw the
// rotation in the entries (the new key's first entry) or in the rotation
// checkpoint itself (the same tree, signed by both keys); the honest log
// goes on verifying. A state of an earlier version, without the new
// members, reads as before.
func TestMonitorRetiredKey(t *testing.T) {
	oldSkey, oldVkey, err := ledger.GenerateKey("ledger.example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	newSkey, newVkey, _ := ledger.GenerateKey("ledger.example.com/log")
	newKey, _ := ledger.ParseKey([]byte(newSkey), ledger.KeyOptions{})
	oldKey, _ := ledger.ParseKey([]byte(oldSkey), ledger.KeyOptions{})
	both := []string{"--key", oldVkey, "--key", newVkey}
	run := func(dir, url string, extra ...string) (int, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		args := append(append([]string{"monitor", "--state", filepath.Join(dir, "state")}, both...), extra...)
		code := run(append(args, url), nil, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	// The forger: the log's first 300 entries (the same records at the
	// same clock), then 100 more under the old key, which never rotates.
	forged := newTileLog(t, oldSkey)
	forged.add(t, "a", 300)
	forged.add(t, "a", 100)

	t.Run("seen in the rotation checkpoint", func(t *testing.T) {
		honest := newTileLog(t, oldSkey)
		honest.add(t, "a", 300)
		dir := t.TempDir()
		if code, out := run(dir, honest.srv.URL, "--init"); code != exitOK {
			t.Fatalf("first run: %d\n%s", code, out)
		}
		// Before the rotation, the forger's continuation is consistent
		// with the state and signed by a trusted key: nothing tells it
		// from the log's own.
		if code, out := run(t.TempDir(), forged.srv.URL, "--init"); code != exitOK {
			t.Fatalf("the forger's log before any rotation: %d\n%s", code, out)
		}
		honest.rotate(t, oldSkey, newSkey)
		code, out := run(dir, honest.srv.URL)
		if code != exitOK || !strings.Contains(out, "no new entries") ||
			!strings.Contains(out, "key rotation: "+oldKey.ID()+" retired at tree size 300") || !strings.Contains(out, "state saved") {
			t.Fatalf("run after the rotation: %d\n%s", code, out)
		}
		st, _ := os.ReadFile(filepath.Join(dir, "state"))
		if !strings.Contains(string(st), `"retired_keys": {`) || !strings.Contains(string(st), `"`+oldKey.ID()+`": 300`) ||
			!strings.Contains(string(st), `"last_key_id": "`+oldKey.ID()+`"`) {
			t.Fatalf("state:\n%s", st)
		}
		code, out = run(dir, forged.srv.URL)
		if code != exitFailed || !strings.Contains(out, "the checkpoint of tree size 400 is signed only by key "+oldKey.ID()+", retired at tree size 300") {
			t.Fatalf("forged continuation: exit %d, want %d\n%s", code, exitFailed, out)
		}
		if after, _ := os.ReadFile(filepath.Join(dir, "state")); !bytes.Equal(after, st) {
			t.Error("a refused run changed the state")
		}
		honest.add(t, "b", 100)
		if code, out := run(dir, honest.srv.URL); code != exitOK || !strings.Contains(out, "verified: entries 300 to 399") {
			t.Fatalf("honest log after the rotation: %d\n%s", code, out)
		}
		st, _ = os.ReadFile(filepath.Join(dir, "state"))
		if !strings.Contains(string(st), `"last_key_id": "`+newKey.ID()+`"`) || !strings.Contains(string(st), `"`+oldKey.ID()+`": 300`) {
			t.Fatalf("state:\n%s", st)
		}
	})

	t.Run("seen in the entries", func(t *testing.T) {
		honest := newTileLog(t, oldSkey)
		honest.add(t, "a", 300)
		dir := t.TempDir()
		if code, out := run(dir, honest.srv.URL, "--init"); code != exitOK {
			t.Fatalf("first run: %d\n%s", code, out)
		}
		// A state of an earlier version: no last_key_id, no
		// retired_keys. It reads as before.
		st, _ := os.ReadFile(filepath.Join(dir, "state"))
		var m map[string]any
		if err := json.Unmarshal(st, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "last_key_id")
		old, _ := json.Marshal(m)
		os.WriteFile(filepath.Join(dir, "state"), old, 0o644)
		if code, out := run(dir, honest.srv.URL); code != exitOK || !strings.Contains(out, "no new entries") {
			t.Fatalf("state without last_key_id: %d\n%s", code, out)
		}
		honest.rotate(t, oldSkey, newSkey)
		honest.add(t, "b", 50)
		// Without the last key, the switch at the run's first entry is
		// not seen: the state learns nothing, as before.
		other := t.TempDir()
		os.WriteFile(filepath.Join(other, "state"), old, 0o644)
		if code, out := run(other, honest.srv.URL); code != exitOK || strings.Contains(out, "key rotation") {
			t.Fatalf("from a state without last_key_id: %d\n%s", code, out)
		}
		os.WriteFile(filepath.Join(dir, "state"), st, 0o644)
		code, out := run(dir, honest.srv.URL)
		if code != exitOK || !strings.Contains(out, "verified: entries 300 to 349") || !strings.Contains(out, "key rotation: "+oldKey.ID()+" retired at tree size 300") {
			t.Fatalf("run over the rotation: %d\n%s", code, out)
		}
		// The forger, 100 entries past 300 under the old key: refused at
		// its checkpoint (not only as a fork of the entries 300-349 the
		// state holds).
		code, out = run(dir, forged.srv.URL)
		if code != exitFailed || !strings.Contains(out, "signed only by key "+oldKey.ID()+", retired at tree size 300") {
			t.Fatalf("forged continuation: exit %d, want %d\n%s", code, exitFailed, out)
		}
		if !strings.Contains(out, "curl --fail -o") {
			t.Errorf("no way to keep the evidence named:\n%s", out)
		}
	})
}

// A run that finds the state locked by another (a cron run outlasting its
// interval) skips: it says so, exits 0, and changes nothing; once the lock
// is released the next run verifies as usual.
func TestMonitorSkipsWhileLocked(t *testing.T) {
	skey, vkey, err := ledger.GenerateKey("ledger.example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	tl := newTileLog(t, skey)
	dir := t.TempDir()
	if code, out := monitorOnce(t, dir, vkey, tl.srv.URL, "--init"); code != exitOK {
		t.Fatalf("first run: exit %d\n%s", code, out)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "state"))
	tl.add(t, "a", 5)
	held, err := lockState(filepath.Join(dir, "state.lock"))
	if err != nil || held == nil {
		t.Fatalf("taking the lock: %v", err)
	}
	code, out := monitorOnce(t, dir, vkey, tl.srv.URL)
	after, _ := os.ReadFile(filepath.Join(dir, "state"))
	if code != exitOK || !strings.Contains(out, "skipped: another monitor run holds") || !bytes.Equal(before, after) {
		t.Fatalf("while locked: exit %d, state changed %v\n%s", code, !bytes.Equal(before, after), out)
	}
	held.Close()
	if code, out := monitorOnce(t, dir, vkey, tl.srv.URL); code != exitOK || !strings.Contains(out, "verified: entries 0 to 4 (5 new)") {
		t.Fatalf("after the lock is released: exit %d\n%s", code, out)
	}
}
