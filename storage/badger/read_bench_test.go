package badger_test

import (
	"testing"

	"github.com/decisionledger/ledger/storage/badger"
)

// benchStore returns an open store of 20,000 entries, all indexed.
func benchStore(b *testing.B) *badger.Store {
	b.Helper()
	dir := b.TempDir()
	s, err := badger.Open(b.Context(), dir, badger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for start := uint64(0); start < 20000; start += 100 {
		if err := s.Commit(b.Context(), testBatch(start, 100)); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if s, err = badger.Open(b.Context(), dir, badger.Options{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// Entry of entries spread over the log, each located in the index and
// read from the frame log.
func BenchmarkEntry(b *testing.B) {
	s := benchStore(b)
	b.ReportAllocs()
	var i uint64
	for b.Loop() {
		if _, err := s.Entry(b.Context(), i*7919%20000); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// ReadEntries of the whole log.
func BenchmarkReadEntries(b *testing.B) {
	s := benchStore(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.ReadEntries(b.Context(), 0, 20000, func(uint64, []byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
