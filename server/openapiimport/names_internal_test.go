package openapiimport

import (
	"strings"
	"testing"
)

func TestActionName(t *testing.T) {
	long := strings.Repeat("VeryLong", 12)
	tests := []struct{ id, method, path, want string }{
		{"repos/get-content", "GET", "/x", "repos_get_content"},
		{"listCoreV1NamespacedPod", "GET", "/x", "list_core_v1_namespaced_pod"},
		{"getHTTPStatus", "GET", "/x", "get_http_status"},
		{"Get_Pet__ById", "GET", "/x", "get_pet_by_id"},
		{"3dModels.list", "GET", "/x", "op_3d_models_list"},
		{"", "DELETE", "/pets/{pet-id}/visits", "delete_pets_pet_id_visits"},
		{"日本", "GET", "/", "get"},
		{long, "GET", "/x", "very_long_very_long_very_long_very_long_very_long_very_e6975e8f"},
	}
	for _, tc := range tests {
		t.Run(tc.id+tc.path, func(t *testing.T) {
			got := actionName(tc.id, tc.method, tc.path)
			if got != tc.want || len(got) > maxName {
				t.Errorf("actionName(%q) = %q, want %q", tc.id, got, tc.want)
			}
		})
	}
}

func TestUniqueName_NumbersCollisions(t *testing.T) {
	used := map[string]bool{}
	got := []string{uniqueName("a", used), uniqueName("a", used), uniqueName("a", used)}
	if strings.Join(got, ",") != "a,a_2,a_3" {
		t.Errorf("got %v", got)
	}
}

func TestParamName(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"per_page", "per_page", true},
		{"per-page", "per_page", true},
		{"filter[state]", "filter_state", true},
		{"$top", "top", true},
		{"X-GitHub-Api-Version", "X_GitHub_Api_Version", true},
		{"2fa", "p_2fa", true},
		{"@@", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := paramName(tc.in)
			if got != tc.want || ok != tc.ok {
				t.Errorf("paramName(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}
