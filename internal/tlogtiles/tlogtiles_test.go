package tlogtiles

import (
	"fmt"
	"testing"
)

// The examples of https://c2sp.org/tlog-tiles, and the edges of its
// encoding.
func TestPath(t *testing.T) {
	for _, c := range []struct {
		level int
		index uint64
		width int
		path  string
	}{
		{0, 1234067, Width, "tile/0/x001/x234/067"},
		{0, 1234067, 8, "tile/0/x001/x234/067.p/8"},
		{Entries, 1234067, Width, "tile/entries/x001/x234/067"},
		{Entries, 1234067, 8, "tile/entries/x001/x234/067.p/8"},
		{0, 0, Width, "tile/0/000"},
		{0, 1, 17, "tile/0/001.p/17"},
		{2, 999, Width, "tile/2/999"},
		{2, 1000, 255, "tile/2/x001/000.p/255"},
		{7, 1 << 56, Width, "tile/7/x072/x057/x594/x037/x927/936"},
		{0, 1<<64 - 1, 1, "tile/0/x018/x446/x744/x073/x709/x551/615.p/1"},
	} {
		t.Run(c.path, func(t *testing.T) {
			if got := Path(c.level, c.index, c.width); got != c.path {
				t.Errorf("Path(%d, %d, %d) = %s", c.level, c.index, c.width, got)
			}
			level, index, width, ok := ParsePath(c.path)
			if !ok || level != c.level || index != c.index || width != c.width {
				t.Errorf("ParsePath: %d %d %d %v", level, index, width, ok)
			}
		})
	}
}

func TestParsePathRefuses(t *testing.T) {
	for _, p := range []string{
		"tile/0/1",
		"tile/0/0001",
		"tile/0/x000/001",  // a leading zero group
		"tile/0/001/002",   // an inner group without x
		"tile/0/x001",      // the last group with x
		"tile/0/000.p/256", // a full tile has no .p
		"tile/0/000.p/0",
		"tile/0/000.p/07",
		"tile/0/000.p/",
		"tile/8/000", // above the highest level of a 2^64 tree
		"tile/-1/000",
		"tile/01/000",
		"tile/data/000",
		"tile/0/",
		"tile/0",
		"0/000", // no tile/ prefix
		"tile/0/x018/x446/x744/x073/x709/x551/616", // 2^64
		"tile/0/x001/x000/x000/x000/x000/x000/x000/000",
	} {
		if level, index, width, ok := ParsePath(p); ok {
			t.Errorf("ParsePath(%q) = %d %d %d, want refused", p, level, index, width)
		}
	}
}

func FuzzParsePath(f *testing.F) {
	f.Add("tile/0/x001/x234/067.p/8")
	f.Add("tile/entries/000")
	f.Fuzz(func(t *testing.T, p string) {
		level, index, width, ok := ParsePath(p)
		if ok && Path(level, index, width) != p {
			t.Errorf("ParsePath(%q) = %d %d %d, which Path spells %q", p, level, index, width, Path(level, index, width))
		}
	})
}

func ExamplePath() {
	fmt.Println(Path(0, 1234067, Width))
	fmt.Println(Path(Entries, 1234067, 8))
	// Output:
	// tile/0/x001/x234/067
	// tile/entries/x001/x234/067.p/8
}
