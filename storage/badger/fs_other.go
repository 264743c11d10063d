//go:build !unix

package badger

import (
	"fmt"
	"os"
	"runtime"
)

// lockDir refuses: this system has no flock, and a store that cannot be
// locked could be opened twice, which loses acknowledged entries.
func lockDir(dir string) (*os.File, error) {
	return nil, fmt.Errorf("ledger: cannot lock the store directory %s: the badger store locks its directory with flock, which %s lacks", dir, runtime.GOOS)
}
