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
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
)

// TestAccUsageDataSource reads usage the server recorded for real model
// calls (the built-in local embedding model), made with a key Terraform
// created: per key and model, filtered by key, and over a window without
// calls.
func TestAccUsageDataSource(t *testing.T) {
	s := testAccServer(t)
	const key = "switchboard_api_key.app"
	const calls = 2
	keyCfg := `
resource "switchboard_api_key" "app" {
  name   = "app"
  scopes = ["llm"]
  budget = { usd = 10, period = "month" }
}
`
	positive := knownvalue.Int64Func(func(v int64) error {
		if v <= 0 {
			return fmt.Errorf("got %d, want more than 0", v)
		}
		return nil
	})
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: s.config(keyCfg),
				Check:  s.embedWith(key, calls),
			},
			{
				Config: s.config(keyCfg + `
data "switchboard_usage" "by_key" {
  key      = switchboard_api_key.app.id
  group_by = ["key", "model"]
}

data "switchboard_usage" "by_model" {
  model = "local/hash-embed-384"
}

data "switchboard_usage" "future" {
  from = "2099-01-01T00:00:00Z"
  to   = "2099-02-01T00:00:00Z"
}

output "spent" {
  value = data.switchboard_usage.by_key.total.cost_usd
}
`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.switchboard_usage.by_key", tfjsonpath.New("total"), knownvalue.ObjectExact(map[string]knownvalue.Check{
						"requests":          knownvalue.Int64Exact(calls),
						"prompt_tokens":     positive,
						"completion_tokens": knownvalue.Int64Exact(0),
						"total_tokens":      positive,
						"cost_usd":          knownvalue.Float64Exact(0), // the local model has no pricing
					})),
					statecheck.ExpectKnownValue("data.switchboard_usage.by_key", tfjsonpath.New("rows"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.ObjectPartial(map[string]knownvalue.Check{
							"model":    knownvalue.StringExact("local/hash-embed-384"),
							"period":   knownvalue.Null(),
							"requests": knownvalue.Int64Exact(calls),
						}),
					})),
					statecheck.CompareValuePairs("data.switchboard_usage.by_key", tfjsonpath.New("rows").AtSliceIndex(0).AtMapKey("key"),
						key, tfjsonpath.New("id"), compare.ValuesSame()),
					statecheck.CompareValuePairs("data.switchboard_usage.by_key", tfjsonpath.New("total"),
						"data.switchboard_usage.by_model", tfjsonpath.New("total"), compare.ValuesSame()),
					statecheck.ExpectKnownValue("data.switchboard_usage.by_model", tfjsonpath.New("rows").AtSliceIndex(0).AtMapKey("key"), knownvalue.Null()),
					statecheck.ExpectKnownValue("data.switchboard_usage.future", tfjsonpath.New("rows"), knownvalue.ListSizeExact(0)),
					statecheck.ExpectKnownValue("data.switchboard_usage.future", tfjsonpath.New("total").AtMapKey("requests"), knownvalue.Int64Exact(0)),
					statecheck.ExpectKnownOutputValue("spent", knownvalue.Float64Exact(0)),
				},
			},
		},
	})
}

func TestAccUsageDataSource_validation(t *testing.T) {
	s := testAccServer(t)
	step := func(body, want string) resource.TestStep {
		return resource.TestStep{
			Config:      s.config(`data "switchboard_usage" "bad" {` + "\n" + body + "\n}"),
			ExpectError: regexp.MustCompile(want),
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			step(`group_by = ["week"]`, `value must be one of`),
			step(`group_by = ["key", "key"]`, `duplicate values`),
			step(`model = "gpt-4o"`, `must be <provider>/<name>`),
			step(`from = "yesterday"`, `RFC ?3339`),
			// The server's rule: to must be after from.
			step(`from = "2030-01-02T00:00:00Z"`+"\n"+`to = "2030-01-01T00:00:00Z"`, `cannot read usage`),
		},
	})
}

// embedWith makes n model calls (embeddings with the built-in local model)
// with the secret of the API key in state at name.
func (s *testServer) embedWith(name string, n int) resource.TestCheckFunc {
	return func(st *terraform.State) error {
		c, err := newAPIClient(s.URL, st.RootModule().Resources[name].Primary.Attributes["key"], "test")
		if err != nil {
			return err
		}
		for i := range n {
			res, err := c.CreateEmbeddingWithResponse(context.Background(), client.EmbeddingRequest{
				Model: "local/hash-embed-384", Text: fmt.Sprintf("how much did call %d cost", i),
			})
			if err != nil {
				return err
			}
			if res.StatusCode() != http.StatusOK {
				return fmt.Errorf("embedding: %d %s", res.StatusCode(), res.Body)
			}
		}
		return nil
	}
}
