package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/openapiimport"
)

// largeSpec reads one of the large real-world descriptions that
// scripts/fetch-specs.sh puts in .cache/specs (or $SWITCHBOARD_SPECS_DIR);
// a missing one fails the test.
func largeSpec(t *testing.T, name string) []byte {
	t.Helper()
	dir := os.Getenv("SWITCHBOARD_SPECS_DIR")
	if dir == "" {
		dir = filepath.Join("..", ".cache", "specs")
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("%s is missing (%v): run ./scripts/fetch-specs.sh, or make test, which runs it", name, err)
	}
	return b
}

// TestAccOpenAPIImport: the Terraform configuration `switchboard openapi
// import` prints for large real-world descriptions passes Terraform's
// validation and the provider's plan-time checks whole (every action; about
// 100 s a description on 2 cores, left out under -short), and a
// tag-filtered part of it applies against a real server, which then holds
// every action as defined.
func TestAccOpenAPIImport(t *testing.T) {
	tests := []struct {
		name, file string
		opts       openapiimport.Options
		tag        string
	}{
		{"GitHub (OpenAPI 3.0)", "github.json", openapiimport.Options{Connector: "github"}, "issues"},
		{"Kubernetes (Swagger 2.0)", "kubernetes.json", openapiimport.Options{Connector: "kubernetes", BaseURL: "https://kubernetes.example.com"}, "batch_v1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := testAccServer(t)
			doc, err := openapiimport.Parse(context.Background(), largeSpec(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			full, err := openapiimport.FromDoc(doc, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			part := tc.opts
			part.Tags = []string{tc.tag}
			subset, err := openapiimport.FromDoc(doc, part)
			if err != nil {
				t.Fatal(err)
			}
			if len(subset.Actions) < 10 {
				t.Fatalf("tag %s selects %d actions", tc.tag, len(subset.Actions))
			}
			steps := []resource.TestStep{{
				Config: s.config(string(openapiimport.HCL(subset))),
				Check:  s.checkImported(subset),
			}}
			if !testing.Short() {
				// The whole description: validated and planned, not applied.
				steps = append([]resource.TestStep{{
					Config:             s.config(string(openapiimport.HCL(full))),
					PlanOnly:           true,
					ExpectNonEmptyPlan: true,
				}}, steps...)
			}
			start := time.Now()
			resource.ParallelTest(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
			t.Logf("%s: %d of %d actions applied in %s", tc.file, len(subset.Actions), len(full.Actions), time.Since(start).Round(time.Millisecond))
		})
	}
}

// checkImported checks that the server holds the connector and every
// action of r, as defined.
func (s *testServer) checkImported(r openapiimport.Result) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		c, err := s.api.GetConnectorWithResponse(ctx, r.Connector.Name)
		if err != nil || c.JSON200 == nil {
			return fmt.Errorf("connector %s: %v", r.Connector.Name, err)
		}
		if c.JSON200.BaseUrl != r.Connector.BaseURL {
			return fmt.Errorf("connector baseUrl %q, want %q", c.JSON200.BaseUrl, r.Connector.BaseURL)
		}
		for _, want := range r.Actions {
			res, err := s.api.GetActionWithResponse(ctx, r.Connector.Name, want.Name)
			if err != nil || res.JSON200 == nil {
				return fmt.Errorf("action %s: %v %s", want.Name, err, res.Body)
			}
			got := res.JSON200
			if got.Path != want.Path || string(got.Method) != want.Method || len(got.Parameters) != len(want.Parameters) || len(got.Headers) != len(want.Headers) {
				return fmt.Errorf("action %s = %s %s with %d parameters, %d headers; want %s %s with %d, %d",
					want.Name, got.Method, got.Path, len(got.Parameters), len(got.Headers), want.Method, want.Path, len(want.Parameters), len(want.Headers))
			}
			for name, p := range want.Parameters {
				gp, ok := got.Parameters[name]
				if !ok || string(gp.Type) != p.Type || (gp.Required != nil && *gp.Required != p.Required) {
					return fmt.Errorf("action %s parameter %s = %+v, want %+v", want.Name, name, gp, p)
				}
			}
		}
		return nil
	}
}
