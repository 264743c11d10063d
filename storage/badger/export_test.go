package badger

// WriteCheckpointFile lends the external tests the checkpoint file's
// writer, so that they can leave the store as a crash between the file and
// the index would (cpfile.go).
var WriteCheckpointFile = writeCheckpointFile

// WaitForSpare waits until the spare segment s's frame log is writing, if
// any, is written or given up.
func WaitForSpare(s *Store) { s.log.prepared.Wait() }
