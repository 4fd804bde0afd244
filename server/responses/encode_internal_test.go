package responses

import (
	"encoding/json"
	"testing"

	fastjson "github.com/goccy/go-json"
)

func TestAppendString(t *testing.T) {
	for _, v := range []string{"", "resp_0193a1b2c3d4e5f6", "key_a", `quote " and \ backslash`, "tab\tnewline\n", "é and \u2028", "\xff invalid"} {
		t.Run(v, func(t *testing.T) { checkAppendString(t, v) })
	}
}

func FuzzAppendString(f *testing.F) {
	for _, v := range []string{"resp_1", `a"b`, "\x00", "\xc3\x28"} {
		f.Add(v)
	}
	f.Fuzz(checkAppendString)
}

// checkAppendString: appendString's JSON decodes to what the encoder's
// does.
func checkAppendString(t *testing.T, v string) {
	got := appendString([]byte("x"), v)
	want, _ := fastjson.Marshal(v)
	var a, b string
	if err := json.Unmarshal(got[1:], &a); err != nil {
		t.Fatalf("appendString(%q) = %s: %v", v, got[1:], err)
	}
	if err := json.Unmarshal(want, &b); err != nil {
		t.Fatal(err)
	}
	if a != b || got[0] != 'x' {
		t.Fatalf("appendString(%q) = %s, decodes to %q; the encoder's %s to %q", v, got, a, want, b)
	}
}

func TestParseLocation(t *testing.T) {
	l := location{block: "resp_0193a1b2c3d4e5f6", off: 1234, n: 567}
	if got, err := parseLocation(string(l.appendTo(nil))); err != nil || got != l {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for _, bad := range []string{"", "resp_1", "resp_1 12", "resp_1 x 3", " 1 2", "resp_1 1 2 3"} {
		if _, err := parseLocation(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
