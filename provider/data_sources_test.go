package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
)

// withCatalog configures a provider with a chat and an embedding model
// (listing them needs no upstream), beside the built-in local model.
func withCatalog(c *config.Config) {
	c.Providers = append(c.Providers, config.Provider{
		Name:    "acme",
		Type:    "openai",
		BaseURL: "http://127.0.0.1:9/v1",
		Models: []config.Model{
			{Name: "chat-large", Capabilities: []string{"chat", "code"}, MaxTokens: 128000, Pricing: &config.Pricing{Input: 0.15, Output: 0.6}},
			{Name: "embed-small", Capabilities: []string{"embeddings"}, Dimensions: 256},
		},
	})
}

func TestAccModelDataSources(t *testing.T) {
	s := testAccServer(t, withCatalog)
	const chat = "data.switchboard_models.chat"
	model := func(id string) knownvalue.Check {
		return knownvalue.ObjectPartial(map[string]knownvalue.Check{"id": knownvalue.StringExact(id)})
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      s.config(`data "switchboard_model" "x" { id = "acme/nope" }`),
			ExpectError: regexp.MustCompile(`has no model acme/nope`),
		}, {
			Config:      s.config(`data "switchboard_model" "x" { id = "gpt-4o" }`),
			ExpectError: regexp.MustCompile(`must be <provider>/<name>`),
		}, {
			Config:      s.config(`data "switchboard_models" "x" { capability = "telepathy" }`),
			ExpectError: regexp.MustCompile(`value must be one of`),
		}, {
			Config: s.config(`
data "switchboard_models" "all" {}

data "switchboard_models" "chat" {
  capability = "chat"
}

data "switchboard_models" "acme_embeddings" {
  provider_name = "acme"
  capability    = "embeddings"
}

data "switchboard_model" "chat" {
  id = "acme/chat-large"
}

data "switchboard_model" "local" {
  id = "local/hash-embed-384"
}

data "switchboard_model" "embed" {
  id = "acme/embed-small"
}
`),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.switchboard_models.all", tfjsonpath.New("models"), knownvalue.ListExact([]knownvalue.Check{
					model("acme/chat-large"), model("acme/embed-small"), model("local/hash-embed-384"),
				})),
				statecheck.ExpectKnownValue(chat, tfjsonpath.New("models"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.ObjectExact(map[string]knownvalue.Check{
						"id":           knownvalue.StringExact("acme/chat-large"),
						"provider":     knownvalue.StringExact("acme"),
						"name":         knownvalue.StringExact("chat-large"),
						"capabilities": knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("chat"), knownvalue.StringExact("code")}),
						"max_tokens":   knownvalue.Int64Exact(128000),
						"dimensions":   knownvalue.Null(),
					}),
				})),
				statecheck.ExpectKnownValue("data.switchboard_models.acme_embeddings", tfjsonpath.New("models"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"id":         knownvalue.StringExact("acme/embed-small"),
						"dimensions": knownvalue.Int64Exact(256),
						"max_tokens": knownvalue.Null(),
					}),
				})),
				statecheck.ExpectKnownValue("data.switchboard_model.chat", tfjsonpath.New("pricing"), knownvalue.ObjectExact(map[string]knownvalue.Check{
					"input": knownvalue.Float64Exact(0.15), "output": knownvalue.Float64Exact(0.6),
				})),
				statecheck.ExpectKnownValue("data.switchboard_model.chat", tfjsonpath.New("created_at"), knownvalue.NotNull()),
				// The built-in model is free; a model without configured pricing has none.
				statecheck.ExpectKnownValue("data.switchboard_model.local", tfjsonpath.New("pricing"), knownvalue.ObjectExact(map[string]knownvalue.Check{
					"input": knownvalue.Float64Exact(0), "output": knownvalue.Float64Exact(0),
				})),
				statecheck.ExpectKnownValue("data.switchboard_model.embed", tfjsonpath.New("pricing"), knownvalue.Null()),
				statecheck.ExpectKnownValue("data.switchboard_model.embed", tfjsonpath.New("provider_name"), knownvalue.StringExact("acme")),
				statecheck.ExpectKnownValue("data.switchboard_model.local", tfjsonpath.New("dimensions"), knownvalue.Int64Exact(384)),
			},
		}},
	})
}

func TestAccConnectorDataSource(t *testing.T) {
	s := testAccServer(t)
	const ds = "data.switchboard_connector.crm"
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      s.config(`data "switchboard_connector" "x" { name = "nope" }`),
			ExpectError: regexp.MustCompile(`no connector named nope`),
		}, {
			Config: s.config(`
resource "switchboard_connector" "crm" {
  name     = "crm"
  base_url = "https://crm.example.com/api"
  auth = {
    type             = "oauth2"
    grant            = "client_credentials"
    token_url        = "https://crm.example.com/oauth/token"
    client_id        = "switchboard"
    client_secret_wo = "crm-secret"
  }
}

data "switchboard_connector" "crm" {
  name = switchboard_connector.crm.name
}
`),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(ds, tfjsonpath.New("base_url"), knownvalue.StringExact("https://crm.example.com/api")),
				statecheck.ExpectKnownValue(ds, tfjsonpath.New("auth").AtMapKey("client_secret_set"), knownvalue.Bool(true)),
				statecheck.ExpectKnownValue(ds, tfjsonpath.New("auth").AtMapKey("grant"), knownvalue.StringExact("client_credentials")),
				statecheck.ExpectKnownValue(ds, tfjsonpath.New("version"), knownvalue.Int64Exact(1)),
			},
			Check: checkNoSecretInState("crm-secret"),
		}},
	})
}
