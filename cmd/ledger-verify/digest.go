package main

import (
	"errors"
	"flag"
	"io"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/internal/termtext"
)

const digestUsage = `Usage:
    ledger-verify digest [--allow-non-integer] [--canonical] [--json] FILE

Print the parameter commitment of the JSON parameters in FILE ("-" reads
standard input): the digest SHA-256("ledger/v1/params\n" || JCS(params))
and the size of the canonical form (docs/commitment.md). Parameters
outside the strict input domain are refused with the kind of fault and
its JSON pointer, never normalized.

Options:
    --allow-non-integer   Admit numbers with a fractional part (canonicalized
                          per RFC 8785).
    --canonical           Write the canonical bytes instead of the digest.
    --json                Machine-readable output on standard output.

Exit status: 0 printed, 1 the parameters are refused, 2 bad usage or
unreadable input.

Examples:
    $ ledger-verify digest testdata/commit/example-payment.json
    digest sha256:e19d67a48f4991a8c6d703eadcc9b39f8cc56e0e1fb9bbdd667daf2ad2f2d0a8
    size   146
    $ ledger-verify digest --canonical - < params.json > params.jcs
`

func runDigest(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("digest", flag.ContinueOnError)
	allowNonInteger := fs.Bool("allow-non-integer", false, "")
	canonicalOut := fs.Bool("canonical", false, "")
	jsonOut := fs.Bool("json", false, "")
	files, code, ok := parseFlags(fs, digestUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(files) != 1 {
		return usageError(stderr, "digest", "takes exactly one FILE (\"-\" for standard input)")
	}
	if *canonicalOut && *jsonOut {
		return usageError(stderr, "digest", "--canonical and --json exclude each other")
	}
	name := files[0]
	domain := commit.Domain{AllowNonInteger: *allowNonInteger}
	raw, err := readInput(name, stdin, commit.DefaultMaxBytes)
	if err != nil {
		errorf(stderr, "%v", err)
		return exitUsage
	}

	c, err := domain.Params(raw)
	var de *commit.DomainError
	if errors.As(err, &de) {
		return reportRefusal(stdout, stderr, name, de, *jsonOut)
	}
	if err != nil {
		errorf(stderr, "%s: %v", termtext.Quote(name), err)
		return exitFailed
	}

	switch {
	case *canonicalOut:
		canonical, err := domain.Canonicalize(raw)
		if err != nil { // Params accepted raw, so this cannot happen
			errorf(stderr, "%s: %v", termtext.Quote(name), err)
			return exitFailed
		}
		stdout.Write(canonical)
	case *jsonOut:
		termtext.WriteJSON(stdout, map[string]any{"result": "ok", "digest": c.Digest, "size": c.Size})
	default:
		termtext.PrintLine(stdout, "digest %s", c.Digest)
		termtext.PrintLine(stdout, "size   %d", c.Size)
	}
	return exitOK
}

func reportRefusal(stdout, stderr io.Writer, name string, de *commit.DomainError, jsonOut bool) int {
	if jsonOut {
		termtext.WriteJSON(stdout, map[string]any{"result": "refused", "refusal": refusalJSON(de)})
		return exitFailed
	}
	errorf(stderr, "%s: parameters refused: %v", termtext.Quote(name), de)
	switch de.Kind {
	case commit.ErrNotNFC:
		hintf(stderr, "the strict domain never normalizes Unicode; convert the text to NFC on purpose before committing")
	case commit.ErrUnstableNormalization:
		hintf(stderr, "the text holds a code point whose normalization implementations with different Unicode versions judge differently (docs/commitment.md §2.4); no form of it is admitted")
	case commit.ErrNonInteger:
		hintf(stderr, "send amounts as integers in minor units, or pass --allow-non-integer if the deployment admits other numbers")
	case commit.ErrIntegerRange:
		hintf(stderr, "integers must lie within ±9007199254740991; send larger values as strings")
	}
	hintf(stderr, "docs/commitment.md lists every rule of the strict domain")
	return exitFailed
}

// refusalJSON is the machine form of a strict-domain refusal: kind and
// place, never the value.
func refusalJSON(de *commit.DomainError) map[string]any {
	return map[string]any{"kind": de.Kind, "pointer": de.Pointer, "in_name": de.Key, "offset": de.Offset}
}
