package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
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
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
)

func TestAccConnectorResource(t *testing.T) {
	s := testAccServer(t)
	const res = "switchboard_connector.test"
	apiKeyAuth := `
  auth = {
    type = "apiKey"
    name = "X-API-Key"
    in   = "header"
  }`
	oauth := func(secret string, version int) string {
		return fmt.Sprintf(`
  auth = {
    type                     = "oauth2"
    grant                    = "client_credentials"
    token_url                = "https://auth.example.com/oauth/token"
    client_id                = "switchboard"
    scopes                   = ["read", "write"]
    client_secret_wo         = %q
    client_secret_wo_version = %d
  }`, secret, version)
	}
	cfg := func(name, description, auth string) string {
		return s.config(fmt.Sprintf(`
resource "switchboard_connector" "test" {
  name         = %q
  display_name = "Weather"
  description  = %q
  base_url     = "https://api.weather.example/v1"
%s
}
`, name, description, auth))
	}
	version := func(v int64) statecheck.StateCheck {
		return statecheck.ExpectKnownValue(res, tfjsonpath.New("version"), knownvalue.Int64Exact(v))
	}
	secretNull := statecheck.ExpectKnownValue(res, tfjsonpath.New("auth").AtMapKey("client_secret_wo"), knownvalue.Null())
	createdAt := statecheck.CompareValue(compare.ValuesSame())

	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             s.checkConnectorsGone,
		Steps: []resource.TestStep{
			{
				Config: cfg("weather", "Forecasts", apiKeyAuth),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("id"), knownvalue.StringExact("weather")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("auth").AtMapKey("in"), knownvalue.StringExact("header")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("auth").AtMapKey("grant"), knownvalue.Null()),
					version(1),
					createdAt.AddStateValue(res, tfjsonpath.New("created_at")),
				},
			},
			{
				// In place: description and auth change; the client secret
				// reaches the server's vault and stays out of the state.
				Config: cfg("weather", "Forecasts and alerts", oauth("s3cret-one", 1)),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					version(2), secretNull,
					createdAt.AddStateValue(res, tfjsonpath.New("created_at")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("auth").AtMapKey("client_secret_wo_version"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("auth").AtMapKey("scopes"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("read"), knownvalue.StringExact("write")})),
				},
				Check: resource.ComposeTestCheckFunc(
					func(*terraform.State) error {
						return s.checkSecret(t, connectors.ClientSecretRef("weather"), "s3cret-one")()
					},
					s.checkClientSecretSet("weather"),
					checkNoSecretInState("s3cret-one"),
				),
			},
			{
				// A new secret without a new version is invisible to Terraform.
				Config:   cfg("weather", "Forecasts and alerts", oauth("s3cret-two", 1)),
				PlanOnly: true,
			},
			{
				// A new version sends the new secret.
				Config:            cfg("weather", "Forecasts and alerts", oauth("s3cret-two", 2)),
				ConfigStateChecks: []statecheck.StateCheck{version(3), secretNull},
				Check: resource.ComposeTestCheckFunc(
					func(*terraform.State) error {
						return s.checkSecret(t, connectors.ClientSecretRef("weather"), "s3cret-two")()
					},
					checkNoSecretInState("s3cret-one", "s3cret-two"),
				),
			},
			{
				// Changed outside Terraform between plan and apply: the apply
				// is refused (If-Match) instead of overwriting the change.
				Config: cfg("weather", "Only alerts", oauth("s3cret-two", 2)),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{outsideChange(func() error { return s.touchConnector("weather") })},
				},
				ExpectError: regexp.MustCompile(`(?s)412 precondition_failed.*changed outside Terraform`),
			},
			{
				// The next plan shows the outside change and applies over it.
				Config:            cfg("weather", "Only alerts", oauth("s3cret-two", 2)),
				ConfigStateChecks: []statecheck.StateCheck{version(5)},
			},
			{
				ResourceName:            res,
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"auth.client_secret_wo_version"},
			},
			{
				// Renaming replaces.
				Config: cfg("weather_v2", "Only alerts", apiKeyAuth),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionReplace)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("id"), knownvalue.StringExact("weather_v2")),
					version(1),
				},
				Check: func(*terraform.State) error {
					if _, ok := s.getConnector("weather"); ok {
						return fmt.Errorf("the old connector still exists")
					}
					return nil
				},
			},
			{
				// Deleted outside Terraform: planned for creation again.
				PreConfig: func() { s.deleteConnector(t, "weather_v2") },
				Config:    cfg("weather_v2", "Only alerts", apiKeyAuth),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionCreate)},
				},
			},
			{
				// No auth at all is type none on the server and null here.
				Config: s.config(`
resource "switchboard_connector" "test" {
  name     = "weather_v2"
  base_url = "https://api.weather.example/v1"
}
`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("auth"), knownvalue.Null()),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("display_name"), knownvalue.Null()),
				},
			},
		},
	})
}

func TestAccConnectorResource_validation(t *testing.T) {
	s := testAccServer(t)
	step := func(body, want string) resource.TestStep {
		return resource.TestStep{
			Config:      s.config("resource \"switchboard_connector\" \"bad\" {\n" + body + "\n}"),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(want),
		}
	}
	const url = `base_url = "https://api.example.com"`
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			step(`name = "Weather"`+"\n"+url, `lower-case letter`),
			step(`name = "w"`+"\n"+`base_url = "ftp://example.com"`, `absolute http:// or https:// URL`),
			step(`name = "w"`+"\n"+`base_url = "https://example.com/?a=1"`, `must not have a query`),
			step(`name = "w"`+"\n"+`base_url = "https://user:pw@example.com"`, `must not carry credentials`),
			step(`name = "w"`+"\n"+url+"\n"+`auth = { type = "digest" }`, `value must be one of`),
			step(`name = "w"`+"\n"+url+"\n"+`auth = { type = "apiKey" }`, `name is required for apiKey`),
			step(`name = "w"`+"\n"+url+"\n"+`auth = { type = "apiKey"`+"\n"+`name = "X Key"`+"\n"+`in = "header" }`, `must not contain spaces`),
			step(`name = "w"`+"\n"+url+"\n"+`auth = { type = "apiKey"`+"\n"+`name = "Host"`+"\n"+`in = "header" }`, `managed by the HTTP client`),
			step(`name = "w"`+"\n"+url+"\n"+`auth = { type = "bearer"`+"\n"+`token_url = "https://a.example.com" }`, `applies only to auth type oauth2`),
			step(`name = "w"`+"\n"+url+"\n"+`auth = { type = "oauth2"`+"\n"+`grant = "client_credentials"`+"\n"+
				`token_url = "https://a.example.com"`+"\n"+`client_id = "c" }`, `client_secret_wo is required`),
			step(`name = "w"`+"\n"+url+"\n"+`auth = { type = "oauth2"`+"\n"+`grant = "authorization_code"`+"\n"+
				`token_url = "https://a.example.com"`+"\n"+`client_id = "c" }`, `authorization_url is required`),
			step(`name = "w"`+"\n"+url+"\n"+`auth = { type = "oauth2"`+"\n"+`grant = "implicit" }`, `value must be one of`),
			step(`name = "w"`+"\n"+url+"\n"+`auth = { type = "oauth2"`+"\n"+`grant = "client_credentials"`+"\n"+
				`token_url = "https://a.example.com"`+"\n"+`client_id = "c"`+"\n"+`client_secret_wo = "x"`+"\n"+`scopes = ["a b"] }`, `must not contain spaces`),
			step(`name = "w"`+"\n"+url+"\n"+`display_name = ""`, `count must be between 1 and 128`),
		},
	})
}

// getConnector reads a connector behind Terraform's back.
func (s *testServer) getConnector(name string) (*client.Connector, bool) {
	res, err := s.api.GetConnectorWithResponse(context.Background(), name)
	if err != nil || res.JSON200 == nil {
		return nil, false
	}
	return res.JSON200, true
}

// deleteConnector deletes a connector behind Terraform's back.
func (s *testServer) deleteConnector(t *testing.T, name string) {
	res, err := s.api.DeleteConnectorWithResponse(context.Background(), name, nil)
	if err != nil || res.StatusCode() != http.StatusNoContent {
		t.Fatalf("delete connector %s: %v %s", name, err, res.Body)
	}
}

// touchConnector changes a connector's description behind Terraform's back.
func (s *testServer) touchConnector(name string) error {
	c, ok := s.getConnector(name)
	if !ok {
		return fmt.Errorf("connector %s not found", name)
	}
	d := "changed outside Terraform"
	auth := c.Auth
	auth.ClientSecretSet = nil
	res, err := s.api.ReplaceConnectorWithResponse(context.Background(), name, nil, client.ConnectorInput{
		BaseUrl: c.BaseUrl, DisplayName: c.DisplayName, Description: &d, Auth: auth,
	})
	if err != nil {
		return err
	}
	if res.JSON200 == nil {
		return fmt.Errorf("replace connector %s: %d %s", name, res.StatusCode(), res.Body)
	}
	return nil
}

// checkClientSecretSet checks that the API reports a stored client secret.
func (s *testServer) checkClientSecretSet(name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		c, ok := s.getConnector(name)
		if !ok {
			return fmt.Errorf("connector %s not found", name)
		}
		if c.Auth.ClientSecretSet == nil || !*c.Auth.ClientSecretSet {
			return fmt.Errorf("connector %s: clientSecretSet is not true", name)
		}
		return nil
	}
}

// checkConnectorsGone is the CheckDestroy of connectors.
func (s *testServer) checkConnectorsGone(*terraform.State) error {
	res, err := s.api.ListConnectorsWithResponse(context.Background(), nil)
	if err != nil {
		return err
	}
	if res.JSON200 == nil {
		return fmt.Errorf("list connectors: %d %s", res.StatusCode(), res.Body)
	}
	if n := len(res.JSON200.Data); n > 0 {
		return fmt.Errorf("%d connectors left after destroy", n)
	}
	return nil
}

// TestAccConnectorResource_retarget: moving base_url to another host leaves
// the connector's connections reauth_required (the server dropped the
// stored key) until credentials_wo_version sends the key again; moving an
// oauth2 token_url without sending the client secret again is a plan error.
func TestAccConnectorResource_retarget(t *testing.T) {
	s := testAccServer(t)
	cfg := func(baseURL string, keyVersion int) string {
		return s.config(fmt.Sprintf(`
resource "switchboard_connector" "crm" {
  name     = "crm"
  base_url = %q
  auth = {
    type = "apiKey"
    name = "X-API-Key"
    in   = "header"
  }
}

resource "switchboard_connection" "acme" {
  connector              = switchboard_connector.crm.name
  name                   = "acme"
  api_key_wo             = "k-secret"
  credentials_wo_version = %d
}
`, baseURL, keyVersion))
	}
	oauthCfg := func(tokenURL string, secretVersion int) string {
		return s.config(fmt.Sprintf(`
resource "switchboard_connector" "machine" {
  name     = "machine"
  base_url = "https://api.machine.example"
  auth = {
    type                     = "oauth2"
    grant                    = "client_credentials"
    token_url                = %q
    client_id                = "switchboard"
    client_secret_wo         = "s3cret"
    client_secret_wo_version = %d
  }
}
`, tokenURL, secretVersion))
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             s.checkConnectorsGone,
		Steps: []resource.TestStep{
			{Config: cfg("https://api.crm.example/v1", 1), Check: s.checkConnectionStatus("crm", "acme", "active")},
			{
				// A path change on the same origin keeps the key.
				Config: cfg("https://api.crm.example/v2", 1),
				Check:  s.checkConnectionStatus("crm", "acme", "active"),
			},
			{
				Config: cfg("https://api.crm-new.example/v2", 1),
				Check:  s.checkConnectionStatus("crm", "acme", "reauth_required"),
			},
			{Config: cfg("https://api.crm-new.example/v2", 2), Check: s.checkConnectionStatus("crm", "acme", "active")},
			{
				// Moving and sending the key again in one apply.
				Config: cfg("https://api.crm-third.example", 3),
				Check:  s.checkConnectionStatus("crm", "acme", "active"),
			},
			{Config: oauthCfg("https://auth.machine.example/token", 1)},
			{
				Config:      oauthCfg("https://auth.elsewhere.example/token", 1),
				ExpectError: regexp.MustCompile(`token_url changed: send the client secret again`),
			},
			{Config: oauthCfg("https://auth.elsewhere.example/token", 2), Check: s.checkClientSecretSet("machine")},
		},
	})
}

// checkConnectionStatus checks a connection's status on the server.
func (s *testServer) checkConnectionStatus(connector, name, want string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		res, err := s.api.GetConnectionWithResponse(context.Background(), connector, name)
		if err != nil {
			return err
		}
		if res.JSON200 == nil {
			return fmt.Errorf("get connection %s/%s: %d %s", connector, name, res.StatusCode(), res.Body)
		}
		if got := string(res.JSON200.Status); got != want {
			return fmt.Errorf("connection %s/%s is %s, want %s", connector, name, got, want)
		}
		return nil
	}
}

// TestAccConnectorResource_connectPage: connect_page is sent, changed in
// place, partly set, removed (null again, and gone on the server) and
// imported at each stage without a diff.
func TestAccConnectorResource_connectPage(t *testing.T) {
	s := testAccServer(t)
	const res = "switchboard_connector.test"
	cfg := func(page string) string {
		return s.config(fmt.Sprintf(`
resource "switchboard_connector" "test" {
  name     = "tickets"
  base_url = "https://api.tickets.example"
  auth = {
    type = "apiKey"
    name = "X-API-Key"
    in   = "header"
  }
%s
}
`, page))
	}
	const logo = "https://cdn.tickets.example/logo.svg"
	full := func(help string) string {
		return fmt.Sprintf(`
  connect_page = {
    logo_url    = %q
    help_text   = %q
    test_action = "whoami"
  }`, logo, help)
	}
	const help1, help2 = "Find your key under Settings > API.", "Find your key under Settings > API.\n\tIt starts with tk_."
	// Only an http logo on loopback: allowed, and the other fields stay null.
	const loopbackLogo = "http://127.0.0.1:8080/logo.png"
	partial := fmt.Sprintf("  connect_page = {\n    logo_url = %q\n  }", loopbackLogo)

	page := func(logoURL, help, action string) statecheck.StateCheck {
		str := func(v string) knownvalue.Check {
			if v == "" {
				return knownvalue.Null()
			}
			return knownvalue.StringExact(v)
		}
		return statecheck.ExpectKnownValue(res, tfjsonpath.New("connect_page"), knownvalue.ObjectExact(map[string]knownvalue.Check{
			"logo_url": str(logoURL), "help_text": str(help), "test_action": str(action),
		}))
	}
	version := func(v int64) statecheck.StateCheck {
		return statecheck.ExpectKnownValue(res, tfjsonpath.New("version"), knownvalue.Int64Exact(v))
	}
	update := resource.ConfigPlanChecks{
		PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate)},
	}
	importStep := resource.TestStep{ResourceName: res, ImportState: true, ImportStateVerify: true}
	ptr := func(s string) *string { return &s }

	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             s.checkConnectorsGone,
		Steps: []resource.TestStep{
			{
				Config:            cfg(full(help1)),
				ConfigStateChecks: []statecheck.StateCheck{page(logo, help1, "whoami"), version(1)},
				Check:             s.checkConnectPage("tickets", &client.ConnectPage{LogoUrl: ptr(logo), HelpText: ptr(help1), TestAction: ptr("whoami")}),
			},
			{
				// Newlines and tabs survive the round trip.
				Config:            cfg(full(help2)),
				ConfigPlanChecks:  update,
				ConfigStateChecks: []statecheck.StateCheck{page(logo, help2, "whoami"), version(2)},
				Check:             s.checkConnectPage("tickets", &client.ConnectPage{LogoUrl: ptr(logo), HelpText: ptr(help2), TestAction: ptr("whoami")}),
			},
			importStep,
			{
				Config:            cfg(partial),
				ConfigPlanChecks:  update,
				ConfigStateChecks: []statecheck.StateCheck{page(loopbackLogo, "", ""), version(3)},
				Check:             s.checkConnectPage("tickets", &client.ConnectPage{LogoUrl: ptr(loopbackLogo)}),
			},
			importStep,
			{
				// Removed from the configuration: cleared on the server.
				Config:           cfg(""),
				ConfigPlanChecks: update,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("connect_page"), knownvalue.Null()), version(4),
				},
				Check: s.checkConnectPage("tickets", nil),
			},
			importStep,
		},
	})
}

// checkConnectPage checks the connectPage the server holds for a connector
// (want nil: none).
func (s *testServer) checkConnectPage(name string, want *client.ConnectPage) resource.TestCheckFunc {
	return func(*terraform.State) error {
		c, ok := s.getConnector(name)
		if !ok {
			return fmt.Errorf("connector %s not found", name)
		}
		if !reflect.DeepEqual(c.ConnectPage, want) {
			got, _ := json.Marshal(c.ConnectPage)
			exp, _ := json.Marshal(want)
			return fmt.Errorf("connector %s: connectPage is %s, want %s", name, got, exp)
		}
		return nil
	}
}

// TestAccConnectorResource_redirectURLs: connectors whose users enter
// credentials (apiKey, bearer, basic) take redirect_urls, and a connect
// session accepts exactly those as its redirectUrl; removing them refuses
// the URL again.
func TestAccConnectorResource_redirectURLs(t *testing.T) {
	s := testAccServer(t)
	const back = "https://app.example.com/integrations/connected"
	kinds := []struct{ name, auth string }{
		{"key_api", `type = "apiKey"` + "\n    name = \"X-API-Key\"\n    in   = \"header\""},
		{"bearer_api", `type = "bearer"`},
		{"basic_api", `type = "basic"`},
	}
	cfg := func(withRedirects bool) string {
		var b strings.Builder
		for _, k := range kinds {
			redirects := ""
			if withRedirects {
				redirects = fmt.Sprintf("\n    redirect_urls = [%q, \"http://localhost:3000/done\"]", back)
			}
			fmt.Fprintf(&b, `
resource "switchboard_connector" %q {
  name     = %q
  base_url = "https://%s.example.com"
  auth = {
    %s%s
  }
}
`, k.name, k.name, k.name, k.auth, redirects)
		}
		return s.config(b.String())
	}
	var withChecks, withoutChecks []statecheck.StateCheck
	var sessionsAccepted, sessionsRefused []resource.TestCheckFunc
	for _, k := range kinds {
		addr := "switchboard_connector." + k.name
		withChecks = append(withChecks, statecheck.ExpectKnownValue(addr, tfjsonpath.New("auth").AtMapKey("redirect_urls"),
			knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact(back), knownvalue.StringExact("http://localhost:3000/done")})))
		withoutChecks = append(withoutChecks, statecheck.ExpectKnownValue(addr, tfjsonpath.New("auth").AtMapKey("redirect_urls"), knownvalue.Null()))
		sessionsAccepted = append(sessionsAccepted,
			s.checkConnectSession(k.name, back, true),
			s.checkConnectSession(k.name, "https://elsewhere.example.com/", false))
		sessionsRefused = append(sessionsRefused, s.checkConnectSession(k.name, back, false))
	}
	steps := []resource.TestStep{{
		Config:            cfg(true),
		ConfigStateChecks: withChecks,
		Check:             resource.ComposeTestCheckFunc(sessionsAccepted...),
	}}
	for _, k := range kinds {
		steps = append(steps, resource.TestStep{
			ResourceName: "switchboard_connector." + k.name, ImportState: true, ImportStateVerify: true,
		})
	}
	steps = append(steps, resource.TestStep{
		Config: cfg(false),
		ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
			plancheck.ExpectResourceAction("switchboard_connector.key_api", plancheck.ResourceActionUpdate),
		}},
		ConfigStateChecks: withoutChecks,
		Check:             resource.ComposeTestCheckFunc(sessionsRefused...),
	})
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             s.checkConnectorsGone,
		Steps:                    steps,
	})
}

// checkConnectSession creates a connect session for connector returning to
// redirect and checks that the server creates it (201) or, when !created,
// refuses the redirect (400 or 422).
func (s *testServer) checkConnectSession(connector, redirect string, created bool) resource.TestCheckFunc {
	return func(*terraform.State) error {
		res, err := s.api.CreateConnectSessionWithResponse(context.Background(), client.ConnectSessionInput{
			Connector: connector, RedirectUrl: &redirect,
		})
		if err != nil {
			return err
		}
		got := res.StatusCode()
		if ok := got == http.StatusCreated; created != ok || !created && got != http.StatusBadRequest && got != http.StatusUnprocessableEntity {
			want := "201"
			if !created {
				want = "400 or 422"
			}
			return fmt.Errorf("connect session for %s returning to %s: %d %s, want %s", connector, redirect, got, res.Body, want)
		}
		return nil
	}
}

// TestAccConnectorResource_connectPageValidation: what the server would
// refuse about connect_page and redirect_urls fails the plan already.
func TestAccConnectorResource_connectPageValidation(t *testing.T) {
	s := testAccServer(t)
	const (
		apiKey = `auth = { type = "apiKey"` + "\n" + `name = "k"` + "\n" + `in = "query" }`
		ccAuth = `auth = { type = "oauth2"` + "\n" + `grant = "client_credentials"` + "\n" + `token_url = "https://a.example.com/token"` +
			"\n" + `client_id = "c"` + "\n" + `client_secret_wo = "x"`
	)
	tests := []struct{ name, body, want string }{
		{"empty connect_page", apiKey + "\nconnect_page = {}", `sets none of`},
		{"logo over http", apiKey + "\n" + `connect_page = { logo_url = "http://cdn.example.com/logo.png" }`, `must be an https:// URL`},
		{"relative logo", apiKey + "\n" + `connect_page = { logo_url = "cdn.example.com/logo.png" }`, `absolute http:// or https:// URL`},
		{"logo with fragment", apiKey + "\n" + `connect_page = { logo_url = "https://cdn.example.com/logo.png#x" }`, `must not have a fragment`},
		{"long help_text", apiKey + "\n" + fmt.Sprintf(`connect_page = { help_text = %q }`, strings.Repeat("é", maxHelpText+1)), `between 1 and 2000`},
		{"control character in help_text", apiKey + "\n" + `connect_page = { help_text = "ring \u0007" }`, `must not contain control characters`},
		{"test_action not a name", apiKey + "\n" + `connect_page = { test_action = "Who-Am-I" }`, `lower-case letter`},
		{"test_action without auth", `connect_page = { test_action = "whoami" }`, `does not apply to auth none`},
		{"test_action for client_credentials", ccAuth + " }\n" + `connect_page = { test_action = "whoami" }`, `does not apply to auth oauth2 client_credentials`},
		{"redirect_urls for none", `auth = { type = "none"` + "\n" + `redirect_urls = ["https://app.example.com/"] }`, `applies only to auth types apiKey, bearer, basic or oauth2, not none`},
		{"redirect_urls for client_credentials", ccAuth + "\n" + `redirect_urls = ["https://app.example.com/"] }`, `applies only to the authorization_code grant`},
	}
	var steps []resource.TestStep
	for _, tc := range tests {
		steps = append(steps, resource.TestStep{
			Config: s.config("# " + tc.name + "\nresource \"switchboard_connector\" \"bad\" {\nname = \"w\"\nbase_url = \"https://api.example.com\"\n" +
				tc.body + "\n}"),
			PlanOnly: true,
			// Terraform wraps long messages: any run of spaces may be a line break.
			ExpectError: regexp.MustCompile(strings.ReplaceAll(regexp.QuoteMeta(tc.want), " ", `\s+`)),
		})
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps:                    steps,
	})
}
