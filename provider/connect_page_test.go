package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
)

func TestHTTPSOrLoopback(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"https://cdn.example.com/logo.svg", true},
		{"http://localhost:8080/logo.png", true},
		{"http://127.0.0.1/logo.png", true},
		{"http://127.10.0.3/logo.png", true},
		{"http://[::1]:3000/logo.png", true},
		{"http://cdn.example.com/logo.png", false},
		{"http://10.0.0.1/logo.png", false},
		{"http://localhost.example.com/logo.png", false},
		// Not http: left to httpURL.
		{"ftp://cdn.example.com/logo.png", true},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			var resp validator.StringResponse
			httpsOrLoopback().ValidateString(context.Background(), validator.StringRequest{
				Path: path.Root("logo_url"), ConfigValue: types.StringValue(tt.url),
			}, &resp)
			if got := !resp.Diagnostics.HasError(); got != tt.ok {
				t.Errorf("accepted = %v, want %v (%v)", got, tt.ok, resp.Diagnostics)
			}
		})
	}
}

// TestConnectPageFromAPI: a connect page without any field is null in the
// state, as an unset connect_page is, so that no plan shows a diff.
func TestConnectPageFromAPI(t *testing.T) {
	s := func(v string) *string { return &v }
	tests := []struct {
		name string
		in   *client.ConnectPage
		want *connectPageModel
	}{
		{"absent", nil, nil},
		{"empty", &client.ConnectPage{}, nil},
		{"empty strings", &client.ConnectPage{LogoUrl: s(""), HelpText: s("")}, nil},
		{"partial", &client.ConnectPage{HelpText: s("Your key is under Settings.")}, &connectPageModel{
			LogoURL: types.StringNull(), HelpText: types.StringValue("Your key is under Settings."), TestAction: types.StringNull(),
		}},
		{"full", &client.ConnectPage{LogoUrl: s("https://cdn.example.com/l.svg"), HelpText: s("a\nb"), TestAction: s("whoami")}, &connectPageModel{
			LogoURL: types.StringValue("https://cdn.example.com/l.svg"), HelpText: types.StringValue("a\nb"), TestAction: types.StringValue("whoami"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := connectPageFromAPI(tt.in)
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Errorf("connectPageFromAPI = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestTypeList(t *testing.T) {
	for in, want := range map[string]string{
		"oauth2":                     "type oauth2",
		"apiKey bearer basic oauth2": "types apiKey, bearer, basic or oauth2",
	} {
		if got := typeList(strings.Fields(in)); got != want {
			t.Errorf("typeList(%q) = %q, want %q", in, got, want)
		}
	}
}
