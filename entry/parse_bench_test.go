package entry

import "testing"

// BenchmarkParse compares Parse with its reference decoding, parseStrict,
// on the example entry: what parseFast saves on one core.
func BenchmarkParse(b *testing.B) {
	data := readExample(b)
	for _, p := range []struct {
		name  string
		parse func([]byte) (*Entry, error)
	}{{"Parse", Parse}, {"parseStrict", parseStrict}} {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.parse(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
