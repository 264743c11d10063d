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

// BenchmarkParseMessage is ParseMessage with a reused buffer, as a
// verifier calls it.
func BenchmarkParseMessage(b *testing.B) {
	data := readExample(b)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if _, buf, err = ParseMessage(data, buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
}
