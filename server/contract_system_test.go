package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

func TestContractHealthz(t *testing.T) {
	env := servertest.New(t)
	res, err := env.ClientWithKey(t, "").GetHealthzWithResponse(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusOK || res.JSON200 == nil || res.JSON200.Status != "ok" {
		t.Fatalf("GET /healthz = %d %s, want 200 {status: ok}", res.StatusCode(), res.Body)
	}
}

func TestContractReadyz(t *testing.T) {
	env := servertest.New(t)
	c := env.ClientWithKey(t, "") // probes are public
	res, err := c.GetReadyzWithResponse(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusOK || res.JSON200 == nil || res.JSON200.Status != "ok" {
		t.Fatalf("GET /readyz = %d %s, want 200 {status: ok}", res.StatusCode(), res.Body)
	}

	// A closed store is not ready; the process is still alive.
	if err := env.Store.Close(); err != nil {
		t.Fatal(err)
	}
	res, err = c.GetReadyzWithResponse(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusServiceUnavailable || res.JSON503 == nil || res.JSON503.Error.Code != "unavailable" {
		t.Fatalf("GET /readyz with the store closed = %d %s, want 503 unavailable", res.StatusCode(), res.Body)
	}
	live, err := c.GetHealthzWithResponse(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if live.StatusCode() != http.StatusOK {
		t.Fatalf("GET /healthz with the store closed = %d, want 200", live.StatusCode())
	}
}

func TestContractOpenAPIJSON(t *testing.T) {
	env := servertest.New(t)
	res, err := env.ClientWithKey(t, "").GetOpenAPIWithResponse(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusOK {
		t.Fatalf("GET /openapi.json = %d", res.StatusCode())
	}
	// The served document is the embedded spec, operation for operation.
	var served struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(res.Body, &served); err != nil {
		t.Fatalf("GET /openapi.json is not JSON: %v", err)
	}
	spec, err := server.LoadSpec()
	if err != nil {
		t.Fatal(err)
	}
	if served.OpenAPI != spec.OpenAPI {
		t.Errorf("openapi = %q, want %q", served.OpenAPI, spec.OpenAPI)
	}
	for path, item := range spec.Paths.Map() {
		for method := range item.Operations() {
			if _, ok := served.Paths[path][strings.ToLower(method)]; !ok {
				t.Errorf("served spec lacks %s %s", method, path)
			}
		}
	}
	if len(served.Paths) != spec.Paths.Len() {
		t.Errorf("served spec has %d paths, embedded %d", len(served.Paths), spec.Paths.Len())
	}
}

// TestSpecIsValid fails with the spec's own error when openapi.yaml is not
// a valid OpenAPI document (every validated exchange would fail otherwise).
func TestSpecIsValid(t *testing.T) {
	spec, err := server.LoadSpec()
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.Validate(context.Background()); err != nil {
		hint := ""
		if strings.Contains(err.Error(), "extra sibling fields") {
			hint = " (hint: in a flow mapping like {type: string, description: a, b} the comma starts a new key; quote the description)"
		}
		t.Fatalf("server/openapi.yaml is not a valid OpenAPI document: %v%s", err, hint)
	}
	ids := map[string]bool{}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			switch {
			case op.OperationID == "":
				t.Errorf("%s %s has no operationId", method, path)
			case ids[strings.ToLower(op.OperationID)]:
				t.Errorf("operationId %s is used twice", op.OperationID)
			}
			ids[strings.ToLower(op.OperationID)] = true
			if op.Summary == "" && op.Description == "" {
				t.Errorf("%s %s is undocumented (no summary or description)", method, path)
			}
			if len(op.Tags) == 0 {
				t.Errorf("%s %s has no tag", method, path)
			}
		}
	}
}
