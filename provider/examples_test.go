package provider

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
)

// TestAccExampleComplete applies examples/complete as a user would: the
// provider configured from the environment only, under its registry source
// address; then checks that a second plan is empty. It sets process
// environment variables, so it does not run in parallel.
func TestAccExampleComplete(t *testing.T) {
	s := testAccServer(t, withCatalog)
	t.Setenv(EnvEndpoint, s.URL)
	t.Setenv(EnvAPIKey, s.AdminKey)
	// The example names the provider by its registry address.
	t.Setenv(resource.EnvTfAccProviderNamespace, "switchboard-dev")
	const key = "weather-key-0123456789"
	vars := config.Variables{"weather_api_key": config.StringVariable(key)}
	// Only the configuration is copied: the state, .terraform and lock
	// file a user leaves behind by applying the example in place must not
	// reach the test.
	dir := config.StaticDirectory(copyConfiguration(t, "../examples/complete"))

	resource.Test(t, resource.TestCase{
		PreCheck:     func() { testAccPreCheck(t) },
		CheckDestroy: s.checkConnectorsGone,
		Steps: []resource.TestStep{
			{
				// The example has its own provider block, so the providers
				// are given per step.
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				ConfigDirectory:          dir,
				ConfigVariables:          vars,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownOutputValue("chat_models", knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("acme/chat-large")})),
					statecheck.ExpectKnownValue("switchboard_connection.weather", tfjsonpath.New("status"), knownvalue.StringExact("active")),
					statecheck.ExpectKnownValue("switchboard_action.current", tfjsonpath.New("transformation"), knownvalue.NotNull()),
				},
				Check: resource.ComposeTestCheckFunc(
					checkNoSecretInState(key),
					s.checkSecretContains(t, connectors.ConnectionSecretRef("weather", "default"), key),
				),
			},
			{
				// A second plan shows no changes.
				// The example has its own provider block, so the providers
				// are given per step.
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				ConfigDirectory:          dir,
				ConfigVariables:          vars,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
		},
	})
}

// copyConfiguration copies the Terraform configuration files of dir (*.tf
// and *.tf.json, not subdirectories) into a new temporary directory and
// returns it. State files, .terraform, the lock file and tfvars are left
// out: the tests give their own variables.
func copyConfiguration(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	n := 0
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".tf") && !strings.HasSuffix(name, ".tf.json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("no Terraform configuration in %s", dir)
	}
	return out
}

// TestCopyConfiguration: what a user leaves behind by applying an example
// in place (state, its backup, .terraform, the lock file, tfvars) is not
// copied; the configuration is.
func TestCopyConfiguration(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{
		"main.tf":                      "# main",
		"extra.tf.json":                "{}",
		"README.md":                    "# readme",
		"terraform.tfstate":            `{"version":4}`,
		"terraform.tfstate.backup":     `{"version":4}`,
		".terraform.lock.hcl":          "# lock",
		"terraform.tfvars":             `weather_api_key = "mine"`,
		".terraform/terraform.tfstate": `{"version":4}`,
		"modules/x.tf":                 "# nested",
	}
	for name, body := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(copyConfiguration(t, src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if want := []string{"extra.tf.json", "main.tf"}; !slices.Equal(got, want) {
		t.Errorf("copied %v, want %v", got, want)
	}
}

// TestAccExamples plans every resource example of the docs together, so
// that an example the provider would refuse fails here, not in a user's
// hands.
func TestAccExamples(t *testing.T) {
	s := testAccServer(t)
	var b strings.Builder
	files, err := filepath.Glob("../examples/resources/*/resource.tf")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("# " + f + "\n" + string(src) + "\n")
	}
	secret := "whsec_" + strings.Repeat("QUJD", 8)
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: s.config(b.String()),
			ConfigVariables: config.Variables{
				"crm_client_secret":     config.StringVariable("crm-secret"),
				"weather_api_key":       config.StringVariable("weather-key"),
				"alerts_webhook_secret": config.StringVariable(secret),
			},
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
		}},
	})
}

// TestAccExamples_formatted checks that the examples (rendered into the
// docs) are formatted as `terraform fmt` writes them.
func TestAccExamples_formatted(t *testing.T) {
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("Acceptance tests skipped unless env '%s' set", resource.EnvTfAcc)
	}
	tf := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if tf == "" {
		var err error
		if tf, err = exec.LookPath("terraform"); err != nil {
			t.Fatal("terraform not found: set TF_ACC_TERRAFORM_PATH")
		}
	}
	out, err := exec.Command(tf, "fmt", "-check", "-recursive", "-diff", "../examples").CombinedOutput()
	if err != nil {
		t.Fatalf("terraform fmt -check ../examples: %v\n%s", err, out)
	}
}
