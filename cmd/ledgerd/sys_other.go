//go:build !unix

package main

// restrictUmask does nothing: there is no umask outside unix.
func restrictUmask() {}
