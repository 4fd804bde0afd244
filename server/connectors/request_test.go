package connectors_test

import (
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

func apiConnector(base string, auth connectors.Auth) connectors.Connector {
	return connectors.Connector{Name: "weather", BaseURL: base, Auth: auth}
}

var noAuth = connectors.Auth{Type: connectors.AuthNone}

func itemAction(method, path string, params map[string]connectors.Parameter) connectors.Action {
	return connectors.Action{Connector: "weather", Name: "item", Method: method, Path: path, Parameters: params}
}

func problemsOf(t *testing.T, err error) map[string]string {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Invalid {
		t.Fatalf("err = %v, want invalid_request", err)
	}
	out := map[string]string{}
	ps, _ := e.Details["problems"].([]errs.Problem)
	for _, p := range ps {
		out[p.Field] = p.Problem
	}
	return out
}

// TestBuildRequestPathEscaping is the escaping table: a path value becomes
// exactly one segment, or is refused.
func TestBuildRequestPathEscaping(t *testing.T) {
	a := itemAction("GET", "/items/{{params.id}}/details", map[string]connectors.Parameter{
		"id": {Type: connectors.TypeString, Required: true},
	})
	tests := []struct {
		value   string
		path    string // escaped path sent; "" when refused
		problem string
	}{
		{"42", "/v2/items/42/details", ""},
		{"a b", "/v2/items/a%20b/details", ""},
		{"%2F", "/v2/items/%252F/details", ""},
		{"%2e%2e", "/v2/items/%252e%252e/details", ""},
		{"café", "/v2/items/caf%C3%A9/details", ""},
		{"日本", "/v2/items/%E6%97%A5%E6%9C%AC/details", ""},
		{"a;b=c,d", "/v2/items/a%3Bb=c%2Cd/details", ""},
		{`back\slash`, "/v2/items/back%5Cslash/details", ""},
		{"a+b@c:d", "/v2/items/a+b@c:d/details", ""},
		{"../x", "", `must not contain "/"`},
		{"..", "", `must not contain ".."`},
		{"x..y", "", `must not contain ".."`},
		{".", "", `must not be "."`},
		{"a/b", "", `must not contain "/"`},
		{"/", "", `must not contain "/"`},
		{"?", "", `must not contain "?" or "#"`},
		{"a?x=1", "", `must not contain "?" or "#"`},
		{"#frag", "", `must not contain "?" or "#"`},
		{"", "", "must not be empty"},
		{"a\nb", "", "control characters"},
		{"a\x00b", "", "control characters"},
		{"a\x7fb", "", "control characters"},
	}
	for _, base := range []string{"https://api.example.com/v2", "https://api.example.com/v2/"} {
		c := apiConnector(base, noAuth)
		for _, tt := range tests {
			t.Run(base+"|"+tt.value, func(t *testing.T) {
				r, err := connectors.BuildRequest(c, a, map[string]any{"id": tt.value}, connectors.Credentials{})
				if tt.path == "" {
					if p := problemsOf(t, err)["params.id"]; !strings.Contains(p, tt.problem) {
						t.Fatalf("problem = %q, want %q", p, tt.problem)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := r.URL.EscapedPath(); got != tt.path {
					t.Fatalf("path = %s, want %s", got, tt.path)
				}
				if got := r.URL.String(); got != "https://api.example.com"+tt.path {
					t.Fatalf("URL = %s", got)
				}
			})
		}
	}
}

func TestBuildRequestJoinsBaseURL(t *testing.T) {
	tests := []struct{ base, path, want string }{
		{"https://api.example.com", "/a", "https://api.example.com/a"},
		{"https://api.example.com/", "/a", "https://api.example.com/a"},
		{"https://api.example.com/v1", "/a/b", "https://api.example.com/v1/a/b"},
		{"https://api.example.com/v1/", "/a/", "https://api.example.com/v1/a/"},
		{"https://api.example.com/pre%20fix", "/a%20b", "https://api.example.com/pre%20fix/a%20b"},
		{"http://127.0.0.1:8080/x", "/", "http://127.0.0.1:8080/x/"},
	}
	for _, tt := range tests {
		t.Run(tt.base+tt.path, func(t *testing.T) {
			r, err := connectors.BuildRequest(apiConnector(tt.base, noAuth), itemAction("GET", tt.path, nil), nil, connectors.Credentials{})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.URL.String(); got != tt.want {
				t.Fatalf("URL = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestBuildRequestParams(t *testing.T) {
	params := map[string]connectors.Parameter{
		"id":     {Type: connectors.TypeInteger, Required: true},
		"units":  {Type: connectors.TypeString, Enum: []any{"metric", "imperial"}, Default: "metric"},
		"days":   {Type: connectors.TypeNumber},
		"flag":   {Type: connectors.TypeBoolean},
		"tags":   {Type: connectors.TypeArray},
		"filter": {Type: connectors.TypeObject},
	}
	a := itemAction("GET", "/items/{{params.id}}", params)
	c := apiConnector("https://api.example.com", noAuth)

	t.Run("every problem at once", func(t *testing.T) {
		_, err := connectors.BuildRequest(c, a, map[string]any{
			"units": "kelvin", "days": "three", "flag": 1.0, "tags": "a", "filter": []any{}, "bogus": 1.0,
		}, connectors.Credentials{})
		ps := problemsOf(t, err)
		want := map[string]string{
			"params.id":     "is required",
			"params.units":  "must be one of",
			"params.days":   "must be of type number, got a string",
			"params.flag":   "must be of type boolean, got a number",
			"params.tags":   "must be of type array",
			"params.filter": "must be of type object, got an array",
			"params.bogus":  "unknown parameter",
		}
		for f, w := range want {
			if !strings.Contains(ps[f], w) {
				t.Errorf("%s: problem %q, want %q", f, ps[f], w)
			}
		}
		if len(ps) != len(want) {
			t.Errorf("problems = %v", ps)
		}
	})
	t.Run("integer must be whole", func(t *testing.T) {
		_, err := connectors.BuildRequest(c, a, map[string]any{"id": 1.5}, connectors.Credentials{})
		if p := problemsOf(t, err)["params.id"]; !strings.Contains(p, "integer") {
			t.Fatalf("problem %q", p)
		}
	})
	t.Run("defaults and query placement", func(t *testing.T) {
		r, err := connectors.BuildRequest(c, a, map[string]any{
			"id": 7.0, "days": 2.5, "flag": true, "tags": []any{"x", "y z"}, "filter": map[string]any{"a": 1.0}, "units": nil,
		}, connectors.Credentials{})
		if err != nil {
			t.Fatal(err)
		}
		want := "days=2.5&filter=%7B%22a%22%3A1%7D&flag=true&tags=x&tags=y+z&units=metric"
		if r.URL.Path != "/items/7" || r.URL.RawQuery != want {
			t.Fatalf("URL = %s, want path /items/7 and query %s", r.URL, want)
		}
		if r.Body != nil {
			t.Fatalf("GET has a body: %s", r.Body)
		}
	})
}

func TestBuildRequestPlacement(t *testing.T) {
	a := connectors.Action{
		Connector: "crm", Name: "create", Method: "POST", Path: "/accounts/{{params.account}}/contacts",
		Parameters: map[string]connectors.Parameter{
			"account": {Type: connectors.TypeString, Required: true},
			"name":    {Type: connectors.TypeString, Required: true},
			"age":     {Type: connectors.TypeInteger},
			"vip":     {Type: connectors.TypeBoolean},
			"trace":   {Type: connectors.TypeString, In: connectors.InHeader},
			"dry":     {Type: connectors.TypeBoolean, In: connectors.InQuery},
			"tags":    {Type: connectors.TypeArray, In: connectors.InHeader},
			"note":    {Type: connectors.TypeString},
		},
		Headers: map[string]string{"X-Note": "note: {{params.note}}", "X-Vip": "{{params.vip}}"},
		Body:    map[string]any{"contact": map[string]any{"name": "{{params.name}}", "age": "{{params.age}}", "label": "{{params.name}} ({{params.age}})"}},
	}
	c := apiConnector("https://crm.example.com/api", noAuth)
	r, err := connectors.BuildRequest(c, a, map[string]any{
		"account": "acme", "name": "Ada", "age": 36.0, "trace": "t-1", "dry": true, "tags": []any{"a", "b"}, "note": "hi",
	}, connectors.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.URL.String(); got != "https://crm.example.com/api/accounts/acme/contacts?dry=true" {
		t.Errorf("URL = %s", got)
	}
	for h, want := range map[string]string{"Trace": "t-1", "Tags": "a, b", "X-Note": "note: hi", "Content-Type": "application/json", "User-Agent": "Switchboard"} {
		if got := r.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	if _, ok := r.Header["X-Vip"]; ok {
		t.Errorf("X-Vip sent for an absent optional parameter: %q", r.Header.Get("X-Vip"))
	}
	if got, want := string(r.Body), `{"contact":{"age":36,"label":"Ada (36)","name":"Ada"}}`; got != want {
		t.Errorf("body = %s, want %s", got, want)
	}

	// Without a body template, body parameters become members of a JSON object.
	a.Body, a.Headers = nil, nil
	r, err = connectors.BuildRequest(c, a, map[string]any{"account": "acme", "name": "Ada", "vip": false}, connectors.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(r.Body), `{"name":"Ada","vip":false}`; got != want {
		t.Errorf("body = %s, want %s", got, want)
	}
	// A form Content-Type encodes them as a form.
	a.Headers = map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	r, err = connectors.BuildRequest(c, a, map[string]any{"account": "acme", "name": "Ada Lovelace", "age": 36.0}, connectors.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(r.Body), `age=36&name=Ada+Lovelace`; got != want {
		t.Errorf("form body = %s, want %s", got, want)
	}
}

func TestBuildRequestRefusesHeaderInjection(t *testing.T) {
	a := itemAction("GET", "/x", map[string]connectors.Parameter{
		"lang": {Type: connectors.TypeString},
		"h":    {Type: connectors.TypeString, In: connectors.InHeader},
	})
	a.Headers = map[string]string{"Accept-Language": "{{params.lang}}"}
	c := apiConnector("https://api.example.com", noAuth)
	for _, v := range []string{"en\r\nX-Evil: 1", "en\nX: 1", "en\rX", "a\x00b"} {
		_, err := connectors.BuildRequest(c, a, map[string]any{"lang": v, "h": v}, connectors.Credentials{})
		ps := problemsOf(t, err)
		if !strings.Contains(ps[`headers["Accept-Language"]`]+ps["headers.Accept-Language"], "CR, LF") || !strings.Contains(ps["params.h"], "CR, LF") {
			t.Fatalf("%q: problems %v", v, ps)
		}
	}
}

func TestBuildRequestCredentials(t *testing.T) {
	a := itemAction("GET", "/me", map[string]connectors.Parameter{"q": {Type: connectors.TypeString}})
	a.Headers = map[string]string{"Authorization": "overridden?", "Cookie": "session=abc"}
	const key = "k3y+/=secret"
	tests := []struct {
		name  string
		auth  connectors.Auth
		cred  connectors.Credentials
		check func(t *testing.T, r *connectors.Request)
	}{
		{"apiKey header with prefix", connectors.Auth{Type: connectors.AuthAPIKey, Name: "X-API-Key", In: connectors.InHeader, Prefix: "Token "}, connectors.Credentials{APIKey: key},
			func(t *testing.T, r *connectors.Request) {
				if got := r.Header.Get("X-API-Key"); got != "Token "+key {
					t.Fatalf("X-API-Key = %q", got)
				}
			}},
		{"apiKey query", connectors.Auth{Type: connectors.AuthAPIKey, Name: "api_key", In: connectors.InQuery}, connectors.Credentials{APIKey: key},
			func(t *testing.T, r *connectors.Request) {
				if got := r.URL.Query().Get("api_key"); got != key {
					t.Fatalf("api_key = %q (query %s)", got, r.URL.RawQuery)
				}
				if r.CredentialQuery != "api_key" {
					t.Fatalf("CredentialQuery = %q", r.CredentialQuery)
				}
			}},
		{"apiKey cookie", connectors.Auth{Type: connectors.AuthAPIKey, Name: "key", In: connectors.InCookie}, connectors.Credentials{APIKey: "abc123"},
			func(t *testing.T, r *connectors.Request) {
				if got := r.Header.Get("Cookie"); got != "session=abc; key=abc123" {
					t.Fatalf("Cookie = %q", got)
				}
			}},
		{"bearer", connectors.Auth{Type: connectors.AuthBearer}, connectors.Credentials{Token: "tok"},
			func(t *testing.T, r *connectors.Request) {
				if got := r.Header.Get("Authorization"); got != "Bearer tok" {
					t.Fatalf("Authorization = %q", got)
				}
			}},
		{"basic", connectors.Auth{Type: connectors.AuthBasic}, connectors.Credentials{Username: "ada", Password: "p:w"},
			func(t *testing.T, r *connectors.Request) {
				want := "Basic " + base64.StdEncoding.EncodeToString([]byte("ada:p:w"))
				if got := r.Header.Get("Authorization"); got != want {
					t.Fatalf("Authorization = %q, want %q", got, want)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := connectors.BuildRequest(apiConnector("https://api.example.com", tt.auth), a, nil, tt.cred)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, r)
			req, err := r.HTTPRequest(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if req.Host != "api.example.com" || req.Body == nil {
				t.Fatalf("request host %q", req.Host)
			}
			if b, _ := io.ReadAll(req.Body); len(b) != 0 {
				t.Fatalf("GET body %q", b)
			}
		})
	}
}

// FuzzBuildRequest checks, for any parameter values, that request
// building never panics, never changes the destination, keeps every path
// value in exactly one segment, and never puts a control character in a
// header.
func FuzzBuildRequest(f *testing.F) {
	for _, s := range []string{"x", "../x", "a/b", "%2F", "?", "#", "", "café", "a\r\nb", "..", ".", "a b", "%", "\\", "\x00"} {
		f.Add(s, s, s)
	}
	a := connectors.Action{
		Connector: "f", Name: "a", Method: "POST", Path: "/a/{{params.p}}/b/{{params.q}}",
		Parameters: map[string]connectors.Parameter{
			"p": {Type: connectors.TypeString, Required: true},
			"q": {Type: connectors.TypeString, Required: true},
			"h": {Type: connectors.TypeString, In: connectors.InHeader},
			"x": {Type: connectors.TypeString, In: connectors.InQuery},
			"y": {Type: connectors.TypeString},
		},
		Headers: map[string]string{"X-T": "v={{params.h}}"},
		Body:    map[string]any{"y": "{{params.y}}", "raw": "{{params.p}}-{{params.q}}"},
	}
	c := apiConnector("https://api.example.com/base", connectors.Auth{Type: connectors.AuthAPIKey, Name: "k", In: connectors.InQuery})
	f.Fuzz(func(t *testing.T, p, q, h string) {
		r, err := connectors.BuildRequest(c, a, map[string]any{"p": p, "q": q, "h": h, "x": h, "y": p}, connectors.Credentials{APIKey: "secret"})
		if err != nil {
			if k := errs.KindOf(err); k != errs.Invalid {
				t.Fatalf("error kind %s: %v", k, err)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("error quotes the key: %v", err)
			}
			return
		}
		u, perr := url.Parse(r.URL.String())
		if perr != nil {
			t.Fatalf("built URL does not parse: %v", perr)
		}
		if u.Scheme != "https" || u.Host != "api.example.com" || u.Fragment != "" {
			t.Fatalf("destination changed: %s", r.URL)
		}
		segs := strings.Split(u.EscapedPath(), "/")
		if len(segs) != 6 || segs[1] != "base" || segs[2] != "a" || segs[4] != "b" {
			t.Fatalf("path %q is not /base/a/<p>/b/<q>", u.EscapedPath())
		}
		for i, want := range map[int]string{3: p, 5: q} {
			got, err := url.PathUnescape(segs[i])
			if err != nil || got != want {
				t.Fatalf("segment %d = %q (%v), want %q", i, got, err, want)
			}
		}
		if u.Query().Get("k") != "secret" || u.Query().Get("x") != h {
			t.Fatalf("query %q lost a value", u.RawQuery)
		}
		for name, vs := range r.Header {
			for _, v := range vs {
				if strings.ContainsAny(v, "\r\n\x00") {
					t.Fatalf("header %s has a control character: %q", name, v)
				}
			}
		}
		if !utf8.Valid(r.Body) && utf8.ValidString(p) {
			t.Fatalf("body is not UTF-8")
		}
		if _, err := http.NewRequest(r.Method, r.URL.String(), nil); err != nil {
			t.Fatalf("net/http refuses the URL: %v", err)
		}
	})
}
