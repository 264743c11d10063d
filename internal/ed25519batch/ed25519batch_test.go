package ed25519batch_test

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/internal/ed25519batch"
	"pgregory.net/rapid"
)

type vector struct {
	name                string
	seed, pub, msg, sig []byte
}

func readVectors(t *testing.T) []vector {
	t.Helper()
	f, err := os.Open("testdata/rfc8032-7.1.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var vs []vector
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 4 {
			t.Fatalf("line %d: %d fields, want 4", line, len(fields))
		}
		var dec [4][]byte
		for i, s := range fields {
			if s == "-" {
				dec[i] = []byte{}
				continue
			}
			if dec[i], err = hex.DecodeString(s); err != nil {
				t.Fatalf("line %d: %v", line, err)
			}
		}
		vs = append(vs, vector{fmt.Sprintf("TEST%d", len(vs)+1), dec[0], dec[1], dec[2], dec[3]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(vs) != 3 {
		t.Fatalf("read %d vectors, want 3", len(vs))
	}
	return vs
}

func newKey(t testing.TB, priv ed25519.PrivateKey) *ed25519batch.PrivateKey {
	t.Helper()
	k, err := ed25519batch.NewPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestRFC8032(t *testing.T) {
	vs := readVectors(t)
	var msgs [][]byte
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			priv := ed25519.NewKeyFromSeed(v.seed)
			if got := priv.Public().(ed25519.PublicKey); !bytes.Equal(got, v.pub) {
				t.Fatalf("public key %x, want %x", got, v.pub)
			}
			k := newKey(t, priv)
			if got := k.Sign(v.msg); !bytes.Equal(got, v.sig) {
				t.Errorf("Sign = %x, want %x", got, v.sig)
			}
			// In a batch, between two other messages of the same key.
			got := k.SignBatch([][]byte{[]byte("example.com"), v.msg, v.msg[:len(v.msg)/2]})
			if !bytes.Equal(got[1], v.sig) {
				t.Errorf("SignBatch[1] = %x, want %x", got[1], v.sig)
			}
		})
		msgs = append(msgs, v.msg)
	}
	// Vectors of different keys cannot share a batch; one key signing the
	// three messages must agree with crypto/ed25519 too.
	priv := ed25519.NewKeyFromSeed(vs[0].seed)
	got := newKey(t, priv).SignBatch(msgs)
	for i, m := range msgs {
		if w := ed25519.Sign(priv, m); !bytes.Equal(got[i], w) {
			t.Errorf("message %d: SignBatch = %x, crypto/ed25519 = %x", i, got[i], w)
		}
	}
}

func TestNewPrivateKeySize(t *testing.T) {
	for _, n := range []int{0, 32, 63, 65} {
		_, err := ed25519batch.NewPrivateKey(make([]byte, n))
		if !errors.Is(err, ed25519batch.ErrKeySize) {
			t.Errorf("%d-byte key: error %v, want ErrKeySize", n, err)
		}
	}
}

func TestEmptyBatch(t *testing.T) {
	k := newKey(t, ed25519.NewKeyFromSeed(make([]byte, 32)))
	if got := k.SignBatch(nil); got != nil {
		t.Errorf("SignBatch(nil) = %x, want nil", got)
	}
}

// TestMatchesStandardLibrary is the claim of the package doc: random keys,
// messages of 0–2 KiB and batches of 1–300 (past one chunk of 256), every
// signature equal to crypto/ed25519.Sign's and accepted by Verify.
func TestMatchesStandardLibrary(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seed := rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "seed")
		n := rapid.IntRange(1, 300).Draw(t, "n")
		msgs := make([][]byte, n)
		for i := range msgs {
			msgs[i] = rapid.SliceOfN(rapid.Byte(), 0, 2048).Draw(t, fmt.Sprintf("msg%d", i))
		}
		priv := ed25519.NewKeyFromSeed(seed)
		k, err := ed25519batch.NewPrivateKey(priv)
		if err != nil {
			t.Fatal(err)
		}
		sigs := k.SignBatch(msgs)
		if len(sigs) != n {
			t.Fatalf("%d signatures for %d messages", len(sigs), n)
		}
		pub := priv.Public().(ed25519.PublicKey)
		for i, m := range msgs {
			if want := ed25519.Sign(priv, m); !bytes.Equal(sigs[i], want) {
				t.Fatalf("message %d of %d (%d bytes): SignBatch = %x, crypto/ed25519 = %x", i, n, len(m), sigs[i], want)
			}
			if !ed25519.Verify(pub, m, sigs[i]) {
				t.Fatalf("message %d: signature does not verify", i)
			}
			if len(sigs[i]) != ed25519batch.SignatureSize || cap(sigs[i]) != ed25519batch.SignatureSize {
				t.Fatalf("signature %d: len %d cap %d, want %d", i, len(sigs[i]), cap(sigs[i]), ed25519batch.SignatureSize)
			}
		}
	})
}

// TestOrderIndependent signs a batch, and the same messages permuted and
// each alone, and requires the same signature for each message every time:
// a signature must not depend on its neighbours in the batch.
func TestOrderIndependent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seed := rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "seed")
		msgs := rapid.SliceOfN(rapid.SliceOfN(rapid.Byte(), 0, 64), 1, 40).Draw(t, "msgs")
		perm := rapid.Permutation(indices(len(msgs))).Draw(t, "perm")
		k, err := ed25519batch.NewPrivateKey(ed25519.NewKeyFromSeed(seed))
		if err != nil {
			t.Fatal(err)
		}
		sigs := k.SignBatch(msgs)
		permuted := make([][]byte, len(msgs))
		for i, p := range perm {
			permuted[i] = msgs[p]
		}
		psigs := k.SignBatch(permuted)
		for i, p := range perm {
			if !bytes.Equal(psigs[i], sigs[p]) {
				t.Fatalf("message %d at position %d: %x, at position %d: %x", p, p, sigs[p], i, psigs[i])
			}
			if alone := k.Sign(msgs[p]); !bytes.Equal(alone, sigs[p]) {
				t.Fatalf("message %d alone: %x, in the batch: %x", p, alone, sigs[p])
			}
		}
	})
}

func indices(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestUncheckedPublicKey: like crypto/ed25519, the public half of the
// private key is used as given, so even a mismatched key signs the same.
func TestUncheckedPublicKey(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, 32))
	mixed := append(append(ed25519.PrivateKey{}, priv[:32]...), other[32:]...)
	msg := []byte("https://example.com/entry/1")
	if got, want := newKey(t, mixed).Sign(msg), ed25519.Sign(mixed, msg); !bytes.Equal(got, want) {
		t.Errorf("Sign = %x, crypto/ed25519 = %x", got, want)
	}
}

// TestBatchSizes covers every batch size up to past two chunks, with
// equal messages, so that each position's inverse is checked at each size.
func TestBatchSizes(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x5a}, 32))
	k := newKey(t, priv)
	var msgs, want [][]byte
	for i := range 2*256 + 3 {
		m := fmt.Appendf(nil, "example.org message %d", i)
		msgs, want = append(msgs, m), append(want, ed25519.Sign(priv, m))
	}
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 63, 64, 255, 256, 257, 511, 512, 513, 515} {
		got := k.SignBatch(msgs[:n])
		for i := range n {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("batch of %d, message %d: %x, want %x", n, i, got[i], want[i])
			}
		}
	}
}
