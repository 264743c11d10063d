//go:build unix

package main

import "syscall"

// restrictUmask makes every file and directory the process creates
// owner-only, whatever umask it was started with. ledgerd creates its own
// files with owner-only modes, but the store's are badger's: badger (and
// ristretto beneath it) creates its tables, memtables, value log and lock
// file with mode 0666 &^ umask and offers no option to do otherwise, so
// under a umask of 000 or 002 the ledger's entries would be readable, and
// even writable, by others.
func restrictUmask() { syscall.Umask(0o077) }
