package store

import "sync"

// maxCached bounds a Cache; a full cache starts over.
const maxCached = 4096

// Cache keeps values decoded from the store, valid while the store reports
// no committed write to the buckets they came from. Callers read
// Store.Changes of those buckets before reading the data, and pass that
// count to Get and Put: a newer count empties the cache, an older one (a
// caller that read it before a write another caller has seen) misses
// without touching it, and a value read at an older count is not kept.
// The zero value is ready to use.
type Cache[K comparable, V any] struct {
	mu      sync.Mutex
	changes uint64
	m       map[K]V
}

// Get returns the value for k if it is still valid at changes.
func (c *Cache[K, V]) Get(k K, changes uint64) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero V
	switch {
	case changes > c.changes:
		clear(c.m)
		c.changes = changes
		return zero, false
	case changes < c.changes:
		return zero, false
	}
	v, ok := c.m[k]
	return v, ok
}

// Put keeps v, read when the store was at changes, unless it has changed
// since (then v may be stale).
func (c *Cache[K, V]) Put(k K, v V, changes uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if changes != c.changes {
		return
	}
	if c.m == nil || len(c.m) >= maxCached {
		c.m = map[K]V{}
	}
	c.m[k] = v
}
