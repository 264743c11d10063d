package policy

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/decisionledger/ledger/commit"
)

// Bounds on a whole set, enforced by New (and so Load and NewReplay) and
// ParseBundle.
const (
	MaxSetBytes = 4 << 20 // the sum of the files' byte lengths
	MaxFiles    = 1024
)

// maxBundleBytes bounds a bundle within the limits: the domain separator
// and, per file, the longest name, newline, length and newline, then the
// bytes.
var maxBundleBytes = len(DomainSeparator) + MaxFiles*(MaxNameBytes+1+len(strconv.Itoa(MaxFileBytes))+1) + MaxSetBytes

// ErrBundle classifies every *BundleError; test with errors.Is.
var ErrBundle = errors.New("policy bundle refused")

// BundleError is why ParseBundle refused a bundle: the byte offset in the
// bundle where the problem is, and what it is. It never quotes the
// bundle's bytes (a file name or policy text).
type BundleError struct {
	Offset  int
	Problem string
}

func (e *BundleError) Error() string {
	return fmt.Sprintf("policy: bundle: at byte %d: %s", e.Offset, e.Problem)
}

func (e *BundleError) Unwrap() error { return ErrBundle }

// Bundle encodes files, which it sorts by name, as a bundle: the byte
// string the policy-set digest hashes,
//
//	DomainSeparator || for each file: name || "\n" || len || "\n" || bytes
//
// so that DigestOfBundle(Bundle(files)) == Digest(files). Bundle does not
// check the files; a bundle of files New accepts is one ParseBundle
// accepts.
func Bundle(files []File) []byte {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	n := len(DomainSeparator)
	for _, f := range files {
		n += len(f.Name) + 1 + 20 + 1 + len(f.Bytes)
	}
	b := make([]byte, 0, n)
	b = append(b, DomainSeparator...)
	for _, f := range files {
		b = append(b, f.Name...)
		b = append(b, '\n')
		b = strconv.AppendInt(b, int64(len(f.Bytes)), 10)
		b = append(b, '\n')
		b = append(b, f.Bytes...)
	}
	return b
}

// Bundle returns the set's bundle: sha256 of it is s.Digest().
func (s *Set) Bundle() []byte { return Bundle(s.files) }

// DigestOfBundle returns SHA-256 of b. For a bundle ParseBundle accepts it
// equals Digest of the parsed files, which is the digest of the set New
// or NewReplay builds from them.
func DigestOfBundle(b []byte) commit.Digest { return sha256.Sum256(b) }

// ParseBundle decodes a bundle strictly, so that exactly one bundle
// encodes a set and Bundle(files) == b for the files it returns: b starts
// with DomainSeparator; each file's name matches
// [A-Za-z0-9][A-Za-z0-9._-]*, ends in ".cedar", is at most MaxNameBytes
// long and comes strictly after the previous name in byte order; its
// length is decimal with no leading zero (but "0") and at most
// MaxFileBytes; its bytes follow and b ends exactly after the last file's.
// There is at least one file, at most MaxFiles, holding at most
// MaxSetBytes together. ParseBundle does not parse the policies: New or
// NewReplay does. The returned files do not alias b.
func ParseBundle(b []byte) ([]File, error) {
	fail := func(off int, format string, args ...any) error {
		return &BundleError{Offset: off, Problem: fmt.Sprintf(format, args...)}
	}
	if len(b) > maxBundleBytes {
		return nil, fail(maxBundleBytes, "bundle longer than %d bytes, the most the bounds allow", maxBundleBytes)
	}
	if !bytes.HasPrefix(b, []byte(DomainSeparator)) {
		return nil, fail(0, "does not start with %q", DomainSeparator)
	}
	data := slices.Clone(b) // one copy that the files' bytes share
	var files []File
	total := 0
	off := len(DomainSeparator)
	for off < len(data) {
		if len(files) == MaxFiles {
			return nil, fail(off, "more than %d files", MaxFiles)
		}
		// The name line.
		nl := bytes.IndexByte(data[off:min(len(data), off+MaxNameBytes+1)], '\n')
		if nl < 0 {
			return nil, fail(off, "no newline after a file name of at most %d bytes", MaxNameBytes)
		}
		name := string(data[off : off+nl])
		if !fileName.MatchString(name) || !strings.HasSuffix(name, ".cedar") {
			return nil, fail(off, "file name must match [A-Za-z0-9][A-Za-z0-9._-]*.cedar")
		}
		if len(files) > 0 && name <= files[len(files)-1].Name {
			return nil, fail(off, "file name not strictly after the previous one in byte order")
		}
		off += nl + 1
		// The length line.
		maxDigits := len(strconv.Itoa(MaxFileBytes))
		nl = bytes.IndexByte(data[off:min(len(data), off+maxDigits+1)], '\n')
		if nl < 0 {
			return nil, fail(off, "no newline after a length of at most %d digits", maxDigits)
		}
		digits := string(data[off : off+nl])
		n, err := strconv.Atoi(digits)
		if err != nil || n < 0 || strconv.Itoa(n) != digits {
			return nil, fail(off, "length is not a decimal number without sign or leading zeros")
		}
		if n > MaxFileBytes {
			return nil, fail(off, "file length %d larger than %d bytes", n, MaxFileBytes)
		}
		if total += n; total > MaxSetBytes {
			return nil, fail(off, "files larger than %d bytes together", MaxSetBytes)
		}
		off += nl + 1
		// The bytes.
		if len(data)-off < n {
			return nil, fail(len(data), "bundle ends %d bytes into a file of %d bytes", len(data)-off, n)
		}
		files = append(files, File{Name: name, Bytes: data[off : off+n : off+n]})
		off += n
	}
	if len(files) == 0 {
		return nil, fail(off, "no file")
	}
	return files, nil
}

// checkSetBounds refuses a set of n files holding total bytes beyond
// MaxFiles or MaxSetBytes.
func checkSetBounds(n, total int) error {
	if n > MaxFiles {
		return &LoadError{Problem: fmt.Sprintf("more than %d policy files", MaxFiles), Err: ErrLayout}
	}
	if total > MaxSetBytes {
		return &LoadError{Problem: fmt.Sprintf("policy files larger than %d bytes together", MaxSetBytes), Err: ErrLayout}
	}
	return nil
}
