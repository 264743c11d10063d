//go:build !unix

package main

import "os"

// lockState takes no lock where flock(2) is missing: overlapping runs are
// the scheduler's to prevent there (docs/operations.md, "Monitoring").
func lockState(path string) (*os.File, error) { return nil, nil }
