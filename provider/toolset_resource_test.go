package provider

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
)

// TestAccToolsetResource: create, update in place, an outside change
// between plan and apply refused (If-Match), import, rename (replace),
// deleted outside Terraform (created again).
func TestAccToolsetResource(t *testing.T) {
	s := testAccServer(t)
	const res = "switchboard_toolset.test"
	cfg := func(name, description string, tools ...string) string {
		d := ""
		if description != "" {
			d = fmt.Sprintf("description = %q", description)
		}
		return s.config(fmt.Sprintf(`
resource "switchboard_toolset" "test" {
  name  = %q
  %s
  tools = ["%s"]
}
`, name, d, strings.Join(tools, `", "`)))
	}
	version := func(v int64) statecheck.StateCheck {
		return statecheck.ExpectKnownValue(res, tfjsonpath.New("version"), knownvalue.Int64Exact(v))
	}
	tools := func(entries ...string) statecheck.StateCheck {
		var checks []knownvalue.Check
		for _, e := range entries {
			checks = append(checks, knownvalue.StringExact(e))
		}
		return statecheck.ExpectKnownValue(res, tfjsonpath.New("tools"), knownvalue.ListExact(checks))
	}
	createdAt := statecheck.CompareValue(compare.ValuesSame())

	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             s.checkToolsetsGone,
		Steps: []resource.TestStep{
			{
				Config: cfg("support", "Support agent", "weather.forecast", "crm.*"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("id"), knownvalue.StringExact("support")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("description"), knownvalue.StringExact("Support agent")),
					tools("weather.forecast", "crm.*"),
					version(1),
					createdAt.AddStateValue(res, tfjsonpath.New("created_at")),
				},
				Check: s.checkServerToolset("support", "weather.forecast", "crm.*"),
			},
			{
				// In place: the tools (order kept) and the description change.
				Config: cfg("support", "", "crm", "weather.forecast", "zendesk.list_tickets"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("description"), knownvalue.Null()),
					tools("crm", "weather.forecast", "zendesk.list_tickets"),
					version(2),
					createdAt.AddStateValue(res, tfjsonpath.New("created_at")),
				},
				Check: s.checkServerToolset("support", "crm", "weather.forecast", "zendesk.list_tickets"),
			},
			{
				// Changed outside Terraform between plan and apply: the apply
				// is refused (If-Match) instead of overwriting the change.
				Config: cfg("support", "", "crm"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{outsideChange(func() error { return s.touchToolset("support") })},
				},
				ExpectError: regexp.MustCompile(`(?s)412 precondition_failed.*changed outside Terraform`),
			},
			{
				// Drift: the next plan shows the outside change and applies over it.
				Config: cfg("support", "", "crm"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate)},
				},
				ConfigStateChecks: []statecheck.StateCheck{version(4), tools("crm")},
				Check:             s.checkServerToolset("support", "crm"),
			},
			{
				ResourceName:      res,
				ImportState:       true,
				ImportStateVerify: true,
			},
			{
				// Renaming replaces.
				Config: cfg("support_v2", "", "crm"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionReplace)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("id"), knownvalue.StringExact("support_v2")),
					version(1),
				},
				Check: func(*terraform.State) error {
					if _, ok := s.getToolset("support"); ok {
						return fmt.Errorf("the old toolset still exists")
					}
					return nil
				},
			},
			{
				// Deleted outside Terraform: planned for creation again.
				PreConfig: func() { s.deleteToolset(t, "support_v2") },
				Config:    cfg("support_v2", "", "crm"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionCreate)},
				},
				Check: s.checkServerToolset("support_v2", "crm"),
			},
		},
	})
}

func TestAccToolsetResource_validation(t *testing.T) {
	s := testAccServer(t)
	step := func(body, want string) resource.TestStep {
		return resource.TestStep{
			Config:      s.config("resource \"switchboard_toolset\" \"bad\" {\n" + body + "\n}"),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(want),
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			step(`name = "Support"`+"\n"+`tools = ["crm"]`, `lower-case letter`),
			step(`name = "my-tools"`+"\n"+`tools = ["crm"]`, `lower-case letter`),
			step(`name = "s"`+"\n"+`tools = []`, `list must contain at least 1 elements`),
			step(`name = "s"`+"\n"+`tools = ["crm", "crm/contacts"]`, `(?s)tools\[1\].*connector.action, connector.\* or connector`),
			step(`name = "s"`+"\n"+`tools = ["crm.create_*"]`, `connector.action, connector.\* or connector`),
			step(`name = "s"`+"\n"+`tools = ["a.b.c"]`, `connector.action, connector.\* or connector`),
			step(`name = "s"`+"\n"+`tools = ["crm", "crm"]`, `duplicate values`),
			step(`name = "s"`+"\n"+`tools = ["crm"]`+"\n"+`description = ""`, `count must be between 1 and 4096`),
			step(`name = "s"`, `The argument "tools" is required`),
		},
	})
}

// TestAccAPIKeyResource_connection: a key's bound connection is created,
// changed in place (same key), imported, its drift repaired, and removed.
// (Invalid names: TestAccAPIKeyResource_validation.)
func TestAccAPIKeyResource_connection(t *testing.T) {
	s := testAccServer(t)
	const name = "switchboard_api_key.test"
	cfg := func(connection string) string {
		c := ""
		if connection != "" {
			c = fmt.Sprintf("bound_connection = %q", connection)
		}
		return s.config(fmt.Sprintf(`
resource "switchboard_api_key" "test" {
  name   = "end user"
  scopes = ["invoke"]
  %s
}
`, c))
	}
	sameID := statecheck.CompareValue(compare.ValuesSame())
	connection := func(conn string) resource.TestCheckFunc {
		return s.checkServerKey(name, func(k client.APIKey) error {
			got := ""
			if k.Connection != nil {
				got = *k.Connection
			}
			return want("connection", got, conn)
		})
	}
	inPlace := func(conn string, state knownvalue.Check) resource.TestStep {
		return resource.TestStep{
			Config: cfg(conn),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(name, plancheck.ResourceActionUpdate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				sameID.AddStateValue(name, tfjsonpath.New("id")),
				statecheck.ExpectKnownValue(name, tfjsonpath.New("bound_connection"), state),
			},
			Check: connection(conn),
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             s.checkAPIKeysGone,
		Steps: []resource.TestStep{
			{
				Config: cfg("user_42"),
				ConfigStateChecks: []statecheck.StateCheck{
					sameID.AddStateValue(name, tfjsonpath.New("id")),
					statecheck.ExpectKnownValue(name, tfjsonpath.New("bound_connection"), knownvalue.StringExact("user_42")),
				},
				Check: connection("user_42"),
			},
			inPlace("user-43", knownvalue.StringExact("user-43")),
			{
				ResourceName:            name,
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"key"},
			},
			{
				// Drift: changed outside Terraform, set back by the next apply.
				PreConfig: func() { s.bindKey(t, name, "someone-else") },
				Config:    cfg("user-43"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(name, plancheck.ResourceActionUpdate)},
				},
				ConfigStateChecks: []statecheck.StateCheck{sameID.AddStateValue(name, tfjsonpath.New("id"))},
				Check:             connection("user-43"),
			},
			inPlace("", knownvalue.Null()),
		},
	})
}

// bindKey sets the bound connection of the key at addr behind Terraform's
// back (the keys of these tests have no policy to keep).
func (s *testServer) bindKey(t *testing.T, addr, connection string) {
	t.Helper()
	var id string
	keys, err := s.testKeys()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Name == "end user" {
			id = k.Id
		}
	}
	res, err := s.api.UpdateAPIKeyWithResponse(context.Background(), id, nil, client.APIKeyUpdate{Name: "end user", Connection: &connection})
	if err != nil || res.JSON200 == nil {
		t.Fatalf("bind key %s (%s): %v %s", addr, id, err, res.Body)
	}
}

// getToolset reads a toolset behind Terraform's back.
func (s *testServer) getToolset(name string) (*client.Toolset, bool) {
	res, err := s.api.GetToolsetWithResponse(context.Background(), name)
	if err != nil || res.JSON200 == nil {
		return nil, false
	}
	return res.JSON200, true
}

// deleteToolset deletes a toolset behind Terraform's back.
func (s *testServer) deleteToolset(t *testing.T, name string) {
	res, err := s.api.DeleteToolsetWithResponse(context.Background(), name, nil)
	if err != nil || res.StatusCode() != http.StatusNoContent {
		t.Fatalf("delete toolset %s: %v %s", name, err, res.Body)
	}
}

// touchToolset changes a toolset's description behind Terraform's back.
func (s *testServer) touchToolset(name string) error {
	ts, ok := s.getToolset(name)
	if !ok {
		return fmt.Errorf("toolset %s not found", name)
	}
	d := "changed outside Terraform"
	res, err := s.api.ReplaceToolsetWithResponse(context.Background(), name, nil, client.ToolsetInput{Description: &d, Tools: ts.Tools})
	if err != nil {
		return err
	}
	if res.JSON200 == nil {
		return fmt.Errorf("replace toolset %s: %d %s", name, res.StatusCode(), res.Body)
	}
	return nil
}

// checkServerToolset checks the tools the server holds for a toolset.
func (s *testServer) checkServerToolset(name string, tools ...string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ts, ok := s.getToolset(name)
		if !ok {
			return fmt.Errorf("toolset %s not found", name)
		}
		if !slices.Equal(ts.Tools, tools) {
			return fmt.Errorf("server toolset %s has tools %v, want %v", name, ts.Tools, tools)
		}
		return nil
	}
}

// checkToolsetsGone is the CheckDestroy of toolsets.
func (s *testServer) checkToolsetsGone(*terraform.State) error {
	res, err := s.api.ListToolsetsWithResponse(context.Background(), nil)
	if err != nil {
		return err
	}
	if res.JSON200 == nil {
		return fmt.Errorf("list toolsets: %d %s", res.StatusCode(), res.Body)
	}
	if n := len(res.JSON200.Data); n > 0 {
		return fmt.Errorf("%d toolsets left after destroy", n)
	}
	return nil
}
