//go:build !unix

package main

// restrictUmask does nothing: there is no umask outside unix.
func restrictUmask() {}

// fileLimit reports that no limit on open files is known.
func fileLimit() (uint64, bool) { return 0, false }
