package tools_test

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/tools"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestName(t *testing.T) {
	long := strings.Repeat("c", 64)
	tests := []struct {
		name, connector, action, want string
	}{
		{"short", "weather", "forecast", "weather-forecast"},
		{"exactly 64", strings.Repeat("a", 31), strings.Repeat("b", 32), strings.Repeat("a", 31) + "-" + strings.Repeat("b", 32)},
		{"truncated with a hash", long, "list_everything", long[:55] + "-"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tools.Name(tc.connector, tc.action)
			if !strings.HasPrefix(got, tc.want) || !toolNameRE.MatchString(got) {
				t.Errorf("Name = %q, want prefix %q within [a-zA-Z0-9_-]{1,64}", got, tc.want)
			}
			if again := tools.Name(tc.connector, tc.action); again != got {
				t.Errorf("Name is not deterministic: %q then %q", got, again)
			}
		})
	}
	if a, b := tools.Name(long, "list_a"), tools.Name(long, "list_b"); a == b || len(a) != 64 {
		t.Errorf("two long names: %q and %q, want different, 64 characters", a, b)
	}
}

func newStore(t *testing.T) (store.Store, *connectors.Service) {
	t.Helper()
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	v, err := vault.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	return st, &connectors.Service{Store: st, Vault: v}
}

func TestCatalog(t *testing.T) {
	st, svc := newStore(t)
	ctx := context.Background()
	long := strings.Repeat("x", 60)
	for _, c := range []string{"b", "a_b", "a", long} {
		if _, err := svc.CreateConnector(ctx, connectors.Connector{Name: c, DisplayName: strings.ToUpper(c), BaseURL: "https://example.com"}); err != nil {
			t.Fatal(err)
		}
	}
	add := func(c string, a connectors.Action) {
		t.Helper()
		if _, err := svc.CreateAction(ctx, c, a); err != nil {
			t.Fatal(err)
		}
	}
	add("b", connectors.Action{Name: "get", Method: "GET", Path: "/x/{{params.id}}", Description: "Get one.",
		Parameters: map[string]connectors.Parameter{"id": {Type: "string", Required: true}, "tags": {Type: "array"}, "n": {Type: "integer", Enum: []any{float64(1), float64(2)}}}})
	add("b", connectors.Action{Name: "del", Method: "DELETE", Path: "/x"})
	add("a_b", connectors.Action{Name: "post", Method: "POST", Path: "/x"})
	add("a", connectors.Action{Name: "put", Method: "PUT", Path: "/x"})
	add(long, connectors.Action{Name: "one_long_action_name", Method: "GET", Path: "/x"})
	add(long, connectors.Action{Name: "another_long_action", Method: "GET", Path: "/x"})

	cat := &tools.Catalog{Store: st}
	all, err := cat.For(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var refs, names []string
	for _, tl := range all {
		refs = append(refs, tl.Ref())
		names = append(names, tl.Name)
		if !toolNameRE.MatchString(tl.Name) {
			t.Errorf("tool name %q is not [a-zA-Z0-9_-]{1,64}", tl.Name)
		}
	}
	wantRefs := []string{"a.put", "a_b.post", "b.del", "b.get", long + ".another_long_action", long + ".one_long_action_name"}
	if !slices.Equal(refs, wantRefs) {
		t.Errorf("order = %v, want %v", refs, wantRefs)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(names)))) != len(names) {
		t.Errorf("names collide: %v", names)
	}

	t.Run("schema and hints", func(t *testing.T) {
		get := all[3]
		if get.Title != "B: get" || get.Description != "Get one." || !get.ReadOnly || !get.Idempotent || get.Destructive {
			t.Errorf("b.get = %+v", get)
		}
		props := get.InputSchema["properties"].(map[string]any)
		if props["tags"].(map[string]any)["items"] == nil || props["n"].(map[string]any)["enum"] == nil {
			t.Errorf("schema properties = %v", props)
		}
		if req := get.InputSchema["required"].([]string); !slices.Equal(req, []string{"id"}) {
			t.Errorf("required = %v", req)
		}
		del := all[2]
		if !del.Destructive || del.ReadOnly || !strings.Contains(del.Description, "DELETE /x") {
			t.Errorf("b.del = %+v", del)
		}
	})
	t.Run("policy and selection narrow", func(t *testing.T) {
		p := &auth.Principal{ID: "key_1", Policy: auth.Policy{Connectors: []string{"b", "a.put"}}}
		got, err := cat.For(ctx, p, tools.Select([]string{"b.get", "a", "a_b.*"}))
		if err != nil {
			t.Fatal(err)
		}
		var refs []string
		for _, tl := range got {
			refs = append(refs, tl.Ref())
		}
		if want := []string{"a.put", "b.get"}; !slices.Equal(refs, want) {
			t.Errorf("tools = %v, want %v", refs, want)
		}
		if _, err := cat.Lookup(ctx, p, nil, "a_b-post"); !errors.Is(err, errs.Forbidden) {
			t.Errorf("lookup outside the policy = %v, want forbidden", err)
		}
		if _, err := cat.Lookup(ctx, nil, tools.Select([]string{"a"}), "b-get"); !errors.Is(err, errs.NotFound) {
			t.Errorf("lookup outside the selection = %v, want not found", err)
		}
	})
	t.Run("changes are seen", func(t *testing.T) {
		add("a", connectors.Action{Name: "added", Method: "GET", Path: "/x"})
		if _, err := cat.Lookup(ctx, nil, nil, "a-added"); err != nil {
			t.Errorf("new action: %v", err)
		}
		if err := svc.DeleteAction(ctx, "a", "added", 0); err != nil {
			t.Fatal(err)
		}
		if _, err := cat.Lookup(ctx, nil, nil, "a-added"); !errors.Is(err, errs.NotFound) {
			t.Errorf("deleted action: %v", err)
		}
	})
}

func TestConnection(t *testing.T) {
	bound := &auth.Principal{ID: "key_1", Connection: "alice"}
	tests := []struct {
		name      string
		p         *auth.Principal
		requested string
		want      string
		wantErr   errs.Kind
	}{
		{"default", &auth.Principal{}, "", "default", ""},
		{"requested", &auth.Principal{}, "bob", "bob", ""},
		{"bound", bound, "", "alice", ""},
		{"bound and asked for itself", bound, "alice", "alice", ""},
		{"bound and asked for another", bound, "bob", "", errs.Forbidden},
		{"not a connection name", &auth.Principal{}, "../x", "", errs.Invalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tools.Connection(tc.p, tc.requested)
			if got != tc.want || (err != nil || tc.wantErr != "") && errs.KindOf(err) != tc.wantErr {
				t.Errorf("Connection = %q, %v; want %q, %s", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
