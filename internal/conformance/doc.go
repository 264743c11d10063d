// Package conformance holds the Go implementation to the conformance corpus
// in testdata/conformance/, which the TypeScript and Python SDKs read too
// (docs/conformance.md is its specification).
//
// The package has no code of its own: its tests build every case from the
// Go reference (commit, commit/declare, approval/preview, entry, verify),
// compare the result with the committed files, and fail on any difference.
// Run with -update to rewrite the files from Go:
//
//	go test ./internal/conformance -update
//
// Each file is then reviewed as a diff, like any other change to the format.
package conformance
