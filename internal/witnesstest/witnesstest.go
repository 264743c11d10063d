// Package witnesstest is an in-process C2SP tlog-witness add-checkpoint
// endpoint for tests: it checks a submission as the spec says (the log's
// signature, the old size, the consistency proof) and cosigns with
// torchwood's cosignature/v1 signer. It runs everywhere, and can
// misbehave; the tests of real witnesses run litewitness
// (daemon/litewitness_test.go).
package witnesstest

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"filippo.io/torchwood"
	tlog "github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// Witness is a witness of one log, serving until the test ends.
type Witness struct {
	// URL is its submission prefix, VKey its cosignature/v1 verifier key
	// ("<name>+<hash>+<base64>").
	URL, VKey string

	signer *torchwood.CosignatureSigner
	logv   note.Verifier
	srv    *httptest.Server

	mu   sync.Mutex
	size uint64
	root []byte
	// wrongKey, if set, cosigns with another key than VKey's.
	wrongKey *torchwood.CosignatureSigner
	// down, if set, answers every submission 503.
	down bool
	// flip, if set, changes a byte of the signature it returns.
	flip  bool
	stats Stats
}

// Stats counts a witness's answers.
type Stats struct {
	Requests  int // submissions answered, but those refused while down
	Accepted  int // checkpoints cosigned
	Conflicts int // 409 answers
}

// New starts a witness named name (the name of its key) for the log of
// verifier key logVKey, knowing the empty tree.
func New(t testing.TB, name, logVKey string) *Witness {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, err := torchwood.NewCosignatureSigner(name, priv)
	if err != nil {
		t.Fatal(err)
	}
	logv, err := note.NewVerifier(logVKey)
	if err != nil {
		t.Fatal(err)
	}
	w := &Witness{signer: s, VKey: s.Verifier().String(), logv: logv, root: rfc6962.DefaultHasher.EmptyRoot()}
	w.srv = httptest.NewServer(http.HandlerFunc(w.addCheckpoint))
	w.URL = w.srv.URL
	t.Cleanup(w.srv.Close)
	return w
}

// Close stops the witness: its URL no longer answers.
func (w *Witness) Close() { w.srv.Close() }

// SetTree makes the witness know the log at size with root, as if it had
// cosigned that tree (another history's, say).
func (w *Witness) SetTree(size uint64, root []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.size, w.root = size, bytes.Clone(root)
}

// SetDown makes the witness refuse every submission with 503, or answer
// again.
func (w *Witness) SetDown(down bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.down = down
}

// SetFlip makes the witness return its cosignatures with a byte of the
// signature changed.
func (w *Witness) SetFlip(flip bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flip = flip
}

// UseOtherKey makes the witness cosign with a new key of the same name,
// not VKey's.
func (w *Witness) UseOtherKey() {
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	s, err := torchwood.NewCosignatureSigner(w.signer.Name(), other)
	if err != nil {
		panic(err) // the name was accepted once
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wrongKey = s
}

// Stats returns the witness's counts so far.
func (w *Witness) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Conflicts is the 409 answers of ws, summed.
func Conflicts(ws []*Witness) (n int) {
	for _, w := range ws {
		n += w.Stats().Conflicts
	}
	return n
}

func (w *Witness) addCheckpoint(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/add-checkpoint" {
		http.NotFound(rw, r)
		return
	}
	br := bufio.NewReader(io.LimitReader(r.Body, 64<<10))
	first, _ := br.ReadString('\n')
	old, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(first, "old "), "\n"), 10, 64)
	if err != nil {
		http.Error(rw, "bad old line", http.StatusBadRequest)
		return
	}
	var p [][]byte
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			http.Error(rw, "no blank line", http.StatusBadRequest)
			return
		}
		if line == "\n" {
			break
		}
		h, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(line, "\n"))
		if err != nil {
			http.Error(rw, "bad proof line", http.StatusBadRequest)
			return
		}
		p = append(p, h)
	}
	signed, _ := io.ReadAll(br)
	n, err := note.Open(signed, note.VerifierList(w.logv))
	if err != nil {
		http.Error(rw, "bad signature", http.StatusForbidden)
		return
	}
	cp := &tlog.Checkpoint{}
	if _, err := cp.Unmarshal([]byte(n.Text)); err != nil {
		http.Error(rw, "bad checkpoint", http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.down {
		http.Error(rw, "down", http.StatusServiceUnavailable)
		return
	}
	w.stats.Requests++
	if old != w.size {
		w.stats.Conflicts++
		rw.Header().Set("Content-Type", "text/x.tlog.size")
		rw.WriteHeader(http.StatusConflict)
		fmt.Fprintf(rw, "%d\n", w.size)
		return
	}
	if old > cp.Size || (old == 0 && len(p) != 0) {
		http.Error(rw, "bad old size", http.StatusBadRequest)
		return
	}
	if old > 0 {
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, old, cp.Size, p, w.root, cp.Hash); err != nil {
			http.Error(rw, "bad proof", http.StatusUnprocessableEntity)
			return
		}
	}
	signer := w.signer
	if w.wrongKey != nil {
		signer = w.wrongKey
	}
	cosigned, err := note.Sign(&note.Note{Text: n.Text}, signer)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	w.size, w.root = cp.Size, cp.Hash
	w.stats.Accepted++
	line := cosigned[len(n.Text)+1:]
	if w.flip {
		name, b64, _ := strings.Cut(strings.TrimSuffix(string(line), "\n"), " "+w.signer.Name()+" ")
		sig, _ := base64.StdEncoding.DecodeString(b64)
		sig[len(sig)-1] ^= 1
		line = []byte(name + " " + w.signer.Name() + " " + base64.StdEncoding.EncodeToString(sig) + "\n")
	}
	rw.Write(line)
}

// FlipSignatureByte returns the signature line with the last byte of its
// signature changed (the line stays canonical base64 of the same length).
func FlipSignatureByte(t testing.TB, line []byte) []byte {
	t.Helper()
	rest, ok := bytes.CutPrefix(line, []byte("— "))
	name, b64, ok2 := bytes.Cut(bytes.TrimSuffix(rest, []byte("\n")), []byte(" "))
	sig, err := base64.StdEncoding.DecodeString(string(b64))
	if !ok || !ok2 || err != nil {
		t.Fatalf("not a signature line: %q", line)
	}
	sig[len(sig)-1] ^= 1
	out := fmt.Appendf(nil, "— %s %s\n", name, base64.StdEncoding.EncodeToString(sig))
	if bytes.Equal(out, line) {
		t.Fatal("flipping changed nothing")
	}
	return out
}
