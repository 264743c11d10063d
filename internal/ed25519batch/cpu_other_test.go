//go:build !unix

package ed25519batch_test

import "time"

// cpuTime is not measured here: the cpu-ns/sig metric reads 0.
func cpuTime() time.Duration { return 0 }
