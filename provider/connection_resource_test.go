package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
)

// connectionConnectors are an apiKey, a basic and an OAuth 2.0
// (authorization_code) connector.
const connectionConnectors = `
resource "switchboard_connector" "weather" {
  name     = "weather"
  base_url = "https://api.weather.example/v1"
  auth = {
    type = "apiKey"
    name = "X-API-Key"
    in   = "header"
  }
}

resource "switchboard_connector" "legacy" {
  name     = "legacy"
  base_url = "https://legacy.example.com"
  auth     = { type = "basic" }
}

resource "switchboard_connector" "crm" {
  name     = "crm"
  base_url = "https://crm.example.com/api"
  auth = {
    type              = "oauth2"
    grant             = "authorization_code"
    authorization_url = "https://crm.example.com/oauth/authorize"
    token_url         = "https://crm.example.com/oauth/token"
    client_id         = "switchboard"
    scopes            = ["contacts.read"]
    redirect_urls     = ["https://app.example.com/connected"]
  }
}
`

func TestAccConnectionResource(t *testing.T) {
	s := testAccServer(t)
	const res = "switchboard_connection.test"
	const basic = "switchboard_connection.basic"
	cfg := func(name, key string, version int, username string) string {
		return s.config(connectionConnectors + fmt.Sprintf(`
resource "switchboard_connection" "test" {
  connector              = switchboard_connector.weather.name
  name                   = %q
  api_key_wo             = %q
  credentials_wo_version = %d
}

resource "switchboard_connection" "basic" {
  connector   = switchboard_connector.legacy.name
  username    = %q
  password_wo = "pa55word"
}

resource "switchboard_connection" "oauth" {
  connector = switchboard_connector.crm.name
  name      = "acme"
}
`, name, key, version, username))
	}
	version := func(v int64) statecheck.StateCheck {
		return statecheck.ExpectKnownValue(res, tfjsonpath.New("version"), knownvalue.Int64Exact(v))
	}
	creds := func(connector, name string, want map[string]string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			var got map[string]string
			raw := s.secret(t, connectors.ConnectionSecretRef(connector, name))
			if err := json.Unmarshal([]byte(raw), &got); err != nil {
				return fmt.Errorf("vault %s/%s: %v", connector, name, err)
			}
			for k, v := range want {
				if got[k] != v {
					return fmt.Errorf("vault %s/%s: %s is not the configured value", connector, name, k)
				}
			}
			return nil
		}
	}

	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             s.checkConnectorsGone,
		Steps: []resource.TestStep{
			{
				Config: cfg("default", "key-one", 1, "alice"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("id"), knownvalue.StringExact("weather/default")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("status"), knownvalue.StringExact("active")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("auth_type"), knownvalue.StringExact("apiKey")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("api_key_wo"), knownvalue.Null()),
					statecheck.ExpectKnownValue(basic, tfjsonpath.New("name"), knownvalue.StringExact("default")),
					statecheck.ExpectKnownValue(basic, tfjsonpath.New("password_wo"), knownvalue.Null()),
					// The OAuth connection waits for the account owner.
					statecheck.ExpectKnownValue("switchboard_connection.oauth", tfjsonpath.New("status"), knownvalue.StringExact("pending")),
					statecheck.ExpectKnownValue("switchboard_connection.oauth", tfjsonpath.New("auth_type"), knownvalue.StringExact("oauth2")),
					version(1),
				},
				Check: resource.ComposeTestCheckFunc(
					creds("weather", "default", map[string]string{"apiKey": "key-one"}),
					creds("legacy", "default", map[string]string{"username": "alice", "password": "pa55word"}),
					checkNoSecretInState("key-one", "pa55word"),
				),
			},
			{
				// Rotation: a new version sends the new key; the username
				// change re-sends the password with it.
				Config: cfg("default", "key-two", 2, "bob"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
						plancheck.ExpectResourceAction(basic, plancheck.ResourceActionUpdate),
						plancheck.ExpectResourceAction("switchboard_connection.oauth", plancheck.ResourceActionNoop),
						plancheck.ExpectKnownValue(res, tfjsonpath.New("status"), knownvalue.StringExact("active")),
					},
				},
				ConfigStateChecks: []statecheck.StateCheck{version(2)},
				Check: resource.ComposeTestCheckFunc(
					creds("weather", "default", map[string]string{"apiKey": "key-two"}),
					creds("legacy", "default", map[string]string{"username": "bob", "password": "pa55word"}),
					checkNoSecretInState("key-one", "key-two", "pa55word"),
				),
			},
			{
				// A new key without a new version is invisible to Terraform.
				Config:   cfg("default", "key-three", 2, "bob"),
				PlanOnly: true,
			},
			{
				ResourceName:            res,
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"credentials_wo_version"},
			},
			{
				ResourceName:            "switchboard_connection.basic",
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"username"},
			},
			{
				// Renaming replaces.
				Config: cfg("backup", "key-two", 2, "bob"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionReplace)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("id"), knownvalue.StringExact("weather/backup")),
					version(1),
				},
				Check: creds("weather", "backup", map[string]string{"apiKey": "key-two"}),
			},
			{
				// Deleted outside Terraform: planned for creation again.
				PreConfig: func() { s.deleteConnection(t, "weather", "backup") },
				Config:    cfg("backup", "key-two", 2, "bob"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionCreate)},
				},
			},
		},
	})
}

func TestAccConnectionResource_validation(t *testing.T) {
	s := testAccServer(t)
	step := func(body, want string) resource.TestStep {
		return resource.TestStep{
			Config:      s.config("resource \"switchboard_connection\" \"bad\" {\nconnector = \"weather\"\n" + body + "\n}"),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(want),
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			step(`name = "Main"`, `lower-case letter or digit`),
			step(`api_key_wo = "k"`+"\n"+`token_wo = "t"`, `cannot be configured together`),
			step(`password_wo = "p"`, `must be configured together`),
			step(`username = "a:b"`+"\n"+`password_wo = "p"`, `must not contain ':'`),
		},
	})
}

// deleteConnection deletes a connection behind Terraform's back.
func (s *testServer) deleteConnection(t *testing.T, connector, name string) {
	res, err := s.api.DeleteConnectionWithResponse(context.Background(), connector, name, nil)
	if err != nil || res.StatusCode() != http.StatusNoContent {
		t.Fatalf("delete connection %s/%s: %v %s", connector, name, err, res.Body)
	}
}

// TestAccConnectionResource_invoke runs an action defined by Terraform
// against a real upstream: the write-only API key arrives where the
// connector says, and the transformation shapes the result.
func TestAccConnectionResource_invoke(t *testing.T) {
	var gotKey atomic.Value
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey.Store(r.Header.Get("X-API-Key"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"location": {"name": %q}, "current": {"temp_c": 21.5}}`, r.URL.Query().Get("q"))
	}))
	t.Cleanup(upstream.Close)
	s := testAccServer(t, allowLoopback)
	run := func(*terraform.State) error {
		sb, err := client.New(s.URL, s.AdminKey)
		if err != nil {
			return err
		}
		res, err := sb.Integrations("local_weather").Run(context.Background(), "current", map[string]any{"q": "Oslo"})
		if err != nil {
			return err
		}
		var out struct {
			City string  `json:"city"`
			Temp float64 `json:"temp"`
		}
		if err := res.Decode(&out); err != nil {
			return err
		}
		if out.City != "Oslo" || out.Temp != 21.5 {
			return fmt.Errorf("result %s, want the transformed {city: Oslo, temp: 21.5}", res.Result)
		}
		if k, _ := gotKey.Load().(string); k != "upstream-key-42" {
			return fmt.Errorf("the upstream got X-API-Key %q, want the configured key", k)
		}
		return nil
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: s.config(fmt.Sprintf(`
resource "switchboard_connector" "up" {
  name     = "local_weather"
  base_url = %q
  auth     = { type = "apiKey", name = "X-API-Key", in = "header" }
}

resource "switchboard_action" "current" {
  connector      = switchboard_connector.up.name
  name           = "current"
  method         = "GET"
  path           = "/current.json"
  parameters     = { q = { type = "string", required = true, in = "query" } }
  transformation = "return {city: data.location.name, temp: data.current.temp_c};"
}

resource "switchboard_connection" "up" {
  connector  = switchboard_connector.up.name
  api_key_wo = "upstream-key-42"
}
`, upstream.URL)),
			Check: resource.ComposeTestCheckFunc(run, checkNoSecretInState("upstream-key-42")),
		}},
	})
}
