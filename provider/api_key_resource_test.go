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
	policy := func(p, want string) resource.TestStep {
		return step(`name = "x"`+"\n"+`scopes = ["llm"]`+"\n"+p, want)
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
			policy(`budget = { usd = 0, period = "month" }`, `must be more than 0`),
			policy(`budget = { usd = -1, period = "month" }`, `must be more than 0`),
			policy(`budget = { usd = 10, period = "year" }`, `value must be one of`),
			policy(`budget = { usd = 10, period = "day", alert_at = [0.8, 0.5] }`, `strictly ascending`),
			policy(`budget = { usd = 10, period = "day", alert_at = [0.5, 1] }`, `between 0 and 1 exclusive`),
			policy(`budget = { usd = 10, period = "day", alert_at = [0] }`, `between 0 and 1 exclusive`),
			policy(`budget = { usd = 10, period = "day", alert_at = [] }`, `list must contain at least 1`),
			policy(`budget = { period = "day" }`, `Incorrect attribute value type|attribute "usd" is required`),
			policy(`models = []`, `set must contain at least 1`),
			policy(`models = ["open ai/*"]`, `must not contain spaces`),
			policy(`models = ["**"]`, `must name more than wildcards`),
			policy(`connectors = []`, `set must contain at least 1`),
			policy(`connectors = ["GitHub"]`, `connector.action pair`),
			policy(`connectors = ["github.list.issues"]`, `connector.action pair`),
			policy(`rate_limit = {}`, `set at least\s+one`),
			policy(`rate_limit = { requests_per_minute = 0 }`, `between 1 and`),
			policy(`bound_connection = "User 42"`, `lower-case letter or digit`),
			policy(`bound_connection = ""`, `lower-case letter or digit`),
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

// TestAccAPIKeyResource_inPlace changes the name and each part of the
// policy in turn: each is an in-place update (the id and the secret stay
// the same, and the original secret still authenticates), the server holds
// the new value, and the next plan is empty. Changing the scopes replaces
// the key.
func TestAccAPIKeyResource_inPlace(t *testing.T) {
	s := testAccServer(t)
	const name = "switchboard_api_key.test"
	cfg := func(keyName, scopes, policy string) string {
		return s.config(fmt.Sprintf(`
resource "switchboard_api_key" "test" {
  name   = %q
  scopes = %s
%s
}
`, keyName, scopes, policy))
	}
	sameID := statecheck.CompareValue(compare.ValuesSame())
	sameKey := statecheck.CompareValue(compare.ValuesSame())
	var original string // the secret created in the first step
	keep := func(k client.APIKey) error { return nil }
	inPlace := func(keyName, policy string, server func(client.APIKey) error, state ...statecheck.StateCheck) resource.TestStep {
		return resource.TestStep{
			Config: cfg(keyName, `["llm"]`, policy),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(name, plancheck.ResourceActionUpdate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: append(state,
				sameID.AddStateValue(name, tfjsonpath.New("id")),
				sameKey.AddStateValue(name, tfjsonpath.New("key")),
			),
			Check: resource.ComposeTestCheckFunc(
				s.checkSecretAuthenticates(&original),
				s.checkServerKey(name, server),
			),
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             s.checkAPIKeysGone,
		Steps: []resource.TestStep{
			{
				Config: cfg("app", `["llm"]`, ""),
				ConfigStateChecks: []statecheck.StateCheck{
					sameID.AddStateValue(name, tfjsonpath.New("id")),
					sameKey.AddStateValue(name, tfjsonpath.New("key")),
					statecheck.ExpectKnownValue(name, tfjsonpath.New("version"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(name, tfjsonpath.New("models"), knownvalue.Null()),
					statecheck.ExpectKnownValue(name, tfjsonpath.New("budget"), knownvalue.Null()),
				},
				Check: func(st *terraform.State) error {
					original = st.RootModule().Resources[name].Primary.Attributes["key"]
					return s.checkSecretAuthenticates(&original)(st)
				},
			},
			inPlace("app renamed", "", func(k client.APIKey) error {
				return want("name", k.Name, "app renamed")
			}, statecheck.ExpectKnownValue(name, tfjsonpath.New("version"), knownvalue.Int64Exact(2))),
			inPlace("app renamed", `rate_limit = { requests_per_minute = 120 }`, func(k client.APIKey) error {
				if k.RateLimit == nil || k.RateLimit.RequestsPerMinute == nil {
					return fmt.Errorf("rateLimit on the server: %+v", k.RateLimit)
				}
				return want("rateLimit.requestsPerMinute", *k.RateLimit.RequestsPerMinute, 120)
			}),
			inPlace("app renamed", `rate_limit = { requests_per_minute = 60, tokens_per_minute = 10000 }`, func(k client.APIKey) error {
				return want("rateLimit.tokensPerMinute", fmt.Sprint(k.RateLimit.TokensPerMinute != nil && *k.RateLimit.TokensPerMinute == 10000), "true")
			}),
			inPlace("app renamed", `models = ["local/*", "acme/chat-large"]`, func(k client.APIKey) error {
				return want("models", fmt.Sprint(k.Models != nil && len(*k.Models) == 2), "true")
			}, statecheck.ExpectKnownValue(name, tfjsonpath.New("models"), knownvalue.SetExact([]knownvalue.Check{
				knownvalue.StringExact("local/*"), knownvalue.StringExact("acme/chat-large"),
			}))),
			inPlace("app renamed", `connectors = ["github", "weather.forecast"]`, func(k client.APIKey) error {
				if k.Models != nil {
					return fmt.Errorf("models still on the server after removal: %v", *k.Models)
				}
				return want("connectors", fmt.Sprint(k.Connectors != nil && len(*k.Connectors) == 2), "true")
			}),
			inPlace("app renamed", `budget = { usd = 25, period = "month" }`, func(k client.APIKey) error {
				if k.Budget == nil {
					return fmt.Errorf("no budget on the server")
				}
				return want("budget", fmt.Sprintf("%v %v", k.Budget.Usd, k.Budget.Period), "25 month")
			}),
			inPlace("app renamed", `budget = { usd = 12.5, period = "day", alert_at = [0.5, 0.8] }`, func(k client.APIKey) error {
				if k.Budget == nil || k.Budget.AlertAt == nil {
					return fmt.Errorf("budget on the server: %+v", k.Budget)
				}
				return want("budget", fmt.Sprintf("%v %v %v", k.Budget.Usd, k.Budget.Period, *k.Budget.AlertAt), "12.5 day [0.5 0.8]")
			}, statecheck.ExpectKnownValue(name, tfjsonpath.New("budget"), knownvalue.ObjectExact(map[string]knownvalue.Check{
				"usd": knownvalue.Float64Exact(12.5), "period": knownvalue.StringExact("day"),
				"alert_at": knownvalue.ListExact([]knownvalue.Check{knownvalue.Float64Exact(0.5), knownvalue.Float64Exact(0.8)}),
			}))),
			{
				// import reads the whole policy back.
				ResourceName:            name,
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"key"},
			},
			inPlace("app renamed", "", func(k client.APIKey) error {
				if k.Budget != nil || k.Connectors != nil || k.RateLimit != nil {
					return fmt.Errorf("policy left on the server: %+v %v %+v", k.Budget, k.Connectors, k.RateLimit)
				}
				return nil
			}),
			inPlace("app renamed", `models = ["local/*"]`, keep),
			{
				// The scopes cannot change on the server: a new key.
				Config: cfg("app renamed", `["llm", "invoke"]`, `models = ["local/*"]`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(name, plancheck.ResourceActionReplace)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: resource.ComposeTestCheckFunc(
					s.checkKeyAuthenticates(name),
					func(*terraform.State) error {
						if err := s.checkSecretAuthenticates(&original)(nil); err == nil {
							return fmt.Errorf("the replaced key's secret still authenticates")
						}
						return nil
					},
				),
			},
		},
	})
}

// want compares a value the server holds with the expected one.
func want[T comparable](field string, got, want T) error {
	if got != want {
		return fmt.Errorf("server %s = %v, want %v", field, got, want)
	}
	return nil
}

// checkSecretAuthenticates checks that *secret (read when the check runs)
// is a valid, non-admin API key of the server.
func (s *testServer) checkSecretAuthenticates(secret *string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		if *secret == "" {
			return fmt.Errorf("no secret recorded")
		}
		c, err := newAPIClient(s.URL, *secret, "test")
		if err != nil {
			return err
		}
		limit := 1
		res, err := c.ListAPIKeysWithResponse(context.Background(), &client.ListAPIKeysParams{Limit: &limit})
		if err != nil {
			return err
		}
		if res.StatusCode() != http.StatusForbidden {
			return fmt.Errorf("the original secret got %d, want 403 (authenticated, not admin): %s", res.StatusCode(), res.Body)
		}
		return nil
	}
}

// checkServerKey runs check on the server's view of the key in state.
func (s *testServer) checkServerKey(name string, check func(client.APIKey) error) resource.TestCheckFunc {
	return func(st *terraform.State) error {
		rs, ok := st.RootModule().Resources[name]
		if !ok {
			return fmt.Errorf("%s not in state", name)
		}
		res, err := s.api.GetAPIKeyWithResponse(context.Background(), rs.Primary.ID)
		if err != nil {
			return err
		}
		if res.JSON200 == nil {
			return fmt.Errorf("get %s: %d %s", rs.Primary.ID, res.StatusCode(), res.Body)
		}
		return check(*res.JSON200)
	}
}
