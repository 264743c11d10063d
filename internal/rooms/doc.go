// Package rooms holds no code: its test enforces the repository's layout,
// the rooms of docs/architecture.md and the one-way arrows between them.
//
// Every package of the module belongs to exactly one room, found by the
// longest path prefix in the test's table, and a package with no room fails
// the test: a new package is a decision about where it stands. A room names
// the rooms its packages may import (their non-test imports; tests may
// reach further, to build fixtures with the real ledger) and the
// third-party modules they must never depend on, directly or through
// another package. Packages inside one room may import each other.
package rooms
