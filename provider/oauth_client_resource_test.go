package provider

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
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

// TestAccOAuthClientResource creates a client, changes its name and policy
// in place (the id and the secret stay the same, the original secret still
// gets tokens, the next plan is empty), replaces it on a scope change,
// imports it, and recreates it when deleted outside Terraform.
func TestAccOAuthClientResource(t *testing.T) {
	s := testAccServer(t)
	const name = "switchboard_oauth_client.test"
	cfg := func(clientName, scopes, policy string) string {
		return s.config(fmt.Sprintf(`
resource "switchboard_oauth_client" "test" {
  name   = %q
  scopes = %s
%s
}
`, clientName, scopes, policy))
	}
	sameID := statecheck.CompareValue(compare.ValuesSame())
	sameSecret := statecheck.CompareValue(compare.ValuesSame())
	newID := statecheck.CompareValue(compare.ValuesDiffer())
	var id, secret string // of the first client
	inPlace := func(clientName, policy string, state ...statecheck.StateCheck) resource.TestStep {
		return resource.TestStep{
			Config: cfg(clientName, `["llm"]`, policy),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(name, plancheck.ResourceActionUpdate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: append(state,
				sameID.AddStateValue(name, tfjsonpath.New("id")),
				sameSecret.AddStateValue(name, tfjsonpath.New("client_secret")),
			),
			Check: s.checkClientGetsToken(&id, &secret, true),
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             s.checkOAuthClientsGone,
		Steps: []resource.TestStep{
			{
				Config: cfg("reporting", `["llm"]`, `models = ["local/*"]`),
				ConfigStateChecks: []statecheck.StateCheck{
					sameID.AddStateValue(name, tfjsonpath.New("id")),
					sameSecret.AddStateValue(name, tfjsonpath.New("client_secret")),
					newID.AddStateValue(name, tfjsonpath.New("id")),
					statecheck.ExpectKnownValue(name, tfjsonpath.New("id"), knownvalue.StringRegexp(oauthClientIDPattern)),
					statecheck.CompareValuePairs(name, tfjsonpath.New("id"), name, tfjsonpath.New("client_id"), compare.ValuesSame()),
					statecheck.ExpectKnownValue(name, tfjsonpath.New("client_secret"), knownvalue.StringRegexp(regexp.MustCompile(`^sbcs_`))),
					statecheck.ExpectSensitiveValue(name, tfjsonpath.New("client_secret")),
					statecheck.ExpectKnownValue(name, tfjsonpath.New("version"), knownvalue.Int64Exact(1)),
				},
				Check: func(st *terraform.State) error {
					a := st.RootModule().Resources[name].Primary.Attributes
					id, secret = a["client_id"], a["client_secret"]
					return s.checkClientGetsToken(&id, &secret, true)(st)
				},
			},
			inPlace("reporting job", `models = ["local/*"]`,
				statecheck.ExpectKnownValue(name, tfjsonpath.New("name"), knownvalue.StringExact("reporting job")),
				statecheck.ExpectKnownValue(name, tfjsonpath.New("version"), knownvalue.Int64Exact(2))),
			inPlace("reporting job", `
  models     = ["local/*", "acme/*"]
  connectors = ["github.list_issues"]
  rate_limit = { tokens_per_minute = 5000 }
  budget     = { usd = 5, period = "week", alert_at = [0.9] }
`, statecheck.ExpectKnownValue(name, tfjsonpath.New("budget").AtMapKey("period"), knownvalue.StringExact("week")),
				statecheck.ExpectKnownValue(name, tfjsonpath.New("rate_limit").AtMapKey("tokens_per_minute"), knownvalue.Int64Exact(5000))),
			inPlace("reporting job", "",
				statecheck.ExpectKnownValue(name, tfjsonpath.New("models"), knownvalue.Null()),
				statecheck.ExpectKnownValue(name, tfjsonpath.New("budget"), knownvalue.Null())),
			{
				// terraform import: the secret cannot come back.
				ResourceName:            name,
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"client_secret"},
			},
			{
				// An import block with the id: no change planned.
				ResourceName:    name,
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithID,
			},
			{
				// The scopes cannot change on the server: a new client; the
				// old secret gets no token any more.
				Config: cfg("reporting job", `["llm", "invoke"]`, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(name, plancheck.ResourceActionReplace)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{newID.AddStateValue(name, tfjsonpath.New("id"))},
				Check:             s.checkClientGetsToken(&id, &secret, false),
			},
			{
				// Deleted outside Terraform: removed from state, planned for creation.
				PreConfig: func() { s.deleteOAuthClients(t) },
				Config:    cfg("reporting job", `["llm", "invoke"]`, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(name, plancheck.ResourceActionCreate)},
				},
				ConfigStateChecks: []statecheck.StateCheck{newID.AddStateValue(name, tfjsonpath.New("id"))},
			},
		},
	})
}

func TestAccOAuthClientResource_validation(t *testing.T) {
	s := testAccServer(t)
	step := func(body, want string) resource.TestStep {
		return resource.TestStep{
			Config:      s.config(`resource "switchboard_oauth_client" "bad" {` + "\n" + body + "\n}"),
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
			step(`name = "x"`+"\n"+`scopes = ["llm"]`+"\n"+`budget = { usd = 0, period = "day" }`, `must be more than 0`),
			step(`name = "x"`+"\n"+`scopes = ["llm"]`+"\n"+`models = []`, `set must contain at least 1`),
			{
				ResourceName:  "switchboard_oauth_client.bad",
				Config:        s.config(`resource "switchboard_oauth_client" "bad" {` + "\n" + `name = "x"` + "\n" + `scopes = ["llm"]` + "\n}"),
				ImportState:   true,
				ImportStateId: "sbcs_secret",
				ExpectError:   regexp.MustCompile(`imported by its client_id`),
			},
		},
	})
}

// checkClientGetsToken checks whether the client *id with the secret
// *secret (read when the check runs) gets an access token.
func (s *testServer) checkClientGetsToken(id, secret *string, want bool) resource.TestCheckFunc {
	return func(*terraform.State) error {
		form := url.Values{"grant_type": {"client_credentials"}, "client_id": {*id}, "client_secret": {*secret}}
		res, err := http.Post(s.URL+"/v1/oauth/token", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
		if err != nil {
			return err
		}
		res.Body.Close()
		if got := res.StatusCode == http.StatusOK; got != want {
			return fmt.Errorf("client %s: token endpoint answered %d, want a token: %v", *id, res.StatusCode, want)
		}
		return nil
	}
}

// testOAuthClients lists every OAuth client.
func (s *testServer) testOAuthClients() ([]client.OAuthClient, error) {
	res, err := s.api.ListOAuthClientsWithResponse(context.Background(), &client.ListOAuthClientsParams{})
	if err != nil {
		return nil, err
	}
	if res.JSON200 == nil {
		return nil, fmt.Errorf("list OAuth clients: %d %s", res.StatusCode(), res.Body)
	}
	return res.JSON200.Data, nil
}

// deleteOAuthClients deletes every client Terraform made, behind its back.
func (s *testServer) deleteOAuthClients(t *testing.T) {
	cs, err := s.testOAuthClients()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		res, err := s.api.DeleteOAuthClientWithResponse(context.Background(), c.Id)
		if err != nil || res.StatusCode() != http.StatusNoContent {
			t.Fatal("delete ", c.Id, err)
		}
	}
}

// checkOAuthClientsGone is the CheckDestroy of OAuth clients.
func (s *testServer) checkOAuthClientsGone(*terraform.State) error {
	cs, err := s.testOAuthClients()
	if err == nil && len(cs) > 0 {
		err = fmt.Errorf("%d OAuth clients left after destroy", len(cs))
	}
	return err
}
