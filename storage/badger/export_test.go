package badger

import "testing"

// WriteCheckpointFile lends the external tests the checkpoint file's
// writer, so that they can leave the store as a crash between the file and
// the index would (cpfile.go).
var WriteCheckpointFile = writeCheckpointFile

// WaitForSpare waits until the spare segment s's frame log is writing, if
// any, is written or given up.
func WaitForSpare(s *Store) { s.log.prepared.Wait() }

// SetLeafRunSize sets how many leaf hashes make a leaf-hash run for the
// rest of the test.
func SetLeafRunSize(t testing.TB, n uint64) {
	old := leafRunSize
	leafRunSize = n
	t.Cleanup(func() { leafRunSize = old })
}
