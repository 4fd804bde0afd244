package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
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
	spec, err := api.GetSwagger()
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
