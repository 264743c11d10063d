// Package keyflag is the trusted-key options of the commands that verify
// what a ledger signed (ledger-verify, ledgerctl):
//
//	--key VKEY       a note verifier key, name+hash+base64
//	--key-file FILE  a file holding one verifier key
//	--trust FILE     a trust file (verify.ParseTrust): one key a line, an
//	                 old key with the tree size it was retired at
//
// Each may be repeated, and they combine: the keys given make one key set
// (verify.NewKeySet), the keys of one log, its current key and those it
// rotated out (docs/operations.md §Key rotation), each retired key retired
// at the smallest tree size a trust file gives it.
package keyflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/verify"
)

// Size limits of the files read.
const (
	maxKeyFile   = 4 << 10
	maxTrustFile = 64 << 10
)

// ErrNoKey: none of the options was given.
var ErrNoKey = errors.New("a verifier key is required (--key, --key-file or --trust)")

// Flags holds the options' values.
type Flags struct {
	keys, keyFiles, trustFiles list
}

// Register defines --key, --key-file and --trust on fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.Var(&f.keys, "key", "")
	fs.Var(&f.keyFiles, "key-file", "")
	fs.Var(&f.trustFiles, "trust", "")
}

// Given reports whether any of the options was given.
func (f *Flags) Given() bool {
	return len(f.keys)+len(f.keyFiles)+len(f.trustFiles) > 0
}

// Load reads the files named and returns the set of every key given, or
// ErrNoKey. An error names the option, and the file, at fault.
func (f *Flags) Load() (*verify.Key, error) {
	var keys []*verify.Key
	for _, text := range f.keys {
		key, err := verify.ParseKey(text)
		if err != nil {
			return nil, fmt.Errorf("--key: %w", err)
		}
		keys = append(keys, key)
	}
	for _, name := range f.keyFiles {
		b, err := ReadFileLimit(name, maxKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--key-file: %w", err)
		}
		key, err := verify.ParseKey(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("--key-file %s: %w", termtext.Quote(name), err)
		}
		keys = append(keys, key)
	}
	for _, name := range f.trustFiles {
		b, err := ReadFileLimit(name, maxTrustFile)
		if err != nil {
			return nil, fmt.Errorf("--trust: %w", err)
		}
		key, err := verify.ParseTrust(b)
		if err != nil {
			return nil, fmt.Errorf("--trust %s: %w", termtext.Quote(name), err)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, ErrNoKey
	}
	return verify.NewKeySet(keys...)
}

// list is a repeatable string option.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

// ReadFileLimit reads the file name, refusing more than limit bytes (the
// CLIs read every file they are given through it, so that no file makes
// them hold more than they expect).
func ReadFileLimit(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", termtext.Quote(name), limit)
	}
	return b, nil
}
