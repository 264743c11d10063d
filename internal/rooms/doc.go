// Package rooms holds no code: its test enforces the repository's layout,
// the table of rooms in docs/architecture.md and the one-way arrows it
// draws.
//
// Every package of the module belongs to exactly one room, found by the
// longest path prefix in the table, and a package with no room fails the
// test: a new package is a decision about where it stands. A room names
// the rooms its packages may import (their non-test imports; tests may
// reach further, to build fixtures with the real ledger) and the
// third-party modules they must never depend on, directly or through
// another package. Packages inside one room may import each other;
// nothing imports a command. The verifier's row is also held by the test
// itself, so that an edit of the table cannot let verify/ reach the ledger
// or a store.
package rooms
