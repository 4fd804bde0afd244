// Package provider is the Switchboard Terraform provider, built on
// terraform-plugin-framework; it talks to the server only through client/.
package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// switchboardProvider is the provider implementation.
type switchboardProvider struct {
	version string
}

var _ provider.Provider = (*switchboardProvider)(nil)

// New returns a constructor of the provider at the given version.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &switchboardProvider{version: version} }
}

func (p *switchboardProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "switchboard"
	resp.Version = p.version
}

func (p *switchboardProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Manage Switchboard connectors, actions, connections, webhooks and API keys as code.",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				MarkdownDescription: "Base URL of the Switchboard server, e.g. `http://127.0.0.1:8080`. Falls back to `SWITCHBOARD_ENDPOINT`.",
				Optional:            true,
			},
			"api_key": schema.StringAttribute{
				MarkdownDescription: "API key with the scopes the managed resources need. Falls back to `SWITCHBOARD_API_KEY`.",
				Optional:            true,
				Sensitive:           true,
			},
		},
	}
}

func (p *switchboardProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}

func (p *switchboardProvider) Resources(context.Context) []func() resource.Resource { return nil }

func (p *switchboardProvider) DataSources(context.Context) []func() datasource.DataSource { return nil }
