// Package tlogtiles spells the paths of the C2SP tlog-tiles read API
// (https://c2sp.org/tlog-tiles), for ledgerd, which serves them, and
// ledger-verify, which reads them:
//
//	tile/<L>/<N>[.p/<W>]
//	tile/entries/<N>[.p/<W>]
//
// L is the tile's level (0 to 63 in the spec; at most 7 here, as a tree of
// at most 2^64 entries with tiles of height 8 has no higher level), N its
// index, and W the width of a partial tile, 1 to 255; a full tile (width
// 256) has no ".p/" suffix. N is written in groups of three decimal
// digits, all but the last prefixed with "x": 1234067 is x001/x234/067,
// and 0 is 000. Each path has exactly one spelling; ParsePath accepts no
// other.
package tlogtiles

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Height is the height of a tile, and Width the number of hashes (or
// entries) in a full tile.
const (
	Height = 8
	Width  = 1 << Height
)

// Entries is the level that names an entry bundle (tile/entries/...).
const Entries = -1

// maxLevel is the highest level of a tree of at most 2^64 entries.
const maxLevel = 64/Height - 1

// IndexPath encodes a tile index N as tlog-tiles does: groups of three
// digits, all but the last prefixed with "x" (1234067 is x001/x234/067).
func IndexPath(n uint64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		s = fmt.Sprintf("x%03d/%s", n%1000, s)
	}
	return s
}

// Path returns the path of the tile at (level, index) of width w, from 1
// to Width; level Entries names the entry bundle.
func Path(level int, index uint64, w int) string {
	p := "tile/"
	if level == Entries {
		p += "entries/"
	} else {
		p += strconv.Itoa(level) + "/"
	}
	p += IndexPath(index)
	if w < Width {
		p += ".p/" + strconv.Itoa(w)
	}
	return p
}

// ParsePath parses a path Path returns, accepting only its canonical
// spelling, and returns its level (Entries for an entry bundle), index
// and width.
func ParsePath(p string) (level int, index uint64, width int, ok bool) {
	p, found := strings.CutPrefix(p, "tile/")
	if !found {
		return 0, 0, 0, false
	}
	width = Width
	if rest, partial, found := strings.Cut(p, ".p/"); found {
		w, err := strconv.Atoi(partial)
		if err != nil || w < 1 || w >= Width || strconv.Itoa(w) != partial {
			return 0, 0, 0, false
		}
		p, width = rest, w
	}
	head, indexPath, found := strings.Cut(p, "/")
	if !found {
		return 0, 0, 0, false
	}
	if head == "entries" {
		level = Entries
	} else {
		l, err := strconv.Atoi(head)
		if err != nil || l < 0 || l > maxLevel || strconv.Itoa(l) != head {
			return 0, 0, 0, false
		}
		level = l
	}
	for _, part := range strings.Split(indexPath, "/") {
		part = strings.TrimPrefix(part, "x")
		d, err := strconv.ParseUint(part, 10, 64)
		if err != nil || len(part) != 3 || index > (math.MaxUint64-d)/1000 {
			return 0, 0, 0, false
		}
		index = index*1000 + d
	}
	if IndexPath(index) != indexPath {
		return 0, 0, 0, false
	}
	return level, index, width, true
}
