package main

import (
	"errors"
	"io"

	"github.com/decisionledger/ledger/verify"
)

// failureList flattens a joined verification error into its failures.
func failureList(err error) []error {
	var out []error
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		out = append(out, err)
	}
	walk(err)
	return out
}

func failureJSON(err error) []map[string]any {
	var list []map[string]any
	for _, e := range failureList(err) {
		m := map[string]any{"error": e.Error()}
		var f *verify.Failure
		if errors.As(e, &f) {
			m["check"] = f.Check
			if f.Index != verify.NoIndex {
				m["index"] = f.Index
			} else {
				m["part"] = f.Part
			}
		}
		list = append(list, m)
	}
	return list
}

func reportFailures(stdout, stderr io.Writer, err error, jsonOut bool) int {
	if jsonOut {
		writeJSON(stdout, map[string]any{"result": "failed", "failures": failureJSON(err)})
		return exitFailed
	}
	for _, e := range failureList(err) {
		errorf(stderr, "%v", e)
	}
	return exitFailed
}
