package provider

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// actionConnector is the connector the action tests hang their actions on.
const actionConnector = `
resource "switchboard_connector" "weather" {
  name     = "weather"
  base_url = "https://api.weather.example/v1"
  auth = {
    type = "apiKey"
    name = "key"
    in   = "query"
  }
}
`

func TestAccActionResource(t *testing.T) {
	s := testAccServer(t)
	const res = "switchboard_action.test"
	get := s.config(actionConnector + `
resource "switchboard_action" "test" {
  connector   = switchboard_connector.weather.name
  name        = "forecast"
  description = "Daily forecast for a city"
  method      = "GET"
  path        = "/forecast/{{params.city}}"
  parameters = {
    city = { type = "string", required = true, description = "City name" }
    units = {
      type    = "string"
      enum    = ["metric", "imperial"]
      default = "metric"
      in      = "query"
    }
    days = { type = "integer", enum = [1, 3, 7], default = 3 }
  }
  headers        = { "X-Units" = "{{params.units}}" }
  transformation = "return {city: data.location.name, days: data.forecast.length};"
}
`)
	post := func(name, body string) string {
		return s.config(actionConnector + fmt.Sprintf(`
resource "switchboard_action" "test" {
  connector = switchboard_connector.weather.name
  name      = %q
  method    = "POST"
  path      = "/alerts"
  parameters = {
    region = { type = "string", required = true }
    limit  = { type = "integer", default = "10" }
    tags   = { type = "array", default = jsonencode(["storm"]) }
  }
  body       = %s
  timeout_ms = 5000
}
`, name, body))
	}
	version := func(v int64) statecheck.StateCheck {
		return statecheck.ExpectKnownValue(res, tfjsonpath.New("version"), knownvalue.Int64Exact(v))
	}
	param := func(name, attr string) tfjsonpath.Path {
		return tfjsonpath.New("parameters").AtMapKey(name).AtMapKey(attr)
	}

	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             s.checkConnectorsGone,
		Steps: []resource.TestStep{
			{
				Config: get,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("id"), knownvalue.StringExact("weather/forecast")),
					version(1),
					statecheck.ExpectKnownValue(res, param("city", "required"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(res, param("units", "required"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue(res, param("days", "enum"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringExact("1"), knownvalue.StringExact("3"), knownvalue.StringExact("7"),
					})),
					statecheck.ExpectKnownValue(res, param("days", "default"), knownvalue.StringExact("3")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("body"), knownvalue.Null()),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("timeout_ms"), knownvalue.Null()),
				},
				Check: s.checkAction("weather", "forecast", func(a map[string]any) error {
					// Typed on the server: integers are numbers, not strings.
					days := a["parameters"].(map[string]any)["days"].(map[string]any)
					if d, ok := days["default"].(float64); !ok || d != 3 {
						return fmt.Errorf("days.default on the server = %#v, want the number 3", days["default"])
					}
					return nil
				}),
			},
			{
				// In place: method, path, parameters, body, timeout.
				Config: post("forecast", `jsonencode({ region = "{{params.region}}", limit = "{{params.limit}}" })`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					version(2),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("timeout_ms"), knownvalue.Int64Exact(5000)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("headers"), knownvalue.Null()),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("transformation"), knownvalue.Null()),
					statecheck.ExpectKnownValue(res, param("tags", "default"), knownvalue.StringExact(`["storm"]`)),
				},
			},
			{
				// The same JSON written differently is no change.
				Config: post("forecast", `<<-EOT
    {
      "limit":  "{{params.limit}}",
      "region": "{{params.region}}"
    }
  EOT`),
				PlanOnly: true,
			},
			{
				ResourceName:      res,
				ImportState:       true,
				ImportStateVerify: true,
			},
			{
				ResourceName:    res,
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithID,
			},
			{
				// Renaming replaces.
				Config: post("alerts", `jsonencode({ region = "{{params.region}}" })`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionReplace)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("id"), knownvalue.StringExact("weather/alerts")),
					version(1),
				},
			},
			{
				// Deleted outside Terraform: planned for creation again.
				PreConfig: func() { s.deleteAction(t, "weather", "alerts") },
				Config:    post("alerts", `jsonencode({ region = "{{params.region}}" })`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionCreate)},
				},
			},
			{
				// The connector deleted outside Terraform takes its actions
				// along: both are planned for creation.
				PreConfig: func() { s.deleteConnector(t, "weather") },
				Config:    post("alerts", `jsonencode({ region = "{{params.region}}" })`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(res, plancheck.ResourceActionCreate),
						plancheck.ExpectResourceAction("switchboard_connector.weather", plancheck.ResourceActionCreate),
					},
				},
			},
		},
	})
}

func TestAccActionResource_validation(t *testing.T) {
	s := testAccServer(t)
	step := func(body, want string) resource.TestStep {
		return resource.TestStep{
			Config: s.config(`resource "switchboard_action" "bad" {
  connector = "weather"
  name      = "a"
` + body + "\n}"),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(want),
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			step(`method = "get"`+"\n"+`path = "/x"`, `value must be one of`),
			step(`method = "GET"`+"\n"+`path = "x"`, `must start with /`),
			step(`method = "GET"`+"\n"+`path = "/x?y=1"`, `no query or fragment`),
			step(`method = "GET"`+"\n"+`path = "/x/{{params.id}"`, `unclosed \{\{`),
			step(`method = "GET"`+"\n"+`path = "/x/{{params.id}}"`, `names an undeclared parameter`),
			step(`method = "GET"`+"\n"+`path = "/x/{{params.id}}"`+"\n"+`parameters = { id = { type = "string" } }`, `required must be true`),
			step(`method = "GET"`+"\n"+`path = "/x/{{params.id}}"`+"\n"+`parameters = { id = { type = "object", required = true } }`, `must be string, number, integer or boolean`),
			step(`method = "GET"`+"\n"+`path = "/x"`+"\n"+`parameters = { "1d" = { type = "string" } }`, `must be a letter or underscore`),
			step(`method = "GET"`+"\n"+`path = "/x"`+"\n"+`parameters = { n = { type = "integer", enum = ["a"] } }`, `"a" is not a integer`),
			step(`method = "GET"`+"\n"+`path = "/x"`+"\n"+`parameters = { n = { type = "integer", enum = [1, 2], default = 3 } }`, `not one of the enum values`),
			step(`method = "GET"`+"\n"+`path = "/x"`+"\n"+`parameters = { n = { type = "integer", required = true, default = 3 } }`, `never uses its default`),
			step(`method = "GET"`+"\n"+`path = "/x"`+"\n"+`parameters = { n = { type = "string", in = "body" } }`, `GET requests carry no body`),
			step(`method = "GET"`+"\n"+`path = "/x"`+"\n"+`body = jsonencode({a = 1})`, `GET requests carry no body`),
			step(`method = "POST"`+"\n"+`path = "/x"`+"\n"+`body = jsonencode({a = "{{params.q}}"})`, `names an undeclared parameter`),
			step(`method = "POST"`+"\n"+`path = "/x"`+"\n"+`body = "{not json"`, `(?i)invalid JSON`),
			step(`method = "GET"`+"\n"+`path = "/x"`+"\n"+`headers = { "X-A" = "1", "x-a" = "2" }`, `header names are case-insensitive`),
			step(`method = "GET"`+"\n"+`path = "/x"`+"\n"+`headers = { "Content-Length" = "1" }`, `managed by the HTTP client`),
			step(`method = "GET"`+"\n"+`path = "/x"`+"\n"+`headers = { "X-A" = "{{params.nope}}" }`, `names an undeclared parameter`),
			step(`method = "GET"`+"\n"+`path = "/x"`+"\n"+`transformation = "return {a: };"`, `line 1, column \d+`),
			step(`method = "GET"`+"\n"+`path = "/x"`+"\n"+`timeout_ms = 0`, `must be at least 1`),
		},
	})
}

// checkAction checks an action as the server stores it, read raw.
func (s *testServer) checkAction(connector, name string, fn func(map[string]any) error) resource.TestCheckFunc {
	return func(*terraform.State) error {
		res, err := s.api.GetActionWithResponse(context.Background(), connector, name)
		if err != nil {
			return err
		}
		if res.StatusCode() != http.StatusOK {
			return fmt.Errorf("get action: %d %s", res.StatusCode(), res.Body)
		}
		var a map[string]any
		if err := jsonUnmarshal(res.Body, &a); err != nil {
			return err
		}
		return fn(a)
	}
}

// deleteAction deletes an action behind Terraform's back.
func (s *testServer) deleteAction(t *testing.T, connector, name string) {
	res, err := s.api.DeleteActionWithResponse(context.Background(), connector, name, nil)
	if err != nil || res.StatusCode() != http.StatusNoContent {
		t.Fatalf("delete action %s/%s: %v %s", connector, name, err, res.Body)
	}
}
