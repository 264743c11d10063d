package preview

import (
	"fmt"
	"strings"
	"testing"
)

// typicalDocument is a 2 KiB preview of an outbound e-mail.
func typicalDocument() string {
	var b strings.Builder
	b.WriteString(`{"action":"email.send","to":["alice@example.com","bob@example.com"],"subject":"Invoice 2026-1142",`)
	b.WriteString(`"headers":{"Authorization":"Bearer abcdefghijklmnop1234","X-Request-Id":"123e4567-e89b-12d3-a456-426614174000"},`)
	b.WriteString(`"attachments":[`)
	for i := range 6 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"report-%d.pdf","sha256":"e19d67a48f4991a8c6d703eadcc9b39f8cc56e0e1fb9bbdd667daf2ad2f2d0a8","size":%d}`, i, 1000*i)
	}
	b.WriteString(`],"body":"`)
	b.WriteString(strings.Repeat("Please find the invoice attached. ", 27))
	b.WriteString(`"}`)
	return b.String()
}

func BenchmarkRender(b *testing.B) {
	for _, bc := range []struct{ name, doc string }{
		{"typical-2KiB", typicalDocument()},
		{"20000-500-300", bigDocument()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			doc := []byte(bc.doc)
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Render(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
