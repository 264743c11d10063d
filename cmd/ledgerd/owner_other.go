//go:build !unix

package main

import "io/fs"

// keepOwner does nothing: files have no unix owner here.
func keepOwner(path string, was fs.FileInfo) error { return nil }
