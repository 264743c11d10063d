package daemon

import (
	"bytes"
	"container/list"
	"context"
	"sync"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/postgres"
)

// An instance of several on PostgreSQL answers the log's reads from the
// database: a follower from its view (ledger.Follow), the sequencer from
// its term's ledger. Without a cache, every tile, entry and entry bundle
// a client asks for, and every tile a proof is made from, is a query.
// What is read most never changes: an entry, once stored, and a full
// tile (TileWidth hashes: later batches write the tiles after it, never
// it again). Each instance keeps those in one cache of readCacheBytes,
// its follower's view and its terms alike (the same log), least recently
// used out first, so that reads of them cost the database nothing and
// scale with the instances that serve them. Partial tiles, which grow,
// are read from the database every time.
//
// Only a client's reads (withCachedReads, GET requests) are answered from
// the cache. The ledger's own reads (a follower view's checks in Follow
// and Refresh: a new checkpoint's root against the stored tiles, the
// stored tree's consistency with the view's; a term's open) always read
// the database, so that a database that shows another history is caught
// as before.

// readCacheBytes bounds the bytes an instance's cache holds, with
// itemOverhead an item: some 1,000 full tiles (8 KiB each: the level-0
// tiles of 256,000 entries), or 11,000 entries of 600 bytes. It is kept
// well within ledgerd's default Go memory limit of 48 MiB (docs/config.md
// "Memory"), which a larger live cache would make the collector run
// against.
const readCacheBytes = 8 << 20

// cachedReadsKey marks a context whose reads the cache may answer.
type cachedReadsKey struct{}

// withCachedReads marks ctx as a client's read.
func withCachedReads(ctx context.Context) context.Context {
	return context.WithValue(ctx, cachedReadsKey{}, true)
}

func cachedReads(ctx context.Context) bool { return ctx.Value(cachedReadsKey{}) != nil }

// cachingStore is the store of a follower's view or of a term's ledger:
// the PostgreSQL store, with a client's reads of entries and full tiles
// answered from cache when it has them. Every other method is the
// store's.
type cachingStore struct {
	*postgres.Store
	cache *readCache
}

func (s *cachingStore) Entry(ctx context.Context, index uint64) ([]byte, error) {
	if !cachedReads(ctx) {
		return s.Store.Entry(ctx, index)
	}
	k := cacheKey{entry: true, index: index}
	if e, ok := s.cache.get(k); ok {
		return e, nil
	}
	e, err := s.Store.Entry(ctx, index)
	if err == nil {
		s.cache.put(k, bytes.Clone(e))
	}
	return e, err
}

// ReadEntries answers a range of at most a bundle (TileWidth entries)
// from the cache when it holds every entry of it, and caches what it
// reads; longer ranges (an export) are read from the store alone, so
// that one export does not push out what clients read.
func (s *cachingStore) ReadEntries(ctx context.Context, start, end uint64, fn func(index uint64, entry []byte) error) error {
	if !cachedReads(ctx) || end < start || end-start > ledger.TileWidth {
		return s.Store.ReadEntries(ctx, start, end, fn)
	}
	var got [ledger.TileWidth][]byte
	all := true
	for i := start; i < end && all; i++ {
		got[i-start], all = s.cache.get(cacheKey{entry: true, index: i})
	}
	if all {
		for i := start; i < end; i++ {
			if err := fn(i, got[i-start]); err != nil {
				return err
			}
		}
		return nil
	}
	return s.Store.ReadEntries(ctx, start, end, func(i uint64, e []byte) error {
		s.cache.put(cacheKey{entry: true, index: i}, bytes.Clone(e))
		return fn(i, e)
	})
}

func (s *cachingStore) Tile(ctx context.Context, level uint8, index uint64) ([]byte, error) {
	if !cachedReads(ctx) {
		return s.Store.Tile(ctx, level, index)
	}
	k := cacheKey{level: level, index: index}
	if t, ok := s.cache.get(k); ok {
		return t, nil
	}
	t, err := s.Store.Tile(ctx, level, index)
	if err == nil && len(t) == ledger.TileWidth*ledger.HashSize {
		s.cache.put(k, bytes.Clone(t))
	}
	return t, err
}

// cacheKey names an entry (entry, index) or a full tile (level, index).
type cacheKey struct {
	entry bool
	level uint8
	index uint64
}

// readCache is a cache of immutable byte strings, at most max bytes of
// them (with itemOverhead for each), the least recently used dropped
// first. Its values are shared:
// callers do not change them (get caps their capacity, so that an append
// copies).
type readCache struct {
	mu    sync.Mutex
	max   int
	size  int
	order *list.List // of *cacheItem, most recently used first
	items map[cacheKey]*list.Element
}

// itemOverhead is what an item costs beyond its value: the list's
// element, the map's entry, the item.
const itemOverhead = 128

type cacheItem struct {
	key cacheKey
	val []byte
}

func newReadCache(max int) *readCache {
	return &readCache{max: max, order: list.New(), items: map[cacheKey]*list.Element{}}
}

func (c *readCache) get(k cacheKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	v := el.Value.(*cacheItem).val
	return v[:len(v):len(v)], true
}

// put caches v for k, unless it is larger than an eighth of the bound.
func (c *readCache) put(k cacheKey, v []byte) {
	if len(v) > c.max/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.order.MoveToFront(el) // the same bytes: immutable
		return
	}
	c.items[k] = c.order.PushFront(&cacheItem{k, v})
	c.size += len(v) + itemOverhead
	for c.size > c.max {
		el := c.order.Back()
		it := c.order.Remove(el).(*cacheItem)
		delete(c.items, it.key)
		c.size -= len(it.val) + itemOverhead
	}
}
