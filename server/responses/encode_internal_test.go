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

func TestIndexLines(t *testing.T) {
	a, b, c := "resp_019ab2c3d4e5f60718293a4b5c6d7e8f", "resp_019ab2c3d4e5f60718293a4b5c6d7e90", "resp_019ab2c3d4e5f60718293a4b5c6d7e9"
	var lines []byte
	lines = appendLine(lines, a, 0, 120)
	lines = append(appendLine(append(lines, '\n'), b, 120, 98), '\n')
	lines = appendLine(lines, c, 218, 7) // a prefix of b's id
	for _, tc := range []struct {
		id     string
		off, n int
		ok     bool
	}{{a, 0, 120, true}, {b, 120, 98, true}, {c, 218, 7, true}, {"resp_019ab2c3d4e5f60718293a4b5c6d7e", 0, 0, false}, {"", 0, 0, false}} {
		t.Run(tc.id, func(t *testing.T) {
			if off, n, ok := findLine(lines, tc.id); off != tc.off || n != tc.n || ok != tc.ok {
				t.Errorf("findLine = %d %d %v, want %d %d %v", off, n, ok, tc.off, tc.n, tc.ok)
			}
		})
	}
	for _, tc := range []struct{ id, want string }{
		{a, string(lines[len(appendLine(nil, a, 0, 120))+1:])},
		{c, string(lines[:len(lines)-len(appendLine(nil, c, 218, 7))-1])},
		{"resp_other", string(lines)},
	} {
		if got := string(withoutLine(lines, tc.id)); got != tc.want {
			t.Errorf("withoutLine(%s) = %q, want %q", tc.id, got, tc.want)
		}
	}
	if got := withoutLine(appendLine(nil, a, 0, 1), a); len(got) != 0 {
		t.Errorf("the only line removed: %q", got)
	}
}

func TestWindow(t *testing.T) {
	for id, want := range map[string]string{
		"resp_019ab2c3d4e5f60718293a4b5c6d7e8f": "resp_019ab2c3d4e",
		"019ab2c3d4e5f60718293a4b5c6d7e8f":      "019ab2c3d4e",
		"resp_019AB2C3D4E5F60718293A4B5C6D7E8F": "", // not server/ids' lower-case hex
		"resp_1":                                "",
		"resp_019ab2c3d4e5f60718293a4b5c6d7e8g": "",
	} {
		if got := window(id); got != want {
			t.Errorf("window(%s) = %q, want %q", id, got, want)
		}
	}
}
