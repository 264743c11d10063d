package ledger

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/mod/sumdb/note"
)

const testKeyName = "example.com/ledger"

// noteSKey formats a note private key for seed the way note.GenerateKey
// does, taking the key hash from note's own verifier key, so one seed can be
// written in both formats.
func noteSKey(t testing.TB, name string, seed []byte) string {
	t.Helper()
	vkey, err := note.NewEd25519VerifierKey(name, ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(vkey, "+")
	hash16, _, _ := strings.Cut(rest, "+")
	skey := "PRIVATE+KEY+" + name + "+" + hash16 + "+" + base64.StdEncoding.EncodeToString(append([]byte{0x01}, seed...))
	if _, err := note.NewSigner(skey); err != nil {
		t.Fatalf("note rejects the test's own key text: %v", err)
	}
	return skey
}

// sshPEM encodes key as an OpenSSH private key, encrypted if passphrase is
// not nil.
func sshPEM(t testing.TB, key crypto.PrivateKey, passphrase []byte) []byte {
	t.Helper()
	var block *pem.Block
	var err error
	if passphrase == nil {
		block, err = ssh.MarshalPrivateKey(key, "test")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(key, "test", passphrase)
	}
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

// writeKey writes data to a new file with exactly mode perm (Chmod, so the
// umask does not interfere) and returns its path.
func writeKey(t testing.TB, data []byte, perm fs.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
	return path
}

// secrets lists the forms in which seed could leak into a message.
func secrets(seed []byte, more ...string) []string {
	priv := ed25519.NewKeyFromSeed(seed)
	s := []string{
		base64.StdEncoding.EncodeToString(append([]byte{0x01}, seed...)),
		base64.StdEncoding.EncodeToString(seed),
		base64.StdEncoding.EncodeToString(priv),
		base64.RawURLEncoding.EncodeToString(seed),
		hex.EncodeToString(seed),
		fmt.Sprint([]byte(seed)),
	}
	return append(s, more...)
}

// checkNoSecret fails if msg contains a secret, or any 12-character piece
// of its note base64 (72 bits: a piece found is a leak, not chance).
func checkNoSecret(t testing.TB, msg string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			t.Errorf("message contains a secret (%.6s...): %s", s, msg)
		}
	}
	b64 := secrets[0]
	for i := 0; i+12 <= len(b64); i++ {
		if strings.Contains(msg, b64[i:i+12]) {
			t.Errorf("message contains a piece of the secret's base64: %s", msg)
			return
		}
	}
}

func mustSeed(t testing.TB) []byte {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		t.Fatal(err)
	}
	return seed
}

func TestNoteKeyRoundTrip(t *testing.T) {
	skey, vkey, err := GenerateKey(testKeyName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.NewSigner(skey); err != nil {
		t.Fatalf("note rejects GenerateKey's skey: %v", err)
	}
	for _, tc := range []struct {
		name string
		data string
		opts KeyOptions
	}{
		{"newline", skey + "\n", KeyOptions{}},
		{"no newline", skey, KeyOptions{}},
		{"name given", skey + "\n", KeyOptions{Name: testKeyName}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := LoadKey(writeKey(t, []byte(tc.data), 0o600), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if k.Name() != testKeyName {
				t.Errorf("Name() = %q, want %q", k.Name(), testKeyName)
			}
			if k.VerifierKey() != vkey {
				t.Errorf("VerifierKey() = %q, want %q", k.VerifierKey(), vkey)
			}
			checkID(t, k)
			v, err := note.NewVerifier(vkey)
			if err != nil {
				t.Fatal(err)
			}
			if k.Signer().Name() != v.Name() || k.Signer().KeyHash() != v.KeyHash() {
				t.Errorf("Signer() is %s+%08x, vkey is %s+%08x", k.Signer().Name(), k.Signer().KeyHash(), v.Name(), v.KeyHash())
			}
			k2, err := ParseKey([]byte(tc.data), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !k2.Public().Equal(k.Public()) || k2.ID() != k.ID() {
				t.Error("ParseKey and LoadKey disagree")
			}
		})
	}

	_, err = ParseKey([]byte(skey), KeyOptions{Name: "other.example/log"})
	if !errors.Is(err, errInvalidKeyName) || !strings.Contains(err.Error(), "other.example/log") {
		t.Errorf("name mismatch: got %v, want errInvalidKeyName naming both", err)
	}
}

// checkID checks that ID is the name and 8 lower-case hex digits that
// begin VerifierKey.
func checkID(t *testing.T, k *Key) {
	t.Helper()
	name, hash16, ok := strings.Cut(k.ID(), "+")
	if !ok || name != k.Name() || len(hash16) != 8 || strings.Trim(hash16, "0123456789abcdef") != "" {
		t.Errorf("ID() = %q, want %q+<8 hex digits>", k.ID(), k.Name())
	}
	if want := fmt.Sprintf("%s+%08x", k.Signer().Name(), k.Signer().KeyHash()); k.ID() != want {
		t.Errorf("ID() = %q, Signer() is %q", k.ID(), want)
	}
	if !strings.HasPrefix(k.VerifierKey(), k.ID()+"+") {
		t.Errorf("ID() = %q is not the prefix of VerifierKey() = %q", k.ID(), k.VerifierKey())
	}
}

func TestKeySignatures(t *testing.T) {
	seed := mustSeed(t)
	priv := ed25519.NewKeyFromSeed(seed)
	noteKey, err := ParseKey([]byte(noteSKey(t, testKeyName, seed)), KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sshKey, err := ParseKey(sshPEM(t, priv, nil), KeyOptions{Name: testKeyName})
	if err != nil {
		t.Fatal(err)
	}
	for name, k := range map[string]*Key{"note": noteKey, "openssh": sshKey} {
		t.Run(name, func(t *testing.T) {
			msg := []byte("ledger/v1/entry\n{\"index\":0}")
			sig := k.Sign(msg)
			if !ed25519.Verify(k.Public(), msg, sig) {
				t.Error("Sign: ed25519.Verify fails")
			}
			if !bytes.Equal(sig, ed25519.Sign(priv, msg)) {
				t.Error("Sign: not the signature of the loaded private key")
			}
			if ed25519.Verify(k.Public(), []byte("other"), sig) {
				t.Error("Sign: signature verifies another message")
			}
			msgs := [][]byte{msg, {}, []byte("ledger/v1/entry\n{\"index\":1}"), msg}
			for i, s := range k.SignBatch(msgs) {
				if !bytes.Equal(s, ed25519.Sign(priv, msgs[i])) {
					t.Errorf("SignBatch: signature %d is not crypto/ed25519's", i)
				}
			}

			// A checkpoint in the C2SP tlog-checkpoint shape, signed as a
			// note and opened by note with only the verifier key.
			text := k.Name() + "\n42\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n"
			signed, err := note.Sign(&note.Note{Text: text}, k.Signer())
			if err != nil {
				t.Fatal(err)
			}
			v, err := note.NewVerifier(k.VerifierKey())
			if err != nil {
				t.Fatal(err)
			}
			n, err := note.Open(signed, note.VerifierList(v))
			if err != nil {
				t.Fatalf("note.Open: %v", err)
			}
			if n.Text != text || len(n.Sigs) != 1 || n.Sigs[0].Name != k.Name() ||
				fmt.Sprintf("%s+%08x", n.Sigs[0].Name, n.Sigs[0].Hash) != k.ID() {
				t.Errorf("note.Open = %+v", n)
			}
			tampered := bytes.Replace(signed, []byte("\n42\n"), []byte("\n43\n"), 1)
			if _, err := note.Open(tampered, note.VerifierList(v)); err == nil {
				t.Error("note.Open accepts a changed checkpoint")
			}
		})
	}
}

func TestKeySignConcurrent(t *testing.T) {
	skey, _, err := GenerateKey(testKeyName)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseKey([]byte(skey), KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				msg := fmt.Appendf(nil, "entry %d/%d", i, j)
				if !ed25519.Verify(k.Public(), msg, k.Sign(msg)) {
					t.Errorf("signature %d/%d does not verify", i, j)
				}
			}
		})
	}
	wg.Wait()
}

func TestSameKeyBothFormats(t *testing.T) {
	seed := mustSeed(t)
	fromNote, err := LoadKey(writeKey(t, []byte(noteSKey(t, testKeyName, seed)+"\n"), 0o600), KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fromSSH, err := LoadKey(writeKey(t, sshPEM(t, ed25519.NewKeyFromSeed(seed), nil), 0o600), KeyOptions{Name: testKeyName})
	if err != nil {
		t.Fatal(err)
	}
	if fromNote.ID() != fromSSH.ID() || fromNote.VerifierKey() != fromSSH.VerifierKey() {
		t.Errorf("note key %s, OpenSSH key %s: want the same", fromNote.VerifierKey(), fromSSH.VerifierKey())
	}
	checkID(t, fromSSH)
	want, err := note.NewEd25519VerifierKey(testKeyName, ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if fromSSH.VerifierKey() != want {
		t.Errorf("VerifierKey() = %q, want %q", fromSSH.VerifierKey(), want)
	}
}

func TestOpenSSHKey(t *testing.T) {
	seed := mustSeed(t)
	priv := ed25519.NewKeyFromSeed(seed)
	passphrase := []byte("correct horse battery staple")
	secret := secrets(seed, string(passphrase))
	plain := sshPEM(t, priv, nil)
	encrypted := sshPEM(t, priv, passphrase)

	calls := 0
	give := func(p []byte) func() ([]byte, error) {
		return func() ([]byte, error) { calls++; return p, nil }
	}
	load := func(t *testing.T, data []byte, opts KeyOptions) (*Key, error) {
		t.Helper()
		calls = 0
		k, err := LoadKey(writeKey(t, data, 0o600), opts)
		if err != nil {
			checkNoSecret(t, err.Error(), secret)
		}
		return k, err
	}

	t.Run("plain", func(t *testing.T) {
		k, err := load(t, plain, KeyOptions{Name: testKeyName, Passphrase: give(passphrase)})
		if err != nil {
			t.Fatal(err)
		}
		if calls != 0 {
			t.Error("passphrase asked for an unencrypted key")
		}
		if !k.Public().Equal(priv.Public()) || k.Name() != testKeyName {
			t.Error("wrong key loaded")
		}
	})
	t.Run("passphrase", func(t *testing.T) {
		k, err := load(t, encrypted, KeyOptions{Name: testKeyName, Passphrase: give(passphrase)})
		if err != nil {
			t.Fatal(err)
		}
		if calls != 1 {
			t.Errorf("passphrase asked %d times, want 1", calls)
		}
		if !k.Public().Equal(priv.Public()) {
			t.Error("wrong key loaded")
		}
	})
	t.Run("wrong passphrase", func(t *testing.T) {
		_, err := load(t, encrypted, KeyOptions{Name: testKeyName, Passphrase: give([]byte("Tr0ub4dor&3"))})
		if !errors.Is(err, x509.IncorrectPasswordError) || !strings.Contains(err.Error(), "wrong passphrase") {
			t.Errorf("got %v, want a wrong-passphrase error", err)
		}
		if err != nil && strings.Contains(err.Error(), "Tr0ub4dor&3") {
			t.Errorf("error contains the passphrase: %v", err)
		}
	})
	t.Run("no callback", func(t *testing.T) {
		_, err := load(t, encrypted, KeyOptions{Name: testKeyName})
		if !errors.Is(err, errPassphraseRequired) {
			t.Errorf("got %v, want errPassphraseRequired", err)
		}
	})
	t.Run("callback fails", func(t *testing.T) {
		errTTY := errors.New("no terminal")
		_, err := load(t, encrypted, KeyOptions{Name: testKeyName, Passphrase: func() ([]byte, error) { return nil, errTTY }})
		if !errors.Is(err, errTTY) {
			t.Errorf("got %v, want the callback's error", err)
		}
	})
	t.Run("no name", func(t *testing.T) {
		_, err := load(t, encrypted, KeyOptions{Passphrase: give(passphrase)})
		if !errors.Is(err, errInvalidKeyName) {
			t.Errorf("got %v, want errInvalidKeyName", err)
		}
		if calls != 0 {
			t.Error("passphrase asked for a key refused anyway")
		}
	})
	t.Run("bad name", func(t *testing.T) {
		for _, name := range []string{"a b", "a+b", "a\tb", "a\u00a0b", "\xff"} {
			if _, err := load(t, plain, KeyOptions{Name: name}); !errors.Is(err, errInvalidKeyName) {
				t.Errorf("name %q: got %v, want errInvalidKeyName", name, err)
			}
		}
	})
	t.Run("trailing data", func(t *testing.T) {
		data := append(bytes.Clone(plain), plain...)
		if _, err := load(t, data, KeyOptions{Name: testKeyName}); !errors.Is(err, errMalformedKey) {
			t.Errorf("two keys: got %v, want errMalformedKey", err)
		}
	})
	t.Run("mismatched public key", func(t *testing.T) {
		bad := ed25519.PrivateKey(bytes.Clone(priv))
		other := ed25519.NewKeyFromSeed(mustSeed(t))
		copy(bad[32:], other[32:])
		if _, err := load(t, sshPEM(t, bad, nil), KeyOptions{Name: testKeyName}); !errors.Is(err, errMalformedKey) {
			t.Errorf("got %v, want errMalformedKey", err)
		}
	})
}

func TestOpenSSHKeyTypesRefused(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ask := func() ([]byte, error) {
		t.Error("passphrase asked for a key of the wrong type")
		return []byte("pw"), nil
	}
	for _, tc := range []struct {
		name, keyType string
		data          []byte
	}{
		{"rsa", "ssh-rsa", sshPEM(t, rsaKey, nil)},
		{"rsa encrypted", "ssh-rsa", sshPEM(t, rsaKey, []byte("pw"))},
		{"ecdsa", "ecdsa-sha2-nistp256", sshPEM(t, ecKey, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadKey(writeKey(t, tc.data, 0o600), KeyOptions{Name: testKeyName, Passphrase: ask})
			if !errors.Is(err, errUnsupportedKey) || !strings.Contains(err.Error(), tc.keyType) {
				t.Errorf("got %v, want errUnsupportedKey naming %s", err, tc.keyType)
			}
		})
	}
}

func TestOtherFormatsRefused(t *testing.T) {
	seed := mustSeed(t)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	skey := noteSKey(t, testKeyName, seed)
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"pkcs8 ed25519", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), errUnsupportedKey},
		{"empty", nil, errMalformedKey},
		{"leading space", []byte(" " + skey), errMalformedKey},
		{"verifier key", []byte(strings.TrimPrefix(skey, "PRIVATE+KEY+")), errMalformedKey},
		{"junk before PEM", append([]byte("x\n"), sshPEM(t, ed25519.NewKeyFromSeed(seed), nil)...), errMalformedKey},
		{"too large", []byte(skey + strings.Repeat("\n", maxKeySize)), errMalformedKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseKey(tc.data, KeyOptions{Name: testKeyName})
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			checkNoSecret(t, err.Error(), secrets(seed))
		})
	}
}

func TestNoteKeyCorrupt(t *testing.T) {
	// A key whose hash has a letter, so that upper case changes it (one
	// in about 43 random keys has only digits).
	var seed []byte
	var skey, hash16, key64 string
	for !strings.ContainsAny(hash16, "abcdef") {
		seed = mustSeed(t)
		skey = noteSKey(t, testKeyName, seed)
		_, rest, _ := strings.Cut(strings.TrimPrefix(skey, "PRIVATE+KEY+"), "+")
		hash16, key64, _ = strings.Cut(rest, "+")
	}
	payload, _ := base64.StdEncoding.DecodeString(key64)

	flipHex := func(h string) string {
		b := []byte(h)
		if b[0] == '0' {
			b[0] = '1'
		} else {
			b[0] = '0'
		}
		return string(b)
	}
	withPayload := func(p []byte) string {
		return "PRIVATE+KEY+" + testKeyName + "+" + hash16 + "+" + base64.StdEncoding.EncodeToString(p)
	}
	otherAlg := bytes.Clone(payload)
	otherAlg[0] = 0x02
	// The last base64 character of 33 bytes carries no padding bits, so
	// make a non-canonical spelling by inserting a newline, which
	// base64.DecodeString would skip.
	split := key64[:20] + "\n" + key64[20:]

	for _, tc := range []struct {
		name string
		text string
		want error
	}{
		{"hash altered", strings.Replace(skey, hash16, flipHex(hash16), 1), errMalformedKey},
		{"hash upper case", strings.Replace(skey, hash16, strings.ToUpper(hash16), 1), errMalformedKey},
		{"hash short", strings.Replace(skey, "+"+hash16, "+"+hash16[1:], 1), errMalformedKey},
		{"name altered", strings.Replace(skey, testKeyName, testKeyName+"x", 1), errMalformedKey},
		{"name missing", "PRIVATE+KEY+" + hash16 + "+" + key64, errMalformedKey},
		{"name and hash missing", "PRIVATE+KEY+" + key64, errMalformedKey},
		{"name with space", strings.Replace(skey, testKeyName, "a b", 1), errMalformedKey},
		{"seed altered", withPayload(append([]byte{0x01}, mustSeed(t)...)), errMalformedKey},
		{"seed short", withPayload(payload[:32]), errUnsupportedKey},
		{"seed long", withPayload(append(bytes.Clone(payload), 0)), errUnsupportedKey},
		{"other algorithm", withPayload(otherAlg), errUnsupportedKey},
		{"bad base64", skey[:len(skey)-2] + "!!", errMalformedKey},
		{"base64 with newline", strings.Replace(skey, key64, split, 1), errMalformedKey},
		{"truncated base64", skey[:len(skey)-1], errMalformedKey},
		{"padded base64", skey + "=", errMalformedKey},
		{"two newlines", skey + "\n\n", errMalformedKey},
		{"crlf", skey + "\r\n", errMalformedKey},
		{"trailing space", skey + " ", errMalformedKey},
		{"trailing text", skey + "\nPRIVATE+KEY+", errMalformedKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.text == skey {
				t.Fatal("test case does not change the key")
			}
			_, err := ParseKey([]byte(tc.text), KeyOptions{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.name == "hash altered" && !strings.Contains(err.Error(), "hash does not match") {
				t.Errorf("error %q does not say the hash does not match", err)
			}
			checkNoSecret(t, err.Error(), secrets(seed))
		})
	}
}

func TestKeyFileMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("permission bits do not describe access on Windows")
	}
	seed := mustSeed(t)
	data := []byte(noteSKey(t, testKeyName, seed) + "\n")
	for _, mode := range []fs.FileMode{0o600, 0o400, 0o700} {
		if _, err := LoadKey(writeKey(t, data, mode), KeyOptions{}); err != nil {
			t.Errorf("mode %04o: %v", mode, err)
		}
	}
	for _, mode := range []fs.FileMode{0o644, 0o640, 0o604, 0o660, 0o610, 0o601, 0o666} {
		path := writeKey(t, data, mode)
		_, err := LoadKey(path, KeyOptions{})
		modeErr, ok := errors.AsType[*KeyModeError](err)
		if !ok {
			t.Errorf("mode %04o: got %v, want *KeyModeError", mode, err)
			continue
		}
		if modeErr.Path != path || modeErr.Mode.Perm() != mode {
			t.Errorf("mode %04o: got %+v", mode, *modeErr)
		}
		msg := err.Error()
		if !strings.Contains(msg, path) || !strings.Contains(msg, fmt.Sprintf("%04o", mode)) || !strings.Contains(msg, "chmod 600") {
			t.Errorf("mode %04o: %q does not name the path and mode with a chmod 600 hint", mode, msg)
		}
		checkNoSecret(t, msg, secrets(seed))
	}
}

func TestKeyFileRefused(t *testing.T) {
	skey, _, err := GenerateKey(testKeyName)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(dir, KeyOptions{}); !errors.Is(err, errKeyFile) {
		t.Errorf("directory: got %v, want errKeyFile", err)
	}
	big := writeKey(t, []byte(skey+strings.Repeat("\n", maxKeySize)), 0o600)
	if _, err := LoadKey(big, KeyOptions{}); !errors.Is(err, errKeyFile) {
		t.Errorf("large file: got %v, want errKeyFile", err)
	}
	missing := filepath.Join(dir, "missing")
	if _, err := LoadKey(missing, KeyOptions{}); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: got %v, want fs.ErrNotExist naming the path", err)
	}
	if runtime.GOOS != "windows" {
		link := filepath.Join(dir, "link")
		if err := os.Symlink(writeKey(t, []byte(skey), 0o600), link); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadKey(link, KeyOptions{}); err != nil {
			t.Errorf("symbolic link to a 0600 key: %v", err)
		}
	}
}

func TestGenerateKeyNames(t *testing.T) {
	for _, name := range []string{"", "a b", "a+b", "a\nb", "a\u2028b", "\xff", "log\x1b[2J", "log\u202eexample", "a\u200db", "a\x00b"} {
		if _, _, err := GenerateKey(name); !errors.Is(err, errInvalidKeyName) {
			t.Errorf("GenerateKey(%q): got %v, want errInvalidKeyName", name, err)
		}
	}
	for _, name := range []string{"a", "example.com/log", "日志"} {
		skey, vkey, err := GenerateKey(name)
		if err != nil {
			t.Errorf("GenerateKey(%q): %v", name, err)
			continue
		}
		if k, err := ParseKey([]byte(skey), KeyOptions{Name: name}); err != nil || k.VerifierKey() != vkey {
			t.Errorf("GenerateKey(%q): key does not load back: %v", name, err)
		}
	}
}

// TestKeyNeverPrinted checks that a Key handed to fmt or slog by mistake
// shows its ID and none of its private bytes.
func TestKeyNeverPrinted(t *testing.T) {
	seed := mustSeed(t)
	k, err := ParseKey([]byte(noteSKey(t, testKeyName, seed)), KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%X", "%q", "%o", "%b"} {
		fmt.Fprintf(&out, verb+"\n", k)
		fmt.Fprintf(&out, verb+"\n", *k)
		fmt.Fprintf(&out, verb+"\n", struct{ K *Key }{k})
		fmt.Fprintf(&out, verb+"\n", struct{ K Key }{*k})
		fmt.Fprintf(&out, verb+"\n", []*Key{k})
	}
	slog.New(slog.NewTextHandler(&out, nil)).Info("key", "key", k, "value", *k)
	slog.New(slog.NewJSONHandler(&out, nil)).Info("key", "key", k, "value", *k)
	printed := out.String()
	if !strings.Contains(printed, k.ID()) {
		t.Errorf("printed key does not show its ID:\n%s", printed)
	}
	privHex := hex.EncodeToString(k.priv)
	checkNoSecret(t, printed, secrets(seed, privHex, strings.ToUpper(privHex), strings.TrimSuffix(fmt.Sprint(seed[:8]), "]")))
}

// FuzzParseKey checks that ParseKey never panics, and that a note key it
// accepts is exactly the text note would write for that key: one spelling
// per key.
func FuzzParseKey(f *testing.F) {
	seed := make([]byte, ed25519.SeedSize)
	skey := noteSKey(f, testKeyName, seed)
	f.Add([]byte(skey))
	f.Add([]byte(skey + "\n"))
	f.Add([]byte(skey[:len(skey)-3]))
	f.Add(sshPEM(f, ed25519.NewKeyFromSeed(seed), nil))
	f.Add([]byte("PRIVATE+KEY+a+00000000+AQ=="))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParseKey(data, KeyOptions{Name: testKeyName})
		if err != nil {
			return
		}
		if !bytes.HasPrefix(data, []byte("PRIVATE+KEY+")) {
			return
		}
		want := noteSKey(t, k.Name(), k.priv.Seed())
		if got := strings.TrimSuffix(string(data), "\n"); got != want {
			t.Errorf("accepted %q, which note writes as %q", got, want)
		}
	})
}
