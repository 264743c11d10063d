//go:build !unix

package config

// fileLimit reports that no limit on open files is known.
func fileLimit() (uint64, bool) { return 0, false }
