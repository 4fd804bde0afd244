package gcfloor

import (
	"context"
	"runtime/debug"
	"testing"
)

func TestPercent(t *testing.T) {
	const mb = 1 << 20
	for _, tc := range []struct {
		name    string
		live    uint64
		want    int
		goalMiB uint64 // the resulting heap goal, live*(100+GOGC)/100
	}{
		{"nothing live yet", 0, maxPercent, 0},
		{"2 MB live: the floor", 2 * mb, 3100, 64},
		{"10 MB live: the floor", 10 * mb, 540, 64},
		{"32 MB live: still the floor", 32 * mb, 100, 64},
		{"43 MB live: floor and percent about meet", 43 * mb, 50, 64},
		{"100 MB live: percent", 100 * mb, 50, 150},
		{"tiny heap: capped", 1000, maxPercent, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Percent(tc.live, DefaultFloor, DefaultPercent)
			if got != tc.want {
				t.Fatalf("Percent = %d, want %d", got, tc.want)
			}
			if tc.goalMiB > 0 {
				goal := float64(tc.live) * float64(100+got) / 100 / mb
				if goal < float64(tc.goalMiB)-0.5 || goal > float64(tc.goalMiB)+0.5 {
					t.Fatalf("heap goal %.1f MiB, want %d", goal, tc.goalMiB)
				}
			}
		})
	}
}

func TestApplyAndRestore(t *testing.T) {
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)
	if prev := apply(1<<40, 400); prev != 100 { // a huge floor: the cap applies
		t.Fatalf("apply returned %d, want the previous 100", prev)
	}
	if p := debug.SetGCPercent(100); p != maxPercent {
		t.Fatalf("GOGC = %d after apply, want %d", p, maxPercent)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Run(ctx, 1<<40, 400) // sets, sees ctx done, restores
	if p := debug.SetGCPercent(100); p != 100 {
		t.Fatalf("GOGC after Run = %d, want the original 100", p)
	}
}
