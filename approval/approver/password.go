package approver

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
	"golang.org/x/text/unicode/norm"
)

// The argon2id parameters of HashPassword: 64 MiB, 3 passes, 2 lanes, a
// 16-byte salt and a 32-byte key (RFC 9106 §4's second recommended
// option, with 2 lanes for a 2-core server). One computation takes about
// 0.13 s on a 2-core Xeon (BenchmarkVerifyPassword, median of 6 runs).
const (
	MemoryKiB = 64 * 1024
	Time      = 3
	Threads   = 2
	SaltLen   = 16
	KeyLen    = 32
)

// The bounds of an encoding that VerifyPassword accepts. The upper bounds
// keep a config from making each sign-in cost more than a second or a GiB;
// the lower ones are argon2's own (RFC 9106 §3.1).
const (
	maxMemoryKiB  = 1 << 20 // 1 GiB
	maxTime       = 10
	maxThreads    = 16
	minSaltLen    = 8
	maxSaltLen    = 64
	minKeyLen     = 16
	maxKeyLen     = 64
	maxEncodedLen = 256
)

// The bounds of a password: at least MinPasswordLen characters (Unicode
// code points, after normalization) and at most MaxPasswordLen bytes, as
// given. A longer one is refused before any work: argon2 would accept
// megabytes.
const (
	MinPasswordLen = 12
	MaxPasswordLen = 1024
)

// Errors of a password that HashPassword refuses. The password itself is
// never in them.
var (
	ErrPasswordTooShort = errors.New("password shorter than 12 characters")
	ErrPasswordTooLong  = errors.New("password longer than 1,024 bytes")
	ErrPasswordNotUTF8  = errors.New("password is not valid UTF-8")
)

// ErrBusy is returned when too many argon2 computations are running or
// waiting (see the package doc, "Costs"): try again later.
var ErrBusy = errors.New("too many password checks at once")

// HashError is a password hash (an encoding) that VerifyPassword or
// Approver.Check refuses. Reason names the part at fault and never repeats
// the salt or the hash.
type HashError struct {
	Reason string
}

func (e *HashError) Error() string { return "password_argon2id: " + e.Reason }

// params are argon2id's cost parameters.
type params struct {
	memory  uint32 // KiB
	time    uint32
	threads uint8
}

// defaultParams are the documented parameters.
var defaultParams = params{MemoryKiB, Time, Threads}

// hashParams are the parameters HashPassword uses, and the unknown name's
// dummy verification: defaultParams, which tests lower to stay fast.
var hashParams = defaultParams

// idKey is argon2.IDKey; tests replace it to count and hold computations.
var idKey = argon2.IDKey

// The gate bounds argon2's memory: at most slots computations run at
// once (64 MiB each with the documented parameters), and at most
// maxWaiting more wait for a slot; beyond that, ErrBusy at once, so that a
// flood of sign-ins holds neither memory nor an unbounded queue.
const (
	slots      = 2
	maxWaiting = 32
)

var gate = struct {
	slots chan struct{}
	in    atomic.Int32 // running and waiting
}{slots: make(chan struct{}, slots)}

// derive computes argon2id within the gate.
func derive(password, salt []byte, p params, keyLen uint32) ([]byte, error) {
	if gate.in.Add(1) > slots+maxWaiting {
		gate.in.Add(-1)
		return nil, ErrBusy
	}
	gate.slots <- struct{}{}
	defer func() {
		<-gate.slots
		gate.in.Add(-1)
	}()
	return idKey(password, salt, p.time, p.memory, p.threads, keyLen), nil
}

// normalize checks the bounds of a password and returns its bytes as
// hashed: the NFKC form (NIST SP 800-63B §5.1.1.2), so that the same
// password typed on two systems gives the same bytes.
func normalize(pw string) ([]byte, error) {
	if len(pw) > MaxPasswordLen {
		return nil, ErrPasswordTooLong
	}
	if !utf8.ValidString(pw) {
		return nil, ErrPasswordNotUTF8
	}
	b := norm.NFKC.Bytes([]byte(pw))
	if utf8.RuneCount(b) < MinPasswordLen {
		return nil, ErrPasswordTooShort
	}
	return b, nil
}

// HashPassword returns the argon2id hash of pw in the PHC string format,
// with a random 16-byte salt and the documented parameters:
//
//	$argon2id$v=19$m=65536,t=3,p=2$<salt>$<key>
//
// pw must be valid UTF-8, at least 12 characters and at most 1,024 bytes.
func HashPassword(pw string) (string, error) {
	b, err := normalize(pw)
	if err != nil {
		return "", err
	}
	salt := make([]byte, SaltLen)
	rand.Read(salt)
	p := hashParams
	key, err := derive(b, salt, p, KeyLen)
	if err != nil {
		return "", err
	}
	return encodeHash(p, salt, key), nil
}

// VerifyPassword reports whether pw is the password of the hash encoded.
// It returns a *HashError for an encoding that is malformed or whose
// parameters are out of bounds, ErrPasswordTooLong for a password over
// 1,024 bytes (without computing anything), and ErrBusy when the gate is
// full. A password that is not valid UTF-8 or shorter than 12 characters
// is simply not the password (false, nil): no hash was ever made of one.
// The keys are compared in constant time.
func VerifyPassword(encoded, pw string) (bool, error) {
	p, salt, key, err := decodeHash(encoded)
	if err != nil {
		return false, err
	}
	b, err := normalize(pw)
	switch {
	case errors.Is(err, ErrPasswordTooLong):
		return false, err
	case err != nil:
		return false, nil
	}
	got, err := derive(b, salt, p, uint32(len(key)))
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got, key) == 1, nil
}

// dummyVerify costs what verifying a password of a documented hash costs,
// for a name that has none (Sessions.Login).
func dummyVerify(pw string) error {
	b, err := normalize(pw)
	if err != nil {
		return nil // a real verification stops here too
	}
	_, err = derive(b, make([]byte, SaltLen), hashParams, KeyLen)
	return err
}

var b64 = base64.RawStdEncoding.Strict()

// encodeHash is the PHC string of an argon2id hash.
func encodeHash(p params, salt, key []byte) string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.memory, p.time, p.threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// decodeHash parses a PHC string strictly: exactly the form encodeHash
// writes (decimal numbers without a sign or leading zeros, m, t and p in
// that order, base64 without padding or stray bits), so that every
// accepted encoding is the one encodeHash gives back.
func decodeHash(s string) (p params, salt, key []byte, err error) {
	bad := func(format string, args ...any) (params, []byte, []byte, error) {
		return params{}, nil, nil, &HashError{fmt.Sprintf(format, args...)}
	}
	if len(s) > maxEncodedLen {
		return bad("longer than %d bytes", maxEncodedLen)
	}
	fields := strings.Split(s, "$")
	if len(fields) != 6 || fields[0] != "" {
		return bad("not in the form $argon2id$v=19$m=M,t=T,p=P$SALT$HASH")
	}
	if fields[1] != "argon2id" {
		return bad("not an argon2id hash")
	}
	if fields[2] != "v=19" {
		return bad("version is not v=19")
	}
	ps := strings.Split(fields[3], ",")
	if len(ps) != 3 {
		return bad("parameters are not m=M,t=T,p=P")
	}
	var n [3]uint64
	for i, name := range []string{"m", "t", "p"} {
		v, ok := strings.CutPrefix(ps[i], name+"=")
		if !ok {
			return bad("parameters are not m=M,t=T,p=P")
		}
		n[i], err = strconv.ParseUint(v, 10, 32)
		if err != nil || strconv.FormatUint(n[i], 10) != v {
			return bad("parameter %s is not a decimal number", name)
		}
	}
	switch {
	case n[2] < 1 || n[2] > maxThreads:
		return bad("p=%d is out of bounds: 1 to %d", n[2], maxThreads)
	case n[1] < 1 || n[1] > maxTime:
		return bad("t=%d is out of bounds: 1 to %d", n[1], maxTime)
	case n[0] < 8*n[2] || n[0] > maxMemoryKiB:
		return bad("m=%d is out of bounds: 8×p to %d KiB", n[0], maxMemoryKiB)
	}
	p = params{memory: uint32(n[0]), time: uint32(n[1]), threads: uint8(n[2])}
	// The decoder skips line breaks: the round trip refuses them.
	if salt, err = b64.DecodeString(fields[4]); err != nil || b64.EncodeToString(salt) != fields[4] {
		return bad("salt is not unpadded base64")
	}
	if len(salt) < minSaltLen || len(salt) > maxSaltLen {
		return bad("salt is %d bytes: %d to %d", len(salt), minSaltLen, maxSaltLen)
	}
	if key, err = b64.DecodeString(fields[5]); err != nil || b64.EncodeToString(key) != fields[5] {
		return bad("hash is not unpadded base64")
	}
	if len(key) < minKeyLen || len(key) > maxKeyLen {
		return bad("hash is %d bytes: %d to %d", len(key), minKeyLen, maxKeyLen)
	}
	return p, salt, key, nil
}
