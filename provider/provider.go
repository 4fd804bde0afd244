// Package provider is the Switchboard Terraform provider, built on
// terraform-plugin-framework; it talks to the server only through client/.
//
// The layout follows hashicorp/terraform-provider-scaffolding-framework: one
// file per resource or data source, each with its acceptance test beside it.
package provider

//go:generate go tool tfplugindocs generate --provider-dir .. --provider-name switchboard --rendered-provider-name Switchboard

import (
	"context"
	"net/url"
	"os"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Environment variables the provider falls back to.
const (
	EnvEndpoint = "SWITCHBOARD_ENDPOINT"
	EnvAPIKey   = "SWITCHBOARD_API_KEY"
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

// providerModel is the provider block.
type providerModel struct {
	Endpoint types.String `tfsdk:"endpoint"`
	APIKey   types.String `tfsdk:"api_key"`
}

func (p *switchboardProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "switchboard"
	resp.Version = p.version
}

func (p *switchboardProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Manage [Switchboard](https://github.com/switchboard-dev/terraform-provider-switchboard) " +
			"connectors, actions, connections, webhooks and API keys as code, and read its model catalog.",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				MarkdownDescription: "Base URL of the Switchboard server, e.g. `http://127.0.0.1:8080` " +
					"(without `/v1`). Falls back to the `" + EnvEndpoint + "` environment variable.",
				Optional: true,
			},
			"api_key": schema.StringAttribute{
				MarkdownDescription: "API key (`sb_...`) with the scopes the managed resources need: " +
					"`connectors:write` for connectors, actions and connections, `webhooks:write` for webhooks, " +
					"`admin` for API keys, `llm` for the model data sources (`admin` grants them all). " +
					"Falls back to the `" + EnvAPIKey + "` environment variable.",
				Optional:  true,
				Sensitive: true,
			},
		},
	}
}

func (p *switchboardProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if cfg.Endpoint.IsUnknown() {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Unknown Switchboard endpoint",
			"The provider cannot be configured with an endpoint that is only known after apply. "+
				"Set it to a static value or use the "+EnvEndpoint+" environment variable.")
	}
	if cfg.APIKey.IsUnknown() {
		resp.Diagnostics.AddAttributeError(path.Root("api_key"), "Unknown Switchboard API key",
			"The provider cannot be configured with an API key that is only known after apply. "+
				"Set it to a static value or use the "+EnvAPIKey+" environment variable.")
	}
	if resp.Diagnostics.HasError() {
		return
	}

	endpoint := os.Getenv(EnvEndpoint)
	if !cfg.Endpoint.IsNull() {
		endpoint = cfg.Endpoint.ValueString()
	}
	apiKey := os.Getenv(EnvAPIKey)
	if !cfg.APIKey.IsNull() {
		apiKey = cfg.APIKey.ValueString()
	}
	endpoint = strings.TrimRight(strings.TrimSpace(endpoint), "/")
	apiKey = strings.TrimSpace(apiKey)

	if endpoint == "" {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Missing Switchboard endpoint",
			"Set endpoint in the provider block or the "+EnvEndpoint+" environment variable to the server's base URL, "+
				"e.g. http://127.0.0.1:8080.")
	} else if msg := checkEndpoint(endpoint); msg != "" {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Invalid Switchboard endpoint", msg)
	}
	if apiKey == "" {
		resp.Diagnostics.AddAttributeError(path.Root("api_key"), "Missing Switchboard API key",
			"Set api_key in the provider block or the "+EnvAPIKey+" environment variable to a Switchboard API key (sb_...).")
	}
	if resp.Diagnostics.HasError() {
		return
	}

	c, err := newAPIClient(endpoint, apiKey, p.version)
	if err != nil {
		resp.Diagnostics.AddError("Cannot create the Switchboard client", err.Error())
		return
	}
	cctx, report := watchThrottling(ctx)
	resp.Diagnostics.Append(c.check(cctx)...)
	report(&resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.ResourceData = c
	resp.DataSourceData = c
}

// checkEndpoint says what is wrong with an endpoint URL, or "".
func checkEndpoint(endpoint string) string {
	lower := strings.ToLower(endpoint)
	if !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") {
		return "The endpoint must be an absolute http:// or https:// URL, got " + endpoint
	}
	u, err := url.Parse(endpoint)
	switch {
	case err != nil:
		return "The endpoint " + endpoint + " is not a URL: " + err.Error()
	case u.Host == "":
		return "The endpoint " + endpoint + " has no host."
	case strings.HasSuffix(u.Path, "/v1"):
		return "The endpoint is the server's base URL without /v1 (the provider adds it), e.g. " +
			strings.TrimSuffix(endpoint, "/v1")
	case u.RawQuery != "" || u.Fragment != "":
		return "The endpoint must not carry a query or a fragment: " + endpoint
	}
	return ""
}

func (p *switchboardProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		NewAPIKeyResource,
		NewConnectorResource,
		NewActionResource,
		NewWebhookResource,
		NewConnectionResource,
		NewOAuthClientResource,
		NewToolsetResource,
	}
}

func (p *switchboardProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		NewModelsDataSource,
		NewModelDataSource,
		NewConnectorDataSource,
		NewUsageDataSource,
	}
}
