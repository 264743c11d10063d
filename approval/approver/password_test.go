package approver

import (
	"bufio"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestDocumentedParams(t *testing.T) {
	if defaultParams != (params{memory: 65536, time: 3, threads: 2}) {
		t.Fatalf("production parameters are %+v, not the documented m=65536,t=3,p=2", defaultParams)
	}
	if SaltLen != 16 || KeyLen != 32 || MinPasswordLen != 12 || MaxPasswordLen != 1024 {
		t.Fatalf("salt %d, key %d, password %d..%d: not the documented 16, 32, 12..1024", SaltLen, KeyLen, MinPasswordLen, MaxPasswordLen)
	}
	if testing.Short() {
		t.Skip("one production hash takes 0.1 s or more")
	}
	hashParams = defaultParams
	defer func() { hashParams = testParams }()
	h, err := HashPassword("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\$argon2id\$v=19\$m=65536,t=3,p=2\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`).MatchString(h) {
		t.Fatalf("production hash %q is not in the documented form", h)
	}
}

type vector struct {
	password, hash string
}

// readVectors reads testdata/argon2id.txt.
func readVectors(t testing.TB) []vector {
	f, err := os.Open("testdata/argon2id.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var vs []vector
	var pw string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "password: "); ok {
			if pw, err = strconv.Unquote(v); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
		} else if v, ok := strings.CutPrefix(line, "hash: "); ok {
			vs = append(vs, vector{pw, v})
		}
	}
	if len(vs) != 3 {
		t.Fatalf("%d vectors, want 3", len(vs))
	}
	return vs
}

// TestVectors verifies hashes made by libargon2, the reference
// implementation, and checks that each is exactly what encodeHash writes.
func TestVectors(t *testing.T) {
	for i, v := range readVectors(t) {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			ok, err := VerifyPassword(v.hash, v.password)
			if err != nil || !ok {
				t.Fatalf("VerifyPassword(vector, its password) = %v, %v", ok, err)
			}
			ok, err = VerifyPassword(v.hash, v.password+"x")
			if err != nil || ok {
				t.Fatalf("VerifyPassword(vector, another password) = %v, %v", ok, err)
			}
			p, salt, key, err := decodeHash(v.hash)
			if err != nil {
				t.Fatal(err)
			}
			if got := encodeHash(p, salt, key); got != v.hash {
				t.Fatalf("re-encoded %q, want %q", got, v.hash)
			}
		})
	}
}

func TestHashRoundTrip(t *testing.T) {
	const pw = "correct horse battery staple"
	h, err := HashPassword(pw)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\$argon2id\$v=19\$m=64,t=1,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`).MatchString(h) {
		t.Fatalf("hash %q is not $argon2id$v=19$m=64,t=1,p=1$<22 base64>$<43 base64>", h)
	}
	if ok, err := VerifyPassword(h, pw); !ok || err != nil {
		t.Fatalf("VerifyPassword(HashPassword(pw), pw) = %v, %v", ok, err)
	}
	for _, wrong := range []string{"correct horse battery stapl", "correct horse battery staple ", "Correct horse battery staple"} {
		if ok, err := VerifyPassword(h, wrong); ok || err != nil {
			t.Fatalf("VerifyPassword(hash, %q) = %v, %v; want false, nil", wrong, ok, err)
		}
	}
	h2, err := HashPassword(pw)
	if err != nil {
		t.Fatal(err)
	}
	const prefix = len("$argon2id$v=19$m=64,t=1,p=1$")
	if h2 == h || h2[:prefix] != h[:prefix] || h2[prefix:prefix+22] == h[prefix:prefix+22] {
		t.Fatalf("two hashes of one password: %q and %q: want the same parameters and different salts", h, h2)
	}
}

func TestPasswordBounds(t *testing.T) {
	k := countKeys(t)
	for _, c := range []struct {
		name, pw string
		err      error
	}{
		{"11 characters", "elevenchars", ErrPasswordTooShort},
		{"12 characters", "twelve chars", nil},
		{"12 two-byte characters", strings.Repeat("é", 12), nil},
		{"11 characters, 22 bytes", strings.Repeat("é", 11), ErrPasswordTooShort},
		{"1024 bytes", strings.Repeat("p", 1024), nil},
		{"1025 bytes", strings.Repeat("p", 1025), ErrPasswordTooLong},
		{"1 MB", strings.Repeat("p", 1<<20), ErrPasswordTooLong},
		{"invalid UTF-8", "twelve chars\xff", ErrPasswordNotUTF8},
	} {
		t.Run(c.name, func(t *testing.T) {
			k.reset()
			h, err := HashPassword(c.pw)
			if !errors.Is(err, c.err) {
				t.Fatalf("HashPassword: %v, want %v", err, c.err)
			}
			if err != nil {
				if h != "" || k.n() != 0 {
					t.Fatalf("refused, yet %d argon2 computations and hash %q", k.n(), h)
				}
				if strings.Contains(err.Error(), c.pw) {
					t.Fatalf("error %q repeats the password", err)
				}
				return
			}
			if ok, err := VerifyPassword(h, c.pw); !ok || err != nil {
				t.Fatalf("VerifyPassword = %v, %v", ok, err)
			}
		})
	}

	// Verification refuses a long password before computing.
	h, err := HashPassword("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	k.reset()
	if ok, err := VerifyPassword(h, strings.Repeat("p", 1025)); ok || !errors.Is(err, ErrPasswordTooLong) || k.n() != 0 {
		t.Fatalf("VerifyPassword(hash, 1025 bytes) = %v, %v after %d computations; want false, ErrPasswordTooLong, none", ok, err, k.n())
	}
	if ok, err := VerifyPassword(h, "short"); ok || err != nil || k.n() != 0 {
		t.Fatalf("VerifyPassword(hash, short) = %v, %v after %d computations; want false, nil, none", ok, err, k.n())
	}
}

// good is a valid encoding; the cases below change one part of it.
const (
	goodSalt = "c2FsdHNhbHRzYWx0c2FsdA"
	goodKey  = "TUhCoV6YH8thtZpQqRp0JvQQ5ZYgiLA0LYApKDG6qtM"
	good     = "$argon2id$v=19$m=64,t=1,p=1$" + goodSalt + "$" + goodKey
)

func TestMalformedHashes(t *testing.T) {
	k := countKeys(t)
	if ok, err := VerifyPassword(good, "correct horse battery staple"); !ok || err != nil {
		t.Fatalf("the base case does not verify: %v, %v", ok, err)
	}
	for _, c := range []struct{ name, enc, reason string }{
		{"empty", "", "not in the form"},
		{"argon2i", "$argon2i$v=19$m=64,t=1,p=1$" + goodSalt + "$" + goodKey, "not an argon2id hash"},
		{"argon2d", "$argon2d$v=19$m=64,t=1,p=1$" + goodSalt + "$" + goodKey, "not an argon2id hash"},
		{"no version", "$argon2id$m=64,t=1,p=1$" + goodSalt + "$" + goodKey, "not in the form"},
		{"version 16", "$argon2id$v=16$m=64,t=1,p=1$" + goodSalt + "$" + goodKey, "version"},
		{"leading $ missing", "argon2id$v=19$m=64,t=1,p=1$" + goodSalt + "$" + goodKey + "$", "not in the form"},
		{"trailing $", good + "$", "not in the form"},
		{"parameters reordered", "$argon2id$v=19$t=1,m=64,p=1$" + goodSalt + "$" + goodKey, "parameters are not"},
		{"parameter missing", "$argon2id$v=19$m=64,t=1$" + goodSalt + "$" + goodKey, "parameters are not"},
		{"parameter repeated", "$argon2id$v=19$m=64,t=1,p=1,p=1$" + goodSalt + "$" + goodKey, "parameters are not"},
		{"leading zero", "$argon2id$v=19$m=064,t=1,p=1$" + goodSalt + "$" + goodKey, "parameter m is not"},
		{"plus sign", "$argon2id$v=19$m=64,t=+1,p=1$" + goodSalt + "$" + goodKey, "parameter t is not"},
		{"negative", "$argon2id$v=19$m=64,t=1,p=-1$" + goodSalt + "$" + goodKey, "parameter p is not"},
		{"over 32 bits", "$argon2id$v=19$m=4294967296,t=1,p=1$" + goodSalt + "$" + goodKey, "parameter m is not"},
		{"space", "$argon2id$v=19$m=64, t=1,p=1$" + goodSalt + "$" + goodKey, "parameters are not"},
		{"m over 1 GiB", "$argon2id$v=19$m=1048577,t=1,p=1$" + goodSalt + "$" + goodKey, "m=1048577 is out of bounds"},
		{"m 4 GiB", "$argon2id$v=19$m=4294967295,t=1,p=1$" + goodSalt + "$" + goodKey, "m=4294967295 is out of bounds"},
		{"m under 8p", "$argon2id$v=19$m=15,t=1,p=2$" + goodSalt + "$" + goodKey, "m=15 is out of bounds"},
		{"t 0", "$argon2id$v=19$m=64,t=0,p=1$" + goodSalt + "$" + goodKey, "t=0 is out of bounds"},
		{"t 11", "$argon2id$v=19$m=64,t=11,p=1$" + goodSalt + "$" + goodKey, "t=11 is out of bounds"},
		{"p 0", "$argon2id$v=19$m=64,t=1,p=0$" + goodSalt + "$" + goodKey, "p=0 is out of bounds"},
		{"p 17", "$argon2id$v=19$m=1024,t=1,p=17$" + goodSalt + "$" + goodKey, "p=17 is out of bounds"},
		{"p 256", "$argon2id$v=19$m=4096,t=1,p=256$" + goodSalt + "$" + goodKey, "p=256 is out of bounds"},
		{"salt padded", "$argon2id$v=19$m=64,t=1,p=1$" + goodSalt + "==$" + goodKey, "salt is not"},
		{"salt URL alphabet", "$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA_-$" + goodKey, "salt is not"},
		{"salt stray bits", "$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdB$" + goodKey, "salt is not"},
		{"salt line break", "$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHRz\nYWx0c2FsdA$" + goodKey, "salt is not"},
		{"salt 7 bytes", "$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbA$" + goodKey, "salt is 7 bytes"},
		{"salt empty", "$argon2id$v=19$m=64,t=1,p=1$$" + goodKey, "salt is 0 bytes"},
		{"salt 65 bytes", "$argon2id$v=19$m=64,t=1,p=1$" + strings.Repeat("A", 87) + "$" + goodKey, "salt is 65 bytes"},
		{"key 15 bytes", "$argon2id$v=19$m=64,t=1,p=1$" + goodSalt + "$AAAAAAAAAAAAAAAAAAAA", "hash is 15 bytes"},
		{"key 65 bytes", "$argon2id$v=19$m=64,t=1,p=1$" + goodSalt + "$" + strings.Repeat("A", 87), "hash is 65 bytes"},
		{"key not base64", "$argon2id$v=19$m=64,t=1,p=1$" + goodSalt + "$" + goodKey[:40] + "!!!", "hash is not"},
		{"too long", good + strings.Repeat("A", 300), "longer than 256 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			k.reset()
			ok, err := VerifyPassword(c.enc, "correct horse battery staple")
			var he *HashError
			if ok || !errors.As(err, &he) {
				t.Fatalf("VerifyPassword = %v, %v; want false, a *HashError", ok, err)
			}
			if !strings.Contains(he.Reason, c.reason) {
				t.Fatalf("reason %q, want one with %q", he.Reason, c.reason)
			}
			if k.n() != 0 {
				t.Fatalf("%d argon2 computations for a refused encoding", k.n())
			}
			for _, secret := range []string{goodSalt, goodKey[:20], "correct horse"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q repeats %q", err, secret)
				}
			}
		})
	}
}

// FuzzDecodeHash requires an exact round trip of every accepted encoding.
func FuzzDecodeHash(f *testing.F) {
	f.Add(good)
	for _, v := range readVectors(f) {
		f.Add(v.hash)
	}
	f.Add("$argon2id$v=19$m=064,t=1,p=1$" + goodSalt + "$" + goodKey)
	f.Fuzz(func(t *testing.T, s string) {
		p, salt, key, err := decodeHash(s)
		if err != nil {
			var he *HashError
			if !errors.As(err, &he) {
				t.Fatalf("error %v is not a *HashError", err)
			}
			return
		}
		if got := encodeHash(p, salt, key); got != s {
			t.Fatalf("accepted %q, which encodes back as %q", s, got)
		}
	})
}

// TestGate checks that at most 2 computations run at once, 32 more wait,
// and the next is refused at once with ErrBusy.
func TestGate(t *testing.T) {
	var mu sync.Mutex
	running, most := 0, 0
	started := make(chan struct{}, 64)
	release := holdKeys(t, func() {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		started <- struct{}{}
	})
	real := idKey
	idKey = func(password, salt []byte, time, memory uint32, threads uint8, keyLen uint32) []byte {
		defer func() {
			mu.Lock()
			running--
			mu.Unlock()
		}()
		return real(password, salt, time, memory, threads, keyLen)
	}

	const tries = slots + maxWaiting + 5
	errs := make(chan error, tries)
	for range tries {
		go func() {
			_, err := HashPassword("correct horse battery staple")
			errs <- err
		}()
	}
	// The 5 beyond the gate are refused while the others are held.
	for range 5 {
		if err := recv(t, errs); !errors.Is(err, ErrBusy) {
			t.Fatalf("beyond the gate: %v, want ErrBusy", err)
		}
	}
	recv(t, started)
	recv(t, started)
	release()
	for range tries - 5 {
		if err := recv(t, errs); err != nil {
			t.Fatalf("within the gate: %v", err)
		}
	}
	if most != slots {
		t.Fatalf("%d computations ran at once, want %d", most, slots)
	}
	if n := gate.in.Load(); n != 0 {
		t.Fatalf("gate holds %d after all returned", n)
	}
}

// BenchmarkVerifyPassword verifies the libargon2 vector made with the
// production parameters (m=65536, t=3, p=2).
func BenchmarkVerifyPassword(b *testing.B) {
	v := readVectors(b)[0]
	if !strings.HasPrefix(v.hash, "$argon2id$v=19$m=65536,t=3,p=2$") {
		b.Fatal("the first vector is not made with the production parameters")
	}
	for b.Loop() {
		if ok, err := VerifyPassword(v.hash, v.password); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
