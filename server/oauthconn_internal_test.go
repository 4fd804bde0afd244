package server

import "testing"

func TestWantsHTML(t *testing.T) {
	for _, tc := range []struct {
		accept string
		want   bool
	}{
		{"", false},
		{"*/*", false},
		{"application/json", false},
		{"text/html", true},
		{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", true},
		{"application/json, text/html;q=0.5", false},
		{"text/html;q=0", false},
		{"text/html;q=0.9, application/json;q=0.9", true},
		{"garbage;;;, text/html", true},
	} {
		t.Run(tc.accept, func(t *testing.T) {
			if got := wantsHTML(tc.accept); got != tc.want {
				t.Fatalf("wantsHTML(%q) = %v, want %v", tc.accept, got, tc.want)
			}
		})
	}
}

func FuzzWantsHTML(f *testing.F) {
	for _, s := range []string{"", "text/html", "application/json;q=0.1, text/html;q=0.2", "*/*;q=abc", ",,,;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		_ = wantsHTML(accept) // must not panic
	})
}
