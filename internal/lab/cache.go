package lab

import (
	"container/list"
	"reflect"
	"sync"
)

// Cache limits: entries, and the bytes their values hold (see footprint).
// An explorer result holds about 4 KB and a point's summary about 2 KB, so
// the entry count binds first; the byte limit bounds the cache if results
// grow.
const (
	cacheEntries = 512
	cacheBytes   = 8 << 20
)

// cache is a small LRU map from string keys to values, bounded both in
// entries and in bytes, safe for concurrent use.
type cache struct {
	mu       sync.Mutex
	max      int // entries
	maxBytes int
	bytes    int // footprint of the entries held
	ll       *list.List
	m        map[string]*list.Element
}

type entry struct {
	key  string
	val  any
	size int
}

func newCache(max, maxBytes int) *cache {
	return &cache{max: max, maxBytes: maxBytes, ll: list.New(), m: map[string]*list.Element{}}
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

// put stores val under key, evicting the least recently used entries
// until both limits hold. A value larger than the byte limit is not
// stored.
func (c *cache) put(key string, val any) {
	size := len(key) + footprint(val)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.remove(e)
	}
	if size > c.maxBytes {
		return
	}
	c.m[key] = c.ll.PushFront(&entry{key, val, size})
	c.bytes += size
	for c.ll.Len() > c.max || c.bytes > c.maxBytes {
		c.remove(c.ll.Back())
	}
}

func (c *cache) remove(e *list.Element) {
	en := c.ll.Remove(e).(*entry)
	delete(c.m, en.key)
	c.bytes -= en.size
}

// stats returns the number of entries and the bytes they hold.
func (c *cache) stats() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len(), c.bytes
}

// footprint estimates the bytes v holds: its own size plus the backing
// arrays of the strings and slices it reaches, through structs and
// arrays. Maps, pointers and interfaces are not followed (cached values
// hold none).
func footprint(v any) int {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return 0
	}
	return int(rv.Type().Size()) + beyond(rv)
}

// beyond returns the bytes v refers to outside its own size.
func beyond(v reflect.Value) int {
	n := 0
	switch v.Kind() {
	case reflect.String:
		n = v.Len()
	case reflect.Slice:
		n = v.Cap() * int(v.Type().Elem().Size())
		switch v.Type().Elem().Kind() {
		case reflect.String, reflect.Slice, reflect.Struct, reflect.Array:
			for i := range v.Len() {
				n += beyond(v.Index(i))
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			n += beyond(v.Index(i))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			n += beyond(v.Field(i))
		}
	}
	return n
}
