package provider

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// testAccProtoV6ProviderFactories serves the provider in-process to the
// Terraform CLI that terraform-plugin-testing runs.
var testAccProtoV6ProviderFactories = map[string]func() (tfprotov6.ProviderServer, error){
	"switchboard": providerserver.NewProtocol6WithError(New("test")()),
}

// validating holds, per test server URL, a transport that validates every
// exchange against the OpenAPI spec (servertest's), so that every request
// the provider makes and every answer it reads is checked against the
// contract, in every acceptance test.
var validating sync.Map

func init() {
	testTransport = func(endpoint string) http.RoundTripper {
		if rt, ok := validating.Load(endpoint); ok {
			return rt.(http.RoundTripper)
		}
		return nil
	}
}

// testAccPreCheck checks what every acceptance test needs beyond TF_ACC.
func testAccPreCheck(t *testing.T) {
	t.Helper()
	if os.Getenv("TF_ACC_TERRAFORM_PATH") == "" {
		t.Log("TF_ACC_TERRAFORM_PATH unset: terraform-plugin-testing looks for terraform on PATH")
	}
}

// testAccServer starts a real Switchboard server (Echo and bbolt in
// t.TempDir()) for one acceptance test, with a Go client for checks that go
// around Terraform (drift, secrets reaching the server). Without TF_ACC it
// skips, as resource.Test would, before starting anything.
func testAccServer(t *testing.T, opts ...servertest.Option) *testServer {
	t.Helper()
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("Acceptance tests skipped unless env '%s' set", resource.EnvTfAcc)
	}
	env := servertest.New(t, opts...)
	validating.Store(env.URL, env.HTTPClient(t).Transport)
	t.Cleanup(func() { validating.Delete(env.URL) })
	c, err := newAPIClient(env.URL, env.AdminKey, "test")
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{Env: env, api: c}
}

// testServer is a running server and an admin client for it.
type testServer struct {
	*servertest.Env
	api *apiClient
}

// providerConfig is the provider block for this server; test configurations
// start with it.
func (s *testServer) providerConfig() string {
	return fmt.Sprintf(`
provider "switchboard" {
  endpoint = %q
  api_key  = %q
}
`, s.URL, s.AdminKey)
}

// config prefixes a configuration with the provider block.
func (s *testServer) config(hcl string) string { return s.providerConfig() + hcl }

func TestProvider_schemaValid(t *testing.T) {
	// The framework validates schemas (e.g. write-only rules) when serving
	// GetProviderSchema; this catches a broken schema without Terraform.
	srv, err := testAccProtoV6ProviderFactories["switchboard"]()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		t.Errorf("%s: %s: %s", d.Severity, d.Summary, d.Detail)
	}
	if len(resp.ResourceSchemas) == 0 {
		t.Error("no resources")
	}
	for name, s := range resp.ResourceSchemas {
		checkDescribed(t, name, s.Block)
	}
	for name, s := range resp.DataSourceSchemas {
		checkDescribed(t, name, s.Block)
	}
	checkDescribed(t, "provider", resp.Provider.Block)
}

// checkDescribed fails for every schema element without a description.
func checkDescribed(t *testing.T, where string, b *tfprotov6.SchemaBlock) {
	t.Helper()
	if b.Description == "" {
		t.Errorf("%s: no description", where)
	}
	for _, a := range b.Attributes {
		if a.Description == "" {
			t.Errorf("%s.%s: no description", where, a.Name)
		}
		if a.NestedType != nil {
			checkDescribed(t, where+"."+a.Name, &tfprotov6.SchemaBlock{Attributes: a.NestedType.Attributes, Description: a.Description})
		}
	}
	for _, nb := range b.BlockTypes {
		checkDescribed(t, where+"."+nb.TypeName, nb.Block)
	}
}

func TestAccProvider_configErrors(t *testing.T) {
	s := testAccServer(t)
	t.Setenv(EnvEndpoint, "")
	t.Setenv(EnvAPIKey, "")
	// Planning a resource makes Terraform configure the provider.
	const use = `
resource "switchboard_api_key" "k" {
  name   = "k"
  scopes = ["llm"]
}
`
	step := func(endpoint, key, want string) resource.TestStep {
		block := "provider \"switchboard\" {\n"
		if endpoint != "" {
			block += fmt.Sprintf("  endpoint = %q\n", endpoint)
		}
		if key != "" {
			block += fmt.Sprintf("  api_key = %q\n", key)
		}
		return resource.TestStep{Config: block + "}\n" + use, PlanOnly: true, ExpectError: regexp.MustCompile(want)}
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			step("", "", `Missing Switchboard endpoint`),
			step(s.URL, "", `Missing Switchboard API key`),
			step("127.0.0.1:8080", "sb_x", `absolute http:// or https:// URL`),
			step(s.URL+"/v1", "sb_x", `without /v1`),
			// A port nothing listens on: the listener is closed at once.
			step(closedURL(t), "sb_x", `Cannot reach Switchboard`),
			step(s.URL, "sb_wrong_wrong_wrong_wrong_wrong_wrong_wrong", `Switchboard refused the API key`),
		},
	})
}

// TestAccProvider_envFallback configures the provider from the environment
// only. It sets process environment variables, so it does not run in parallel.
func TestAccProvider_envFallback(t *testing.T) {
	s := testAccServer(t)
	t.Setenv(EnvEndpoint, s.URL)
	t.Setenv(EnvAPIKey, s.AdminKey)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: `
provider "switchboard" {}
resource "switchboard_api_key" "k" {
  name   = "from env"
  scopes = ["llm"]
}
`,
		}},
	})
}

// closedURL is a loopback URL where nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}
