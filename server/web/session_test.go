package web

import (
	"net/http/httptest"
	"testing"
)

// A form posted from one of the pages, all under Referrer-Policy:
// no-referrer, carries "Origin: null"; Sec-Fetch-Site tells a same-origin
// post from a cross-site one.
func TestSameOrigin_NullOriginNeedsSameOriginFetchSite(t *testing.T) {
	for _, tc := range []struct {
		name, origin, site string
		ok                 bool
	}{
		{"no Origin (not a browser)", "", "", true},
		{"this server", "http://sb.example:8080", "same-origin", true},
		{"this server, no Sec-Fetch-Site", "http://sb.example:8080", "", true},
		{"another origin", "https://evil.example", "cross-site", false},
		{"another port", "http://sb.example:9090", "same-site", false},
		{"null from this server's page", "null", "same-origin", true},
		{"null from another site", "null", "cross-site", false},
		{"null from a sibling site", "null", "same-site", false},
		{"null without Sec-Fetch-Site (an older browser: the CSRF token decides)", "null", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://sb.example:8080/console/sign-in", nil)
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			if tc.site != "" {
				r.Header.Set("Sec-Fetch-Site", tc.site)
			}
			if err := sameOrigin(r); (err == nil) != tc.ok {
				t.Errorf("sameOrigin = %v, want ok %v", err, tc.ok)
			}
		})
	}
}
