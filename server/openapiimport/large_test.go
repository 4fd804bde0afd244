package openapiimport_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/openapiimport"
)

// largeSpec reads one of the large real-world descriptions that
// scripts/fetch-specs.sh puts in .cache/specs (or $SWITCHBOARD_SPECS_DIR).
// A missing one fails the test, except under -short.
func largeSpec(t *testing.T, name string) []byte {
	t.Helper()
	dir := os.Getenv("SWITCHBOARD_SPECS_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", ".cache", "specs")
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		if testing.Short() {
			t.Skipf("%s: %v (-short)", name, err)
		}
		t.Fatalf("%s is missing (%v): run ./scripts/fetch-specs.sh, or make test, which runs it", name, err)
	}
	return b
}

func TestImport_LargeRealWorldDescriptions(t *testing.T) {
	tests := []struct {
		name, file string
		opts       openapiimport.Options
		actions    int
		skipped    map[string]string // operation → part of the reason
		first      []string
		namesHash  string // sha256 of the action names, one a line
	}{
		{
			name: "GitHub REST API (OpenAPI 3.0, @octokit/openapi 23.0.2)", file: "github.json",
			opts:    openapiimport.Options{Connector: "github"},
			actions: 1221,
			skipped: map[string]string{
				"POST /markdown/raw": "text/plain, text/x-markdown only",
				"POST /repos/{owner}/{repo}/releases/{release_id}/assets": "application/octet-stream only",
			},
			first:     []string{"meta_root", "security_advisories_list_global_advisories", "security_advisories_get_global_advisory"},
			namesHash: "be6030068bdeb3bd58a824f6830fcb6fe4bd227583462e0c50a09ae4bb34fc16",
		},
		{
			name: "Kubernetes 1.13 (Swagger 2.0, kubernetes-client 9.0.0)", file: "kubernetes.json",
			opts:      openapiimport.Options{Connector: "kubernetes", BaseURL: "https://kubernetes.example.com"},
			actions:   1014,
			skipped:   map[string]string{},
			first:     []string{"get_core_api_versions", "get_core_v1_api_resources", "list_core_v1_component_status"},
			namesHash: "a19f546452ccf31ec2a432bb61c4a4f5368103bb0931aaac6952d4713b411386",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := openapiimport.Import(bg, largeSpec(t, tc.file), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, res)
			if len(res.Actions) != tc.actions {
				t.Errorf("%d actions, want %d", len(res.Actions), tc.actions)
			}
			if len(res.Skipped) != len(tc.skipped) {
				t.Errorf("skipped %+v, want %d", res.Skipped, len(tc.skipped))
			}
			for _, s := range res.Skipped {
				if want, ok := tc.skipped[s.Operation]; !ok || !strings.Contains(s.Reason, want) {
					t.Errorf("skipped %s: %q, want it with %q", s.Operation, s.Reason, want)
				}
			}
			got := names(res)
			if len(got) < len(tc.first) || !slices.Equal(got[:len(tc.first)], tc.first) {
				t.Errorf("first actions %v, want %v", got[:min(len(got), len(tc.first))], tc.first)
			}
			sum := sha256.Sum256([]byte(strings.Join(got, "\n")))
			if h := hex.EncodeToString(sum[:]); h != tc.namesHash {
				t.Errorf("action names hash %s, want %s: the names changed; if on purpose, update the golden", h, tc.namesHash)
			}
		})
	}
}
