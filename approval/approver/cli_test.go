package approver

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadPassword(t *testing.T) {
	for _, c := range []struct {
		name, in, want, rest string
		err                  error
	}{
		{"newline", "correct horse\n", "correct horse", "", nil},
		{"CRLF", "correct horse\r\n", "correct horse", "", nil},
		{"end of input", "correct horse", "correct horse", "", nil},
		{"spaces kept", "  correct horse \t\n", "  correct horse \t", "", nil},
		{"one line only", "first line\nsecond line\n", "first line", "second line\n", nil},
		{"empty line", "\n", "", "", nil},
		{"1024 bytes", strings.Repeat("p", 1024) + "\n", strings.Repeat("p", 1024), "", nil},
		{"1024 bytes and CRLF", strings.Repeat("p", 1024) + "\r\n", strings.Repeat("p", 1024), "", nil},
		{"1025 bytes", strings.Repeat("p", 1025) + "\n", "", "", ErrPasswordTooLong},
		{"1025 bytes, no newline", strings.Repeat("p", 1025), "", "", ErrPasswordTooLong},
		{"not UTF-8", "pass\xffword\n", "", "", ErrPasswordNotUTF8},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := strings.NewReader(c.in)
			got, err := ReadPassword(r)
			if !errors.Is(err, c.err) || got != c.want {
				t.Fatalf("ReadPassword = %q, %v; want %q, %v", got, err, c.want, c.err)
			}
			if err == nil {
				if rest, _ := io.ReadAll(r); string(rest) != c.rest {
					t.Fatalf("left %q unread, want %q", rest, c.rest)
				}
			}
		})
	}
	if _, err := ReadPassword(strings.NewReader("")); err == nil {
		t.Fatal("no input: no error")
	}
	if _, err := ReadPassword(iotest.ErrReader(io.ErrUnexpectedEOF)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a read error: %v", err)
	}
}
