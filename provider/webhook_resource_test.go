package provider

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
)

// allowLoopback lets the server's egress guard reach test receivers.
func allowLoopback(c *config.Config) { c.Egress.Allow = append(c.Egress.Allow, "127.0.0.0/8") }

// receiver is a webhook receiver on loopback that keeps what arrives.
type receiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []delivery
	new chan struct{}
}

// delivery is one request a receiver got.
type delivery struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{new: make(chan struct{}, 100)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, delivery{header: req.Header.Clone(), body: b})
		r.mu.Unlock()
		r.new <- struct{}{}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

// checkSignedWith sends a webhook.test event through the server and checks,
// with the independent Standard Webhooks library, that the delivery is
// signed with secret: the write-only (or generated) secret is the one the
// server signs with.
func (s *testServer) checkSignedWith(t *testing.T, r *receiver, id string, secret func(*terraform.State) string) resource.TestCheckFunc {
	return func(st *terraform.State) error {
		sec := secret(st)
		res, err := s.api.TestWebhookWithResponse(context.Background(), id2(st, id))
		if err != nil {
			return err
		}
		if res.StatusCode() != http.StatusAccepted {
			return fmt.Errorf("test webhook: %d %s", res.StatusCode(), res.Body)
		}
		deadline := time.After(20 * time.Second)
		for {
			r.mu.Lock()
			var last *delivery
			for i := range r.got {
				if strings.Contains(string(r.got[i].body), `"webhook.test"`) {
					last = &r.got[i]
				}
			}
			if last != nil {
				r.got = nil
			}
			r.mu.Unlock()
			if last != nil {
				v, err := standardwebhooks.NewWebhook(sec)
				if err != nil {
					return err
				}
				if err := v.Verify(last.body, last.header); err != nil {
					return fmt.Errorf("the delivery is not signed with the expected secret: %v", err)
				}
				return nil
			}
			select {
			case <-r.new:
			case <-deadline:
				return fmt.Errorf("no webhook.test delivery within 20s")
			}
		}
	}
}

// id2 is the id attribute of the resource address in st.
func id2(st *terraform.State, addr string) string {
	return st.RootModule().Resources[addr].Primary.Attributes["id"]
}

// stateAttr reads an attribute of a resource in st.
func stateAttr(addr, attr string) func(*terraform.State) string {
	return func(st *terraform.State) string { return st.RootModule().Resources[addr].Primary.Attributes[attr] }
}

// fixed returns a constant.
func fixed(s string) func(*terraform.State) string { return func(*terraform.State) string { return s } }

// newWebhookSecret is a fresh Standard Webhooks secret.
func newWebhookSecret(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

func TestAccWebhookResource(t *testing.T) {
	s := testAccServer(t, allowLoopback)
	rcv := newReceiver(t)
	const res = "switchboard_webhook.test"
	s1, s2 := newWebhookSecret(t), newWebhookSecret(t)
	cfg := func(events, extra string) string {
		return s.config(fmt.Sprintf(`
resource "switchboard_webhook" "test" {
  url    = "%s/hooks"
  events = %s
%s
}
`, rcv.URL, events, extra))
	}
	generated := statecheck.CompareValue(compare.ValuesSame())
	version := func(v int64) statecheck.StateCheck {
		return statecheck.ExpectKnownValue(res, tfjsonpath.New("version"), knownvalue.Int64Exact(v))
	}
	secretNull := statecheck.ExpectKnownValue(res, tfjsonpath.New("secret"), knownvalue.Null())

	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             s.checkWebhooksGone,
		Steps: []resource.TestStep{
			{
				// A generated secret, exposed once as a sensitive value.
				Config: cfg(`["connector.created"]`, `description = "CI notifications"`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("id"), knownvalue.StringRegexp(webhookIDPattern)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("secret"), knownvalue.StringRegexp(regexp.MustCompile(`^whsec_`))),
					statecheck.ExpectSensitiveValue(res, tfjsonpath.New("secret")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("enabled"), knownvalue.Bool(true)),
					generated.AddStateValue(res, tfjsonpath.New("secret")),
					version(1),
				},
				Check: s.checkSignedWith(t, rcv, res, stateAttr(res, "secret")),
			},
			{
				// In place; the generated secret stays.
				Config: cfg(`["*", "action.failed"]`, `description = "Everything"`+"\n"+`enabled = false`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					version(2),
					generated.AddStateValue(res, tfjsonpath.New("secret")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("enabled"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("events"), knownvalue.SetExact([]knownvalue.Check{
						knownvalue.StringExact("*"), knownvalue.StringExact("action.failed"),
					})),
				},
			},
			{
				// Your own secret, write-only: it signs, and the state never holds it.
				Config: cfg(`["*"]`, fmt.Sprintf("secret_wo = %q\nsecret_wo_version = 1", s1)),
				ConfigStateChecks: []statecheck.StateCheck{
					secretNull,
					statecheck.ExpectKnownValue(res, tfjsonpath.New("secret_wo"), knownvalue.Null()),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("description"), knownvalue.Null()),
				},
				Check: resource.ComposeTestCheckFunc(
					s.checkSignedWith(t, rcv, res, fixed(s1)),
					checkNoSecretInState(s1),
				),
			},
			{
				// A new version rotates to the new secret.
				Config:            cfg(`["*"]`, fmt.Sprintf("secret_wo = %q\nsecret_wo_version = 2", s2)),
				ConfigStateChecks: []statecheck.StateCheck{secretNull},
				Check: resource.ComposeTestCheckFunc(
					s.checkSignedWith(t, rcv, res, fixed(s2)),
					checkNoSecretInState(s1, s2),
				),
			},
			{
				ResourceName:            res,
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"secret_wo_version"},
			},
			{
				// Back to a generated secret: rotated, and known again.
				Config: cfg(`["*"]`, ""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("secret"), knownvalue.StringRegexp(regexp.MustCompile(`^whsec_`))),
				},
				Check: s.checkSignedWith(t, rcv, res, stateAttr(res, "secret")),
			},
			{
				// Deleted outside Terraform: planned for creation again.
				PreConfig: func() { s.deleteWebhooks(t) },
				Config:    cfg(`["*"]`, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionCreate)},
				},
			},
		},
	})
}

func TestAccWebhookResource_validation(t *testing.T) {
	s := testAccServer(t)
	step := func(body, want string) resource.TestStep {
		return resource.TestStep{
			Config:      s.config("resource \"switchboard_webhook\" \"bad\" {\n" + body + "\n}"),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(want),
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			step(`url = "hooks.example.com"`+"\n"+`events = ["*"]`, `absolute http:// or https:// URL`),
			step(`url = "https://hooks.example.com/#x"`+"\n"+`events = ["*"]`, `must not have a fragment`),
			step(`url = "https://hooks.example.com/"`+"\n"+`events = ["connector.exploded"]`, `value must be one of`),
			step(`url = "https://hooks.example.com/"`+"\n"+`events = []`, `at least 1`),
			step(`url = "https://hooks.example.com/"`+"\n"+`events = ["*"]`+"\n"+`secret_wo = "hunter2"`, `must be whsec_ followed by`),
			step(`url = "https://hooks.example.com/"`+"\n"+`events = ["*"]`+"\n"+`secret_wo_version = 1`, `secret_wo`),
		},
	})
}

// deleteWebhooks deletes every webhook behind Terraform's back.
func (s *testServer) deleteWebhooks(t *testing.T) {
	res, err := s.api.ListWebhooksWithResponse(context.Background(), nil)
	if err != nil || res.JSON200 == nil {
		t.Fatal("list webhooks: ", err)
	}
	for _, w := range res.JSON200.Data {
		d, err := s.api.DeleteWebhookWithResponse(context.Background(), w.Id, nil)
		if err != nil || d.StatusCode() != http.StatusNoContent {
			t.Fatal("delete webhook ", w.Id, err)
		}
	}
}

// checkWebhooksGone is the CheckDestroy of webhooks.
func (s *testServer) checkWebhooksGone(*terraform.State) error {
	res, err := s.api.ListWebhooksWithResponse(context.Background(), nil)
	if err != nil {
		return err
	}
	if res.JSON200 == nil {
		return fmt.Errorf("list webhooks: %d %s", res.StatusCode(), res.Body)
	}
	if n := len(res.JSON200.Data); n > 0 {
		return fmt.Errorf("%d webhooks left after destroy", n)
	}
	return nil
}

// TestAccWebhookResource_modelEvents: a webhook may subscribe to the model
// service's events.
func TestAccWebhookResource_modelEvents(t *testing.T) {
	s := testAccServer(t)
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: s.config(`
resource "switchboard_webhook" "spend" {
  url    = "https://hooks.example.com/spend"
  events = ["usage.budget_alert", "usage.budget_exhausted", "llm.provider_unhealthy", "llm.request.completed", "api_key.updated"]
}
`),
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
		}},
	})
}

// TestAccWebhookResource_connectionUpdated: a webhook may subscribe to
// connection.updated, and receives it when a connection's credentials are
// replaced (credentials_wo_version changed), after connection.created.
func TestAccWebhookResource_connectionUpdated(t *testing.T) {
	s := testAccServer(t, allowLoopback)
	rcv := newReceiver(t)
	cfg := func(keyVersion int) string {
		return s.config(fmt.Sprintf(`
resource "switchboard_webhook" "connections" {
  url    = "%s/hooks"
  events = ["connection.created", "connection.updated"]
}

resource "switchboard_connector" "crm" {
  name       = "crm"
  base_url   = "https://api.crm.example"
  depends_on = [switchboard_webhook.connections]
  auth = {
    type = "bearer"
  }
}

resource "switchboard_connection" "acme" {
  connector              = switchboard_connector.crm.name
  name                   = "acme"
  token_wo               = "token-%d"
  credentials_wo_version = %d
}
`, rcv.URL, keyVersion, keyVersion))
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             s.checkWebhooksGone,
		Steps: []resource.TestStep{
			{
				Config: cfg(1),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("switchboard_webhook.connections", tfjsonpath.New("events"), knownvalue.SetExact([]knownvalue.Check{
						knownvalue.StringExact("connection.created"), knownvalue.StringExact("connection.updated"),
					})),
				},
				Check: func(*terraform.State) error { return rcv.waitForEvent("connection.created", "crm", "acme") },
			},
			{
				Config: cfg(2),
				Check:  func(*terraform.State) error { return rcv.waitForEvent("connection.updated", "crm", "acme") },
			},
		},
	})
}

// waitForEvent waits up to 20 s for a delivery of an event of type typ
// about the connection connector/name.
func (r *receiver) waitForEvent(typ, connector, name string) error {
	deadline := time.After(20 * time.Second)
	for {
		r.mu.Lock()
		for _, d := range r.got {
			var ev struct {
				Type string `json:"type"`
				Data struct {
					Connector string `json:"connector"`
					Name      string `json:"name"`
				} `json:"data"`
			}
			if jsonUnmarshal(d.body, &ev) == nil && ev.Type == typ && ev.Data.Connector == connector && ev.Data.Name == name {
				r.mu.Unlock()
				return nil
			}
		}
		r.mu.Unlock()
		select {
		case <-r.new:
		case <-deadline:
			return fmt.Errorf("no %s delivery for connection %s/%s within 20s", typ, connector, name)
		}
	}
}
