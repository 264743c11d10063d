package commit_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/decisionledger/ledger/commit"
)

// The worked example of docs/commitment.md. The digest below was computed
// from the canonical bytes with printf and sha256sum, not by this package.
func ExampleParams() {
	raw, err := os.ReadFile("../testdata/commit/example-payment.json")
	if err != nil {
		panic(err)
	}
	c, err := commit.Params(raw)
	if err != nil {
		panic(err)
	}
	canonical, _ := commit.Canonicalize(raw)
	fmt.Printf("%s\n%s %d\n", canonical, c.Digest, c.Size)
	// Output:
	// {"amount_minor":1250000,"currency":"EUR","due_days":30,"memo":"Invoice 2026-1142\nPO-88213","payee":"Café Exemple SARL","tags":["supplier","q4"]}
	// sha256:e19d67a48f4991a8c6d703eadcc9b39f8cc56e0e1fb9bbdd667daf2ad2f2d0a8 146
}

func ExampleDomainError() {
	_, err := commit.Params([]byte(`{"payee":"Cafe\u0301 Exemple","amount_minor":12.5}`))
	var de *commit.DomainError
	if errors.As(err, &de) {
		fmt.Println(de.Kind, de.Pointer, errors.Is(err, commit.ErrNotNFC))
	}
	fmt.Println(err)
	// Output:
	// not_nfc /payee true
	// commit: not_nfc at "/payee" (byte 9)
}

func ExampleParamsValue() {
	c, err := commit.ParamsValue(map[string]any{
		"b": 2,
		"a": 1,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Digest)
	// Output: sha256:7c1b13beed0c4dbb8c067616c299cf629f3b9af228026f76eea02c1c00c9634f
}
