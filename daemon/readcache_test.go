package daemon

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/ledger"
)

// A follower answers a client's reads of entries, full tiles and full
// entry bundles it read once from its cache: with its database closed,
// it still serves them, byte for byte. A partial tile, which grows, is
// read from the database every time, and so are the ledger's own reads
// (the view's checks), which carry no client's mark.
func TestClusterReadCache(t *testing.T) {
	f := apitest.NewClusterFixture(t)
	a := startInstance(t, f.Config(t, "a", "3s"))
	apitest.WaitFor(t, "a to sequence", func() bool { return readyzCode(a.url+"/readyz?role=sequencer") == 200 })
	for i := range 300 {
		if status, _, body := f.Post(t, a.url, i, nil); status != http.StatusCreated {
			t.Fatalf("append %d: %d %s", i, status, body)
		}
	}
	n, url, _ := testNode(t, f, "b", "3s")
	apitest.WaitFor(t, "b to have a checkpoint of the 300 entries", func() bool {
		return strings.Split(apitest.Get(t, url+"/checkpoint"), "\n")[1] == "300"
	})
	cached := []string{"/tile/0/000", "/tile/0/000.p/100", "/tile/entries/000", "/v1/entries/7", "/v1/entries/299"}
	partial := "/tile/0/001.p/44"
	first := map[string][]byte{}
	for _, p := range append(cached, partial) {
		status, body := apitest.GetBody(t, url+p)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, status, body)
		}
		first[p] = body
	}

	n.followStore.Close()
	for _, p := range cached {
		if status, body := apitest.GetBody(t, url+p); status != http.StatusOK || !bytes.Equal(body, first[p]) {
			t.Errorf("GET %s with the database closed: %d %q, want 200 and what it served before", p, status, body)
		}
	}
	if status, _ := apitest.GetBody(t, url+partial); status == http.StatusOK {
		t.Errorf("GET %s with the database closed: 200, want it read from the database", partial)
	}
	s := &cachingStore{n.followStore, n.reads}
	if _, err := s.Tile(withCachedReads(t.Context()), 0, 0); err != nil {
		t.Errorf("a client's read of tile 0/0: %v", err)
	}
	if _, err := s.Tile(context.Background(), 0, 0); err == nil {
		t.Error("the ledger's own read of tile 0/0 was answered from the cache")
	}
	if _, err := s.Entry(context.Background(), 7); err == nil {
		t.Error("the ledger's own read of entry 7 was answered from the cache")
	}
}

// The cache holds at most its bound, items' overhead counted, and drops
// the least recently used first.
func TestReadCacheBound(t *testing.T) {
	const size = 100 // at most an eighth of the bound
	c := newReadCache(4 * (size + itemOverhead))
	val := func(i uint64) []byte { return bytes.Repeat([]byte{byte(i)}, size) }
	for i := range uint64(4) {
		c.put(cacheKey{entry: true, index: i}, val(i))
	}
	c.get(cacheKey{entry: true, index: 0}) // 1 is now the least recently used
	c.put(cacheKey{level: 1, index: 9}, val(9))
	if _, ok := c.get(cacheKey{entry: true, index: 1}); ok {
		t.Error("entry 1, the least recently used, is still cached")
	}
	for _, k := range []cacheKey{{entry: true, index: 0}, {entry: true, index: 2}, {entry: true, index: 3}, {level: 1, index: 9}} {
		if v, ok := c.get(k); !ok || !bytes.Equal(v, val(k.index)) {
			t.Errorf("%+v: %v, want it cached", k, ok)
		}
	}
	if c.size > c.max || len(c.items) != 4 {
		t.Errorf("the cache holds %d bytes in %d items, bound %d", c.size, len(c.items), c.max)
	}
	if v, _ := c.get(cacheKey{entry: true, index: 0}); cap(v) != len(v) {
		t.Error("a cached value has room to append in place")
	}
	c.put(cacheKey{entry: true, index: 99}, make([]byte, c.max/8+1))
	if _, ok := c.get(cacheKey{entry: true, index: 99}); ok {
		t.Error("a value larger than an eighth of the bound was cached")
	}
	if ledger.TileWidth*ledger.HashSize > readCacheBytes/8 {
		t.Error("readCacheBytes would cache no full tile")
	}
}
