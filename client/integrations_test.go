package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

func ptr[T any](v T) *T { return &v }

// TestIntegrationsRun drives the hand-written layer against the real
// server: define a connector and an action with the generated operations,
// connect an account, run the action, decode its result, and read a
// failure as an *APIError.
func TestIntegrationsRun(t *testing.T) {
	ctx := context.Background()
	weather := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != "key-"+r.URL.Query().Get("account") {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"city": r.URL.Path[len("/forecast/"):], "main": map[string]any{"temp": 21.5}})
	}))
	defer weather.Close()
	env := servertest.New(t, func(c *config.Config) { c.Egress.Allow = []string{"127.0.0.0/8"} })

	sb, err := client.New(env.URL, env.AdminKey, client.WithHTTPClient(env.HTTPClient(t)))
	if err != nil {
		t.Fatal(err)
	}
	in := client.ConnectorAuthInHeader
	if res, err := sb.CreateConnectorWithResponse(ctx, client.ConnectorInput{Name: ptr("weather"), BaseUrl: weather.URL,
		Auth: client.ConnectorAuth{Type: client.ConnectorAuthAPIKey, Name: ptr("X-API-Key"), In: &in}}); err != nil || res.StatusCode() != 201 {
		t.Fatalf("create connector: %v %s", err, res.Body)
	}
	inQuery := client.ActionParameterInQuery
	params := map[string]client.ActionParameter{
		"city":    {Type: client.ActionParameterString, Required: ptr(true)},
		"account": {Type: client.ActionParameterString, In: &inQuery},
	}
	if res, err := sb.CreateActionWithResponse(ctx, "weather", client.ActionInput{Name: ptr("forecast"), Method: client.ActionMethodGET,
		Path: "/forecast/{{params.city}}", Parameters: &params,
		Transformation: ptr("return {city: data.city, celsius: data.main.temp}")}); err != nil || res.StatusCode() != 201 {
		t.Fatalf("create action: %v %s", err, res.Body)
	}
	for _, c := range []struct{ name, key string }{{"default", "key-a"}, {"second", "key-b"}} {
		if res, err := sb.CreateConnectionWithResponse(ctx, "weather", client.ConnectionInput{Name: ptr(c.name), ApiKey: ptr(c.key)}); err != nil || res.StatusCode() != 201 {
			t.Fatalf("create connection: %v %s", err, res.Body)
		}
	}

	res, err := sb.Integrations("weather").Run(ctx, "forecast", map[string]any{"city": "Oslo", "account": "a"})
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		City    string  `json:"city"`
		Celsius float64 `json:"celsius"`
	}
	if err := res.Decode(&f); err != nil || f.City != "Oslo" || f.Celsius != 21.5 || res.Status != 200 {
		t.Fatalf("result %s (%+v, %v)", res.Result, f, err)
	}

	// Params may be a struct; the connection may be chosen.
	type forecastParams struct {
		City    string `json:"city"`
		Account string `json:"account"`
	}
	if _, err := sb.Integrations("weather").Connection("second").Run(ctx, "forecast", forecastParams{City: "Bergen", Account: "b"}); err != nil {
		t.Fatal(err)
	}

	// The default connection's key does not fit account b: the upstream's
	// 401 is an upstream_error.
	_, err = sb.Integrations("weather").Run(ctx, "forecast", forecastParams{City: "Bergen", Account: "b"})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 502 || ae.Code != "upstream_error" || ae.Details["status"] != float64(401) || ae.RequestID == "" {
		t.Fatalf("err = %#v", err)
	}
	if !client.IsCode(err, "upstream_error") {
		t.Fatal("IsCode does not recognise the code")
	}
	_, err = sb.Integrations("weather").Run(ctx, "forecast", map[string]any{})
	if !client.IsCode(err, "invalid_request") {
		t.Fatalf("missing param: %v", err)
	}
}
