package ledger

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/ed25519batch"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"
	"golang.org/x/mod/sumdb/note"
)

// Key files are small; the cap keeps a mistaken path (a log, a device)
// from being read into memory and bounds the work done on hostile input.
const maxKeySize = 64 << 10

const (
	notePrefix    = "PRIVATE+KEY+"
	noteAlgEd     = 0x01 // note's algorithm byte for Ed25519
	opensshPrefix = "-----BEGIN OPENSSH PRIVATE KEY-----"
	opensshType   = "OPENSSH PRIVATE KEY"
)

// Reasons a key is refused, wrapped with detail. None of the messages built
// around them contains key material: a fragment of a corrupt key file may be
// the secret itself, so refusals describe the fault and never quote the text.
var (
	errMalformedKey       = errors.New("malformed key")
	errUnsupportedKey     = errors.New("unsupported key")
	errInvalidKeyName     = errors.New("invalid key name")
	errPassphraseRequired = errors.New("key is passphrase-protected")
	errKeyFile            = errors.New("unusable key file")
)

// KeyModeError reports a key file that group or others may access. The
// ledger refuses it, as ssh does, because a signing key that others can read
// lets them forge entries and checkpoints.
type KeyModeError struct {
	Path string
	Mode fs.FileMode
}

func (e *KeyModeError) Error() string {
	return fmt.Sprintf("ledger: key file %s has mode %04o, which gives group or others access; run chmod 600 %s",
		e.Path, uint32(e.Mode.Perm()), e.Path)
}

// KeyOptions says how to read a key file.
type KeyOptions struct {
	// Name is the note key name, which is also the log origin that
	// checkpoints carry. It is required for OpenSSH keys, which carry no
	// name. It is optional for note keys, whose text holds the name; if
	// given, it must equal that name, so a configuration cannot silently
	// sign as a different log than it says.
	Name string

	// Passphrase is called, once, only when an OpenSSH key is
	// passphrase-protected. If it is nil, such a key is refused. The
	// returned bytes are used to decrypt the key and are not retained.
	Passphrase func() ([]byte, error)
}

// Key is the ledger's Ed25519 signing key. One key signs entries (see Sign)
// and checkpoints (see Signer), so an auditor trusts a single verifier key.
//
// A Key is immutable and safe for concurrent use. Printed with fmt or
// logged with slog it shows only its ID, never the private key.
type Key struct {
	priv ed25519.PrivateKey
	// signer is priv prepared for signing: its signatures are those of
	// crypto/ed25519, for less CPU, and many at once for less again.
	signer *ed25519batch.PrivateKey
	name   string
	hash   uint32 // note key hash of name and public key
	id     string // name+hash
	vkey   string // name+hash+base64(0x01 || public key)
}

// LoadKey reads the signing key in the file at path; see ParseKey for the
// formats. It refuses a file that is not a regular file, that is larger
// than 64 KiB, or (except on Windows, where permission bits do not describe
// access) whose mode gives group or others any permission, with a
// *KeyModeError. Symbolic links are followed and the target is checked.
func LoadKey(path string, opts KeyOptions) (*Key, error) {
	data, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	defer clear(data)
	k, err := parseKey(data, opts)
	if err != nil {
		return nil, fmt.Errorf("ledger: loading key %s: %w", path, err)
	}
	return k, nil
}

func readKeyFile(path string) ([]byte, error) {
	// Stat before opening: opening a FIFO would block until a writer came.
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("ledger: loading key: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("ledger: loading key %s: %w: not a regular file (mode %s)", path, errKeyFile, st.Mode())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ledger: loading key: %w", err)
	}
	defer f.Close()
	// Judge the file actually opened, in case path changed since Stat.
	fst, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("ledger: loading key: %w", err)
	}
	if !os.SameFile(st, fst) || !fst.Mode().IsRegular() {
		return nil, fmt.Errorf("ledger: loading key %s: %w: file changed while opening it", path, errKeyFile)
	}
	if runtime.GOOS != "windows" && fst.Mode().Perm()&0o077 != 0 {
		return nil, &KeyModeError{Path: path, Mode: fst.Mode()}
	}
	if fst.Size() > maxKeySize {
		return nil, fmt.Errorf("ledger: loading key %s: %w: larger than %d bytes", path, errKeyFile, maxKeySize)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeySize+1))
	if err != nil {
		clear(data)
		return nil, fmt.Errorf("ledger: loading key: %w", err)
	}
	if len(data) > maxKeySize {
		clear(data)
		return nil, fmt.Errorf("ledger: loading key %s: %w: larger than %d bytes", path, errKeyFile, maxKeySize)
	}
	return data, nil
}

// ParseKey parses a signing key, as LoadKey does but without the file
// checks. It accepts two formats:
//
//   - a note private key, "PRIVATE+KEY+<name>+<hash>+<base64>" as written by
//     GenerateKey and golang.org/x/mod/sumdb/note, optionally followed by
//     one newline. The base64 payload is the algorithm byte 0x01 and the
//     32-byte Ed25519 seed; hash is the note key hash of the name and public
//     key, in 8 lower-case hex digits, and must match the key. The text must
//     be exactly as note writes it: nothing else is tolerated.
//   - an OpenSSH Ed25519 private key ("-----BEGIN OPENSSH PRIVATE KEY-----"),
//     optionally passphrase-protected. opts.Name must give its name. Other
//     key types (RSA, ECDSA, security keys) and other PEM formats are
//     refused: the ledger's signatures are Ed25519 only.
func ParseKey(data []byte, opts KeyOptions) (*Key, error) {
	k, err := parseKey(data, opts)
	if err != nil {
		return nil, fmt.Errorf("ledger: parsing key: %w", err)
	}
	return k, nil
}

func parseKey(data []byte, opts KeyOptions) (*Key, error) {
	if opts.Name != "" && !validKeyName(opts.Name) {
		return nil, fmt.Errorf("%w %q: want non-empty UTF-8 without spaces, '+', control or format characters", errInvalidKeyName, opts.Name)
	}
	if len(data) > maxKeySize {
		return nil, fmt.Errorf("%w: larger than %d bytes", errMalformedKey, maxKeySize)
	}
	switch {
	case bytes.HasPrefix(data, []byte(notePrefix)):
		return parseNoteKey(data, opts.Name)
	case bytes.HasPrefix(data, []byte(opensshPrefix)):
		return parseOpenSSHKey(data, opts)
	case bytes.HasPrefix(data, []byte("-----BEGIN ")):
		if block, _ := pem.Decode(data); block != nil {
			return nil, fmt.Errorf("%w: PEM block %q: want an OpenSSH Ed25519 key (%q) or a note key", errUnsupportedKey, block.Type, opensshType)
		}
	}
	return nil, fmt.Errorf("%w: want a note private key (%s...) or an OpenSSH Ed25519 private key", errMalformedKey, notePrefix)
}

// parseNoteKey parses a note private key. Fields of the text are never
// quoted in errors: in a corrupt file the "name" or "hash" may be a piece of
// the base64 secret.
func parseNoteKey(data []byte, wantName string) (*Key, error) {
	data = bytes.TrimSuffix(data, []byte("\n"))
	text := string(data)
	rest, _ := strings.CutPrefix(text, notePrefix)
	name, rest, ok1 := strings.Cut(rest, "+")
	hash16, key64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%w: note key: want PRIVATE+KEY+<name>+<hash>+<base64>", errMalformedKey)
	}
	if !validKeyName(name) {
		return nil, fmt.Errorf("%w: note key: %w: want non-empty UTF-8 without spaces, '+', control or format characters", errMalformedKey, errInvalidKeyName)
	}
	if len(hash16) != 8 || strings.Trim(hash16, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("%w: note key: hash is not 8 lower-case hex digits", errMalformedKey)
	}
	payload, err := base64.StdEncoding.Strict().DecodeString(key64)
	defer clear(payload)
	// DecodeString skips newlines; comparing with the re-encoding refuses
	// them and any other second spelling of the same bytes.
	if err != nil || base64.StdEncoding.EncodeToString(payload) != key64 {
		return nil, fmt.Errorf("%w: note key: key is not canonical base64", errMalformedKey)
	}
	if len(payload) != 1+ed25519.SeedSize || payload[0] != noteAlgEd {
		return nil, fmt.Errorf("%w: note key: want algorithm byte 0x01 (Ed25519) and a %d-byte seed", errUnsupportedKey, ed25519.SeedSize)
	}
	k, err := newKey(name, ed25519.NewKeyFromSeed(payload[1:]))
	if err != nil {
		return nil, err
	}
	if hash16 != fmt.Sprintf("%08x", k.hash) {
		return nil, fmt.Errorf("%w: note key: hash does not match the name and key", errMalformedKey)
	}
	// Cross-check with note's own parser: a key it refuses could not sign
	// checkpoints that note implementations verify.
	if _, err := note.NewSigner(text); err != nil {
		return nil, fmt.Errorf("%w: note key: %v", errMalformedKey, err)
	}
	if wantName != "" && name != wantName {
		return nil, fmt.Errorf("%w: key is named %q, not %q", errInvalidKeyName, name, wantName)
	}
	return k, nil
}

func parseOpenSSHKey(data []byte, opts KeyOptions) (*Key, error) {
	// ssh.ParseRawPrivateKey takes the first PEM block and ignores the
	// rest; require exactly one block with no headers.
	block, rest := pem.Decode(data)
	if block == nil || block.Type != opensshType || len(block.Headers) != 0 || len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%w: OpenSSH key: want exactly one %q PEM block", errMalformedKey, opensshType)
	}
	if opts.Name == "" {
		return nil, fmt.Errorf("%w: an OpenSSH key carries no log name: set KeyOptions.Name", errInvalidKeyName)
	}
	raw, err := ssh.ParseRawPrivateKey(data)
	if missing, ok := errors.AsType[*ssh.PassphraseMissingError](err); ok {
		// The public key is stored in clear: refuse a key of the wrong
		// type before asking anyone for its passphrase.
		if missing.PublicKey != nil && missing.PublicKey.Type() != ssh.KeyAlgoED25519 {
			return nil, fmt.Errorf("%w: OpenSSH key is %s, want %s", errUnsupportedKey, missing.PublicKey.Type(), ssh.KeyAlgoED25519)
		}
		if opts.Passphrase == nil {
			return nil, fmt.Errorf("%w: OpenSSH key is encrypted and no passphrase callback was given", errPassphraseRequired)
		}
		pass, perr := opts.Passphrase()
		if perr != nil {
			return nil, fmt.Errorf("reading passphrase: %w", perr)
		}
		raw, err = ssh.ParseRawPrivateKeyWithPassphrase(data, pass)
		if errors.Is(err, x509.IncorrectPasswordError) {
			return nil, fmt.Errorf("OpenSSH key: wrong passphrase: %w", err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: OpenSSH key: %v", errMalformedKey, err)
	}
	var sk ed25519.PrivateKey
	switch r := raw.(type) {
	case *ed25519.PrivateKey:
		sk = *r
	case ed25519.PrivateKey:
		sk = r
	default:
		return nil, fmt.Errorf("%w: OpenSSH key is %s, want %s", errUnsupportedKey, sshKeyType(raw), ssh.KeyAlgoED25519)
	}
	defer clear(sk)
	if len(sk) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: OpenSSH key: Ed25519 key of %d bytes", errMalformedKey, len(sk))
	}
	// The file stores seed and public key side by side; ssh does not check
	// that they agree, and a signature from a mismatched pair would not
	// verify.
	priv := ed25519.NewKeyFromSeed(sk[:ed25519.SeedSize])
	if !bytes.Equal(priv[ed25519.SeedSize:], sk[ed25519.SeedSize:]) {
		clear(priv)
		return nil, fmt.Errorf("%w: OpenSSH key: public key does not match the private key", errMalformedKey)
	}
	return newKey(opts.Name, priv)
}

// sshKeyType names a parsed private key's type as ssh does ("ssh-rsa",
// "ecdsa-sha2-nistp256"), for a refusal that says what was found.
func sshKeyType(raw any) string {
	if s, err := ssh.NewSignerFromKey(raw); err == nil {
		return s.PublicKey().Type()
	}
	return fmt.Sprintf("%T", raw)
}

// newKey makes a Key, computing the verifier key and its hash with note
// itself so that ID and VerifierKey agree with every note implementation.
func newKey(name string, priv ed25519.PrivateKey) (*Key, error) {
	if !validKeyName(name) {
		return nil, fmt.Errorf("%w %q: want non-empty UTF-8 without spaces, '+', control or format characters", errInvalidKeyName, name)
	}
	vkey, err := note.NewEd25519VerifierKey(name, priv.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformedKey, err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("%w: verifier key: %v", errMalformedKey, err)
	}
	signer, err := ed25519batch.NewPrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformedKey, err)
	}
	return &Key{
		priv:   priv,
		signer: signer,
		name:   name,
		hash:   v.KeyHash(),
		id:     fmt.Sprintf("%s+%08x", name, v.KeyHash()),
		vkey:   vkey,
	}, nil
}

// validKeyName applies note's rule for key names: non-empty, well-formed
// UTF-8, no Unicode space and no '+', which separates the fields of a key.
// The name is also the log's origin, an identifier of every entry, so it
// holds no control or format character either (docs/entry.md §1.1).
func validKeyName(name string) bool {
	return name != "" && utf8.ValidString(name) &&
		strings.IndexFunc(name, unicode.IsSpace) < 0 && !strings.Contains(name, "+") &&
		entry.CheckIdentifier(name) == nil
}

// GenerateKey makes a new signing key named name (the log origin) with
// golang.org/x/mod/sumdb/note. skey is the private key text, without a
// trailing newline: store it (a newline after it is fine) in a file only its
// owner can read, mode 0600. vkey is the verifier key to give auditors.
func GenerateKey(name string) (skey, vkey string, err error) {
	if !validKeyName(name) {
		return "", "", fmt.Errorf("ledger: generating key: %w %q: want non-empty UTF-8 without spaces, '+', control or format characters", errInvalidKeyName, name)
	}
	skey, vkey, err = note.GenerateKey(rand.Reader, name)
	if err != nil {
		return "", "", fmt.Errorf("ledger: generating key: %w", err)
	}
	return skey, vkey, nil
}

// Name returns the note key name, which is also the log origin on the
// first line of every checkpoint.
func (k *Key) Name() string { return k.name }

// ID returns "<name>+<hash>", the note key name and the 8 hex digits of its
// key hash: the start of VerifierKey, which entries record so an auditor can
// tell which trusted key signed them.
func (k *Key) ID() string { return k.id }

// VerifierKey returns the note verifier key "<name>+<hash>+<base64>", which
// auditors pass to note.NewVerifier to check entries and checkpoints.
func (k *Key) VerifierKey() string { return k.vkey }

// Public returns a copy of the Ed25519 public key.
func (k *Key) Public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }

// Sign returns the Ed25519 signature of message, the bytes
// crypto/ed25519.Sign returns. Checkpoints go through Signer, which adds
// note's framing, and entries through SignBatch. It is safe for concurrent
// use.
func (k *Key) Sign(message []byte) []byte { return k.signer.Sign(message) }

// SignBatch returns the Ed25519 signatures of messages, in order, each the
// bytes crypto/ed25519.Sign returns for its message: a batch shares one
// field inversion among its signatures (see internal/ed25519batch). It is
// safe for concurrent use, so entries may be signed on every core.
func (k *Key) SignBatch(messages [][]byte) [][]byte { return k.signer.SignBatch(messages) }

// Signer returns the key as a note.Signer, for signing checkpoints with
// note.Sign. Its Name and KeyHash are those of VerifierKey.
func (k *Key) Signer() note.Signer { return noteSigner{k} }

type noteSigner struct{ k *Key }

func (s noteSigner) Name() string                    { return s.k.name }
func (s noteSigner) KeyHash() uint32                 { return s.k.hash }
func (s noteSigner) Sign(msg []byte) ([]byte, error) { return s.k.Sign(msg), nil }

// String returns the key's ID.
//
// String, Format and LogValue have value receivers so that a Key value,
// not only a *Key, never prints its private bytes.
func (k Key) String() string { return k.id }

// Format writes the key's ID for every verb: fmt would otherwise print the
// private key's bytes for verbs such as %d or %+v.
func (k Key) Format(f fmt.State, _ rune) { io.WriteString(f, k.id) }

// LogValue logs the key as its ID.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.id) }
