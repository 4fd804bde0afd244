package store

import "testing"

func TestCache(t *testing.T) {
	var c Cache[string, int]
	k := "crm.me.default"
	v := 1

	steps := []struct {
		name    string
		do      func() bool // reports a hit, for gets
		wantHit bool
	}{
		{"empty: miss", func() bool { _, ok := c.Get(k, 1); return ok }, false},
		{"put at the current count", func() bool { c.Put(k, v, 1); return false }, false},
		{"same count: hit", func() bool { _, ok := c.Get(k, 1); return ok }, true},
		{"older count: miss", func() bool { _, ok := c.Get(k, 0); return ok }, false},
		{"older count left the entry", func() bool { _, ok := c.Get(k, 1); return ok }, true},
		{"put from a stale read is refused", func() bool { c.Put("other", v, 0); _, ok := c.Get("other", 1); return ok }, false},
		{"newer count: miss", func() bool { _, ok := c.Get(k, 2); return ok }, false},
		{"newer count emptied the cache", func() bool { _, ok := c.Get(k, 2); return ok }, false},
		{"put at the newer count", func() bool { c.Put(k, v, 2); _, ok := c.Get(k, 2); return ok }, true},
	}
	for _, s := range steps {
		if got := s.do(); got != s.wantHit {
			t.Fatalf("%s: hit = %v, want %v", s.name, got, s.wantHit)
		}
	}
}
