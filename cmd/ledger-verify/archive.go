package main

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/verify"
)

// The monitor's archive (monitor --archive DIR, docs/operations.md
// "Monitoring"): entries-<first index>.jsonl files, one signed entry per
// line in index order from the first index, each written whole by one
// verified run; and checkpoint-<tree size> files. export --archive DIR
// compares an export's entries with it.

var archiveEntriesName = regexp.MustCompile(`^entries-(0|[1-9][0-9]*)\.jsonl$`)

// archiveFile is one entries file: the SHA-256 of each of its lines.
type archiveFile struct {
	name   string
	first  uint64
	hashes [][sha256.Size]byte
}

// archiveCheck compares entries with an archive. It holds 32 bytes per
// archived entry.
type archiveCheck struct {
	files    []*archiveFile // by first index
	compared uint64
	failures []error
}

func openArchive(dir string) (*archiveCheck, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	a := &archiveCheck{}
	for _, de := range des {
		m := archiveEntriesName.FindStringSubmatch(de.Name())
		if m == nil {
			continue
		}
		first, err := strconv.ParseUint(m[1], 10, 64)
		if err != nil {
			continue
		}
		f := &archiveFile{name: filepath.Join(dir, de.Name()), first: first}
		if err := f.read(); err != nil {
			return nil, err
		}
		a.files = append(a.files, f)
	}
	if len(a.files) == 0 {
		return nil, fmt.Errorf("%s holds no entries-<index>.jsonl file of a monitor's archive", termtext.Quote(dir))
	}
	slices.SortFunc(a.files, func(x, y *archiveFile) int {
		switch {
		case x.first < y.first:
			return -1
		case x.first > y.first:
			return 1
		}
		return 0
	})
	return a, nil
}

func (f *archiveFile) read() error {
	fd, err := os.Open(f.name)
	if err != nil {
		return err
	}
	defer fd.Close()
	sc := bufio.NewScanner(fd)
	sc.Buffer(make([]byte, 64<<10), 1<<17) // an entry is at most 65,535 bytes
	for sc.Scan() {
		f.hashes = append(f.hashes, sha256.Sum256(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", termtext.Quote(f.name), err)
	}
	return nil
}

// errArchiveDiffers: the log shows an entry differently from the copy a
// monitor verified and archived before.
var errArchiveDiffers = errors.New("differs from the copy the monitor verified and archived")

// check compares entry index (verified by the export) with every archived
// copy of it.
func (a *archiveCheck) check(index uint64, e []byte) {
	h := sha256.Sum256(e)
	for _, f := range a.files {
		if index < f.first || index-f.first >= uint64(len(f.hashes)) {
			continue
		}
		a.compared++
		if f.hashes[index-f.first] != h {
			a.failures = append(a.failures, &verify.Failure{Index: int64(index), Check: "archive",
				Err: fmt.Errorf("%w (%s line %d): the log now shows another entry at this index than it showed the monitor; keep both", errArchiveDiffers, termtext.Quote(f.name), index-f.first+1)})
		}
	}
}

// result returns the failures, joined, or nil.
func (a *archiveCheck) result() error {
	return errors.Join(a.failures...)
}
