// Command conformancegen writes generated JSON texts with the Go
// reference's verdict on each, for differential testing of the workload
// SDKs against package commit (docs/conformance.md §6):
//
//	go run ./internal/conformancegen -seed 1 -n 10000 > differential.jsonl
//
// Each line is one JSON object:
//
//	{"index":0,"input_base64":"…","digest":"sha256:…","size":42}
//	{"index":1,"input_base64":"…","allow_non_integer":true,"refusal":"duplicate_key","pointer":"/a","key":false}
//
// The texts vary member order, whitespace, number spellings, string
// escapes and Unicode (supplementary characters, combining marks,
// surrogate escapes); about a third carry one fault of the strict domain
// (invalid UTF-8, lone surrogates, duplicate names, non-NFC text, unsafe
// integers, fractions, NaN and Infinity, syntax errors, excess depth, a
// top level that is not an object). Text i depends only on the seed and
// i, so one line can be regenerated alone.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	seed := flag.Uint64("seed", 1, "the generator's seed")
	n := flag.Int("n", 10000, "how many texts to write")
	out := flag.String("o", "", "write to this file instead of standard output")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: conformancegen [-seed S] [-n N] [-o FILE]\n\n"+
			"Writes N generated JSON texts, one JSON line each, with package commit's\n"+
			"parameter digest or refusal. Example:\n\n"+
			"\tgo run ./internal/conformancegen -seed 1 -n 10000 -o /tmp/differential.jsonl\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 || *n < 0 {
		flag.Usage()
		os.Exit(2)
	}
	var w io.Writer = os.Stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintf(os.Stderr, "conformancegen: error: %v\n", err)
			os.Exit(1)
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	if err := Write(bw, *seed, *n); err != nil {
		fmt.Fprintf(os.Stderr, "conformancegen: error: %v\n", err)
		os.Exit(1)
	}
	if err := bw.Flush(); err != nil {
		fmt.Fprintf(os.Stderr, "conformancegen: error: %v\n", err)
		os.Exit(1)
	}
}
