package commit

import (
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// BenchmarkUnstableScan is the cost of the unstable_normalization scan on
// 1 KiB of non-ASCII text, beside the NFC check it precedes.
func BenchmarkUnstableScan(b *testing.B) {
	s := []byte(strings.Repeat("Café Exemple, Straße 7, 東京都 — ", 26)) // about 1 KiB
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			if hasUnstableNormalization(s) {
				b.Fatal("unstable")
			}
		}
	})
	b.Run("nfc", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			if !norm.NFC.IsNormal(s) {
				b.Fatal("not NFC")
			}
		}
	})
}
