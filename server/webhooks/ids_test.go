package webhooks

import (
	"slices"
	"sort"
	"testing"
	"time"
)

// Event ids sort by time then sequence; inverted keys sort the other way;
// idHex accepts exactly what newEventHex makes.
func TestEventIDs(t *testing.T) {
	base := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var ids, inv []string
	for i := range 50 {
		h := newEventHex(base.Add(time.Duration(i/10)*time.Millisecond), uint64(i+1))
		if got, ok := idHex(eventPrefix+h, eventPrefix); !ok || got != h {
			t.Fatalf("idHex(%q) = %q, %v", eventPrefix+h, got, ok)
		}
		if got := timeOf(h); !got.Equal(base.Add(time.Duration(i/10) * time.Millisecond)) {
			t.Fatalf("timeOf = %s", got)
		}
		if invert(invert(h)) != h {
			t.Fatalf("invert is not an involution on %q", h)
		}
		ids = append(ids, h)
		inv = append(inv, invert(h))
	}
	if !sort.StringsAreSorted(ids) {
		t.Error("ids do not sort in creation order")
	}
	rev := slices.Clone(inv)
	slices.Reverse(rev)
	if !sort.StringsAreSorted(rev) {
		t.Error("inverted ids do not sort newest first")
	}
	for _, bad := range []string{"", "evt_", "evt_xyz", "evt_" + ids[0][:35], "evt_" + ids[0] + "0", "dlv_" + ids[0], "evt_" + "A" + ids[0][1:]} {
		if _, ok := idHex(bad, eventPrefix); ok {
			t.Errorf("idHex accepted %q", bad)
		}
	}
}
