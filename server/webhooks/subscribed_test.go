package webhooks_test

import (
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/webhooks"
)

// TestSubscribed: the answer follows every webhook write (create, replace,
// disable, delete); "*" covers every type but the opt-in ones.
func TestSubscribed(t *testing.T) {
	s, _ := newService(t, config.Webhooks{}, nil)
	check := func(step string, want map[string]bool) {
		t.Helper()
		for typ, w := range want {
			if got := s.Subscribed(typ); got != w {
				t.Errorf("%s: Subscribed(%s) = %v, want %v", step, typ, got, w)
			}
		}
	}
	check("no webhook", map[string]bool{events.LLMRequestCompleted: false, events.ConnectorCreated: false})
	w, _, err := s.Create(ctx, webhooks.Input{URL: "http://127.0.0.1:9/h", Events: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	check("a \"*\" webhook", map[string]bool{events.LLMRequestCompleted: false, events.ConnectorCreated: true, events.ActionInvoked: false})
	if _, err := s.Replace(ctx, w.ID, webhooks.Input{URL: "http://127.0.0.1:9/h", Events: []string{"*", events.LLMRequestCompleted}}, nil); err != nil {
		t.Fatal(err)
	}
	check("listing the opt-in type", map[string]bool{events.LLMRequestCompleted: true, events.ActionInvoked: false})
	off := false
	if _, err := s.Replace(ctx, w.ID, webhooks.Input{URL: "http://127.0.0.1:9/h", Events: []string{events.LLMRequestCompleted}, Enabled: &off}, nil); err != nil {
		t.Fatal(err)
	}
	check("disabled", map[string]bool{events.LLMRequestCompleted: false})
	if _, err := s.Replace(ctx, w.ID, webhooks.Input{URL: "http://127.0.0.1:9/h", Events: []string{events.LLMRequestCompleted}}, nil); err != nil {
		t.Fatal(err)
	}
	check("enabled again", map[string]bool{events.LLMRequestCompleted: true})
	if err := s.Delete(ctx, w.ID, nil); err != nil {
		t.Fatal(err)
	}
	check("deleted", map[string]bool{events.LLMRequestCompleted: false})
}
