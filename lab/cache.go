package lab

import (
	"container/list"
	"sync"
)

// cache is a small LRU map from string keys to values, safe for
// concurrent use.
type cache struct {
	mu  sync.Mutex
	max int
	ll  *list.List
	m   map[string]*list.Element
}

type entry struct {
	key string
	val any
}

func newCache(max int) *cache {
	return &cache{max: max, ll: list.New(), m: map[string]*list.Element{}}
}

func (c *cache) get(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*entry).val, true
	}
	return nil, false
}

func (c *cache) put(key string, val any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		e.Value.(*entry).val = val
		c.ll.MoveToFront(e)
		return
	}
	c.m[key] = c.ll.PushFront(&entry{key, val})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.m, last.Value.(*entry).key)
	}
}
