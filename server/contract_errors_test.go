package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/web"
)

// TestContractErrors_ProblemsAreCapped: 60,000 unknown params used to
// answer a 4.8 MB 400; the list stops at errs.MaxProblems and says how many
// more there were.
func TestContractErrors_ProblemsAreCapped(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)
	createConnector(t, c, weatherConnector("weather"))
	createAction(t, c, "weather", forecastAction("forecast"))
	if res, err := c.CreateConnectionWithResponse(bg, "weather", client.ConnectionInput{ApiKey: ptr("k")}); err != nil || res.JSON201 == nil {
		t.Fatalf("connection: %v %s", err, res.Body)
	}
	const unknown = 60000
	var b strings.Builder
	b.WriteString(`{"action":"forecast","params":{"city":"Paris"`)
	for i := range unknown {
		fmt.Fprintf(&b, `,"x%d":1`, i)
	}
	b.WriteString(`}}`)
	raw := env.HTTPClient(t, servertest.WithKey(env.AdminKey))
	res, err := raw.Post(env.URL+"/v1/integrations/weather/run", "application/json", strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, res)
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d: %.300s", res.StatusCode, body)
	}
	if len(body) > 16<<10 {
		t.Fatalf("error body is %d bytes for a %d-byte request, want at most 16 KiB", len(body), b.Len())
	}
	e := decodeError(t, body)
	ps, _ := e.Details["problems"].([]any)
	if len(ps) != errs.MaxProblems || e.Details["problemsOmitted"] != float64(unknown-errs.MaxProblems) {
		t.Fatalf("%d problems listed, problemsOmitted %v; want %d and %d", len(ps), e.Details["problemsOmitted"], errs.MaxProblems, unknown-errs.MaxProblems)
	}
	if want := fmt.Sprintf("and %d more", unknown-errs.MaxProblems); !strings.Contains(e.Message, want) {
		t.Fatalf("message %q does not say %q", e.Message, want)
	}
}

// TestContractErrors_EmptyPathParameter: every route with a path parameter,
// called with that parameter empty, answers the error shape of the native
// API (or OpenAI's on /openai/v1) and says what is missing, rather than
// the generated binding's text.
func TestContractErrors_EmptyPathParameter(t *testing.T) {
	env := servertest.New(t)
	ops, err := servertest.Operations()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, op := range ops {
		segs := strings.Split(op.Path, "/")
		for i, seg := range segs {
			if !strings.HasPrefix(seg, "{") {
				continue
			}
			url := make([]string, len(segs))
			for j, s := range segs {
				switch {
				case j == i:
					url[j] = ""
				case strings.HasPrefix(s, "{"):
					url[j] = "x"
				default:
					url[j] = s
				}
			}
			path := strings.Join(url, "/")
			n++
			t.Run(op.Method+" "+path, func(t *testing.T) {
				req, _ := http.NewRequest(op.Method, env.URL+path, nil)
				req.Header.Set("Authorization", "Bearer "+env.AdminKey)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body := readAll(t, res)
				if strings.HasPrefix(path, "/openai/") {
					if res.StatusCode != 404 && res.StatusCode != 400 || !strings.Contains(string(body), `"type":"invalid_request_error"`) {
						t.Fatalf("%d %s, want 400 or 404 in OpenAI's shape", res.StatusCode, body)
					}
					return
				}
				if strings.HasPrefix(path, "/anthropic/") {
					if res.StatusCode != 404 && res.StatusCode != 400 || !strings.Contains(string(body), `"type":"error"`) || !strings.Contains(string(body), "empty segment") {
						t.Fatalf("%d %s, want 400 or 404 in Anthropic's shape pointing at the empty segment", res.StatusCode, body)
					}
					return
				}
				if web.Owns(path) {
					// Pages answer errors as pages, naming the problem.
					if res.StatusCode != 400 && res.StatusCode != 404 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") ||
						!strings.Contains(string(body), res.Header.Get("X-Request-Id")) {
						t.Fatalf("%d %s, want a 400 or 404 page with the request id", res.StatusCode, body)
					}
					return
				}
				if op.Method == http.MethodHead {
					if res.StatusCode != 400 && res.StatusCode != 404 {
						t.Fatalf("status %d, want 400 or 404", res.StatusCode)
					}
					return
				}
				e := decodeError(t, body)
				if res.Header.Get("X-Request-Id") == "" || e.RequestID == "" {
					t.Fatalf("no request id: %s", body)
				}
				name := strings.Trim(segs[i], "{}")
				switch res.StatusCode {
				case http.StatusBadRequest:
					if e.Code != "invalid_request" || !strings.Contains(e.Message, "path parameter "+name+" is empty") {
						t.Fatalf("%s, want invalid_request naming %s", body, name)
					}
					assertProblems(t, body, name)
				case http.StatusNotFound:
					if e.Code != "not_found" || !strings.Contains(e.Message, "empty segment") {
						t.Fatalf("%s, want not_found pointing at the empty segment", body)
					}
				default:
					t.Fatalf("status %d %s, want 400 or 404", res.StatusCode, body)
				}
			})
		}
	}
	if n == 0 {
		t.Fatal("no route with a path parameter")
	}
	// The examples of the report, and a route that does not exist at all.
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/connectors/"}, {"GET", "/v1/connectors//actions"}, {"DELETE", "/v1/api-keys/"}, {"GET", "/v1/nothing"},
	} {
		t.Run("example "+tc.method+" "+tc.path, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, env.URL+tc.path, nil)
			req.Header.Set("Authorization", "Bearer "+env.AdminKey)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, res)
			e := decodeError(t, body)
			if e.Code == "" || e.Message == "" || strings.Contains(e.Message, "Invalid format") || strings.Contains(e.Message, "can't bind") {
				t.Fatalf("%d %s", res.StatusCode, body)
			}
		})
	}
}
