package connectors

import "testing"

func TestLoadCache(t *testing.T) {
	var c loadCache
	k := loadKey{"crm", "me", "default"}
	v := loaded{connector: Connector{Name: "crm"}}

	steps := []struct {
		name    string
		do      func() bool // reports a hit, for gets
		wantHit bool
	}{
		{"empty: miss", func() bool { _, ok := c.get(k, 1); return ok }, false},
		{"put at the current count", func() bool { c.put(k, v, 1); return false }, false},
		{"same count: hit", func() bool { _, ok := c.get(k, 1); return ok }, true},
		{"older count: miss", func() bool { _, ok := c.get(k, 0); return ok }, false},
		{"older count left the entry", func() bool { _, ok := c.get(k, 1); return ok }, true},
		{"put from a stale read is refused", func() bool { c.put(loadKey{"x", "y", "z"}, v, 0); _, ok := c.get(loadKey{"x", "y", "z"}, 1); return ok }, false},
		{"newer count: miss", func() bool { _, ok := c.get(k, 2); return ok }, false},
		{"newer count emptied the cache", func() bool { _, ok := c.get(k, 2); return ok }, false},
		{"put at the newer count", func() bool { c.put(k, v, 2); _, ok := c.get(k, 2); return ok }, true},
	}
	for _, s := range steps {
		if got := s.do(); got != s.wantHit {
			t.Fatalf("%s: hit = %v, want %v", s.name, got, s.wantHit)
		}
	}
}
