package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// secret returns the secret the server's vault holds under ref ("" when
// none), to prove that a write-only value reached the server.
func (s *testServer) secret(t *testing.T, ref string) string {
	t.Helper()
	var out []byte
	err := s.Store.View(context.Background(), func(tx store.Tx) error {
		if !s.Vault.Has(tx, ref) {
			return nil
		}
		var err error
		out, err = s.Vault.Get(tx, ref)
		return err
	})
	if err != nil {
		t.Fatalf("vault %s: %v", ref, err)
	}
	return string(out)
}

// checkSecret is a check that the vault holds want under ref.
func (s *testServer) checkSecret(t *testing.T, ref, want string) func() error {
	return func() error {
		if got := s.secret(t, ref); got != want {
			return fmt.Errorf("vault %s holds %q, want %q", ref, got, want)
		}
		return nil
	}
}

// outsideChange is a pre-apply plan check that changes the server behind
// Terraform's back, between the plan (which refreshed) and the apply, to
// prove that the apply does not overwrite it (If-Match).
type outsideChange func() error

var _ plancheck.PlanCheck = outsideChange(nil)

func (f outsideChange) CheckPlan(_ context.Context, _ plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	resp.Error = f()
}

// checkNoSecretInState fails when any attribute of any resource in the
// state contains one of secrets.
func checkNoSecretInState(secrets ...string) resource.TestCheckFunc {
	return func(st *terraform.State) error {
		for _, m := range st.Modules {
			for name, rs := range m.Resources {
				for k, v := range rs.Primary.Attributes {
					for _, s := range secrets {
						if strings.Contains(v, s) {
							return fmt.Errorf("%s.%s holds the secret %q", name, k, s)
						}
					}
				}
			}
		}
		return nil
	}
}

// jsonUnmarshal decodes a response body.
func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// checkSecretContains checks that the vault's secret under ref contains want.
func (s *testServer) checkSecretContains(t *testing.T, ref, want string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		if got := s.secret(t, ref); !strings.Contains(got, want) {
			return fmt.Errorf("vault %s does not hold the configured value", ref)
		}
		return nil
	}
}
