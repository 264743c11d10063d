package badger

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
)

// The history's search finds every size, and no other, however unevenly
// the sizes are spread: evenly, growing as the square of the record's
// number (interpolation overshoots), in bursts of one apart between long
// gaps, with sizes signed twice (the later wins).
func TestCPHistorySearch(t *testing.T) {
	const n = 20000
	for _, tc := range []struct {
		name string
		size func(i uint64) uint64
	}{
		{"even", func(i uint64) uint64 { return 7*i + 3 }},
		{"square", func(i uint64) uint64 { return i*i + 1 }},
		{"bursts", func(i uint64) uint64 { return (i/1000)*1_000_000_000 + i%1000 + 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), cpHistoryDir)
			h, _, err := openCPHistory(dir)
			if err != nil {
				t.Fatal(err)
			}
			note := func(size uint64, second bool) []byte {
				if second {
					return fmt.Appendf(nil, "checkpoint %d\n— a\n— b\n", size)
				}
				return fmt.Appendf(nil, "checkpoint %d\n— a\n", size)
			}
			want := map[uint64][]byte{}
			for i := range uint64(n) {
				size := tc.size(i)
				if err := h.appendUnsynced(size, note(size, false)); err != nil {
					t.Fatal(err)
				}
				want[size] = note(size, false)
				if i%997 == 5 {
					if err := h.appendUnsynced(size, note(size, true)); err != nil {
						t.Fatal(err)
					}
					want[size] = note(size, true)
				}
			}
			if err := h.close(); err != nil {
				t.Fatal(err)
			}
			if h, _, err = openCPHistory(dir); err != nil {
				t.Fatal(err)
			}
			defer h.close()
			for i := range uint64(n) {
				size := tc.size(i)
				for _, s := range []uint64{size - 1, size, size + 1} {
					got, ok, err := h.get(s)
					if w := want[s]; err != nil || ok != (w != nil) || !bytes.Equal(got, w) {
						t.Fatalf("get(%d) = %q, %v, %v; want %q", s, got, ok, err, w)
					}
				}
			}
		})
	}
}
