// Package proccpu reads the CPU time the process has used, user and
// system, for the benchmarks that report CPU per operation: on a shared
// machine it varies far less than wall time. Where getrusage is not
// available it reports 0.
package proccpu

import "time"

// Used returns the user and system CPU time this process has used so far.
func Used() time.Duration { return used() }
