//go:build !linux

package badger

import "os"

// syncData makes f's written bytes durable (fsync where fdatasync is not
// available).
func syncData(f *os.File) error { return f.Sync() }
