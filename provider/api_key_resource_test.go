package provider

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
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

func TestAccAPIKeyResource(t *testing.T) {
	s := testAccServer(t)
	const name = "switchboard_api_key.test"
	cfg := func(scopes, expires string) string {
		return s.config(fmt.Sprintf(`
resource "switchboard_api_key" "test" {
  name       = "ci pipeline"
  scopes     = %s
  expires_at = %q
}
`, scopes, expires))
	}
	newID := statecheck.CompareValue(compare.ValuesDiffer())

	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             s.checkAPIKeysGone,
		Steps: []resource.TestStep{
			{
				// Create; the expiry keeps the offset it was written with.
				Config: cfg(`["invoke"]`, "2099-01-01T02:00:00+02:00"),
				ConfigStateChecks: []statecheck.StateCheck{
					newID.AddStateValue(name, tfjsonpath.New("id")),
					statecheck.ExpectKnownValue(name, tfjsonpath.New("id"), knownvalue.StringRegexp(apiKeyIDPattern)),
					statecheck.ExpectKnownValue(name, tfjsonpath.New("key"), knownvalue.StringRegexp(regexp.MustCompile(`^sb_[A-Za-z0-9_-]{40,}$`))),
					statecheck.ExpectKnownValue(name, tfjsonpath.New("prefix"), knownvalue.StringRegexp(regexp.MustCompile(`^sb_.{4}$`))),
					statecheck.ExpectKnownValue(name, tfjsonpath.New("scopes"), knownvalue.SetExact([]knownvalue.Check{knownvalue.StringExact("invoke")})),
					statecheck.ExpectKnownValue(name, tfjsonpath.New("expires_at"), knownvalue.StringExact("2099-01-01T02:00:00+02:00")),
					statecheck.ExpectSensitiveValue(name, tfjsonpath.New("key")),
				},
				Check: s.checkKeyAuthenticates(name),
			},
			{
				// The same instant in UTC is no change.
				Config:             cfg(`["invoke"]`, "2099-01-01T00:00:00Z"),
				PlanOnly:           true,
				ExpectNonEmptyPlan: false,
			},
			{
				// Any change replaces the key: it is immutable on the server.
				Config: cfg(`["invoke", "llm"]`, "2099-01-01T00:00:00Z"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(name, plancheck.ResourceActionReplace)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					newID.AddStateValue(name, tfjsonpath.New("id")),
					statecheck.ExpectKnownValue(name, tfjsonpath.New("scopes"), knownvalue.SetExact([]knownvalue.Check{
						knownvalue.StringExact("invoke"), knownvalue.StringExact("llm"),
					})),
				},
				Check: s.checkKeyAuthenticates(name),
			},
			{
				// terraform import: the secret cannot come back.
				ResourceName:            name,
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"key"},
			},
			{
				// An import block with the id: no change planned.
				ResourceName:    name,
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithID,
			},
			{
				// Revoked outside Terraform: removed from state, planned for creation.
				PreConfig: func() { s.revokeAPIKeys(t) },
				Config:    cfg(`["invoke", "llm"]`, "2099-01-01T00:00:00Z"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(name, plancheck.ResourceActionCreate)},
				},
				ConfigStateChecks: []statecheck.StateCheck{newID.AddStateValue(name, tfjsonpath.New("id"))},
			},
		},
	})
}

func TestAccAPIKeyResource_validation(t *testing.T) {
	s := testAccServer(t)
	step := func(body, want string) resource.TestStep {
		return resource.TestStep{
			Config:      s.config(`resource "switchboard_api_key" "bad" {` + "\n" + body + "\n}"),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(want),
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			step(`name = "x"`+"\n"+`scopes = ["root"]`, `value must be one of`),
			step(`name = "x"`+"\n"+`scopes = []`, `set must contain at least 1 elements`),
			step(`name = "   "`+"\n"+`scopes = ["llm"]`, `must not be blank`),
			step(`name = "a\tb"`+"\n"+`scopes = ["llm"]`, `must not contain control characters`),
			step(`name = "x"`+"\n"+`scopes = ["llm"]`+"\n"+`expires_at = "tomorrow"`, `RFC ?3339`),
			step(`name = "x"`+"\n"+`scopes = ["llm"]`+"\n"+`expires_at = "2001-01-01T00:00:00Z"`, `must be in the future`),
		},
	})
}

// checkKeyAuthenticates proves the key in state is a working secret: the
// server authenticates it (a 403 for a key without admin is still a
// successful authentication; a wrong key gets 401).
func (s *testServer) checkKeyAuthenticates(name string) resource.TestCheckFunc {
	return func(st *terraform.State) error {
		rs, ok := st.RootModule().Resources[name]
		if !ok {
			return fmt.Errorf("%s not in state", name)
		}
		c, err := newAPIClient(s.URL, rs.Primary.Attributes["key"], "test")
		if err != nil {
			return err
		}
		limit := 1
		res, err := c.ListAPIKeysWithResponse(context.Background(), &client.ListAPIKeysParams{Limit: &limit})
		if err != nil {
			return err
		}
		if res.StatusCode() != http.StatusForbidden {
			return fmt.Errorf("the created key got %d, want 403 (authenticated, not admin): %s", res.StatusCode(), res.Body)
		}
		return nil
	}
}

// testKeys lists every key but the test server's admin key.
func (s *testServer) testKeys() ([]client.APIKey, error) {
	res, err := s.api.ListAPIKeysWithResponse(context.Background(), &client.ListAPIKeysParams{})
	if err != nil {
		return nil, err
	}
	if res.JSON200 == nil {
		return nil, fmt.Errorf("list API keys: %d %s", res.StatusCode(), res.Body)
	}
	var out []client.APIKey
	for _, k := range res.JSON200.Data {
		if k.Name != "test-admin" {
			out = append(out, k)
		}
	}
	return out, nil
}

// revokeAPIKeys revokes every key Terraform made, behind its back.
func (s *testServer) revokeAPIKeys(t *testing.T) {
	keys, err := s.testKeys()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		res, err := s.api.DeleteAPIKeyWithResponse(context.Background(), k.Id)
		if err != nil || res.StatusCode() != http.StatusNoContent {
			t.Fatal("revoke ", k.Id, err)
		}
	}
}

// checkAPIKeysGone is the CheckDestroy of API keys.
func (s *testServer) checkAPIKeysGone(*terraform.State) error {
	keys, err := s.testKeys()
	if err == nil && len(keys) > 0 {
		err = fmt.Errorf("%d API keys left after destroy", len(keys))
	}
	return err
}
