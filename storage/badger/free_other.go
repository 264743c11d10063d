//go:build !(linux || darwin)

package badger

import "math"

// freeBytes is not measured on this system: the reserve
// (badger.Options.ReserveBytes) is not enforced here.
func freeBytes(string) (uint64, error) { return math.MaxUint64, nil }
