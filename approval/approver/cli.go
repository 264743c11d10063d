package approver

import (
	"errors"
	"io"
	"unicode/utf8"
)

// ReadPassword reads one line from r (ledgerd approver add reads the new
// password from its standard input) and returns it without its line
// ending ("\n" or "\r\n"), every other byte kept: spaces are part of a
// password. It reads byte by byte, nothing past the line, and at most
// MaxPasswordLen bytes and a line ending; a longer line is refused
// (ErrPasswordTooLong) and so is one that is not valid UTF-8. End of input
// ends the line; none at all is an error. The length bounds are
// HashPassword's to check.
func ReadPassword(r io.Reader) (string, error) {
	var line []byte
	var b [1]byte
	for {
		n, err := r.Read(b[:])
		if n == 1 {
			if b[0] == '\n' {
				break
			}
			if len(line) > MaxPasswordLen { // room for a '\r'
				return "", ErrPasswordTooLong
			}
			line = append(line, b[0])
			continue
		}
		if err == io.EOF {
			if len(line) == 0 {
				return "", errors.New("no password on the input")
			}
			break
		}
		if err != nil {
			return "", err
		}
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) > MaxPasswordLen {
		return "", ErrPasswordTooLong
	}
	if !utf8.Valid(line) {
		return "", ErrPasswordNotUTF8
	}
	return string(line), nil
}
