package provider

import (
	"context"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework-timetypes/timetypes"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

var (
	_ datasource.DataSource              = (*connectorDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*connectorDataSource)(nil)
)

// NewConnectorDataSource is the switchboard_connector data source.
func NewConnectorDataSource() datasource.DataSource { return &connectorDataSource{} }

// connectorDataSource reads one connector, e.g. one managed elsewhere.
type connectorDataSource struct {
	api *apiClient
}

// connectorDataModel is the data source's state.
type connectorDataModel struct {
	ID          types.String      `tfsdk:"id"`
	Name        types.String      `tfsdk:"name"`
	DisplayName types.String      `tfsdk:"display_name"`
	Description types.String      `tfsdk:"description"`
	BaseURL     types.String      `tfsdk:"base_url"`
	Auth        *authDataModel    `tfsdk:"auth"`
	ConnectPage *connectPageModel `tfsdk:"connect_page"`
	Version     types.Int64       `tfsdk:"version"`
	CreatedAt   timetypes.RFC3339 `tfsdk:"created_at"`
	UpdatedAt   timetypes.RFC3339 `tfsdk:"updated_at"`
}

// authDataModel is a connector's auth as read (no secret).
type authDataModel struct {
	Type             types.String `tfsdk:"type"`
	Name             types.String `tfsdk:"name"`
	In               types.String `tfsdk:"in"`
	Prefix           types.String `tfsdk:"prefix"`
	AuthorizationURL types.String `tfsdk:"authorization_url"`
	TokenURL         types.String `tfsdk:"token_url"`
	ClientID         types.String `tfsdk:"client_id"`
	Scopes           types.List   `tfsdk:"scopes"`
	Grant            types.String `tfsdk:"grant"`
	ClientAuth       types.String `tfsdk:"client_auth"`
	AuthzParams      types.Map    `tfsdk:"authorization_params"`
	TokenParams      types.Map    `tfsdk:"token_params"`
	RedirectURLs     types.List   `tfsdk:"redirect_urls"`
	ClientSecretSet  types.Bool   `tfsdk:"client_secret_set"`
}

func (d *connectorDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_connector"
}

func (d *connectorDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	computed := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{MarkdownDescription: desc, Computed: true}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "One connector, read by name (for example a connector managed by another configuration). " +
			"Never shows its client secret, only whether one is stored. Needs `connectors:read` or `connectors:write`.",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{
				MarkdownDescription: "The connector's name.",
				Required:            true,
				Validators:          identifierValidators(),
			},
			"id":           computed("The connector's name."),
			"display_name": computed("The human name; null when none."),
			"description":  computed("What the API is; null when none."),
			"base_url":     computed("The URL action paths are joined to."),
			"auth": schema.SingleNestedAttribute{
				MarkdownDescription: "How the API authenticates calls.",
				Computed:            true,
				Attributes: map[string]schema.Attribute{
					"type":              computed("`none`, `apiKey`, `bearer`, `basic` or `oauth2`."),
					"name":              computed("`apiKey`: the header, query parameter or cookie carrying the key."),
					"in":                computed("`apiKey`: `header`, `query` or `cookie`."),
					"prefix":            computed("`apiKey`: text sent before the key."),
					"authorization_url": computed("`oauth2`: the authorization endpoint."),
					"token_url":         computed("`oauth2`: the token endpoint."),
					"client_id":         computed("`oauth2`: the client id."),
					"grant":             computed("`oauth2`: `authorization_code` or `client_credentials`."),
					"client_auth":       computed("`oauth2`: `basic` or `body`; null for the server's default (basic)."),
					"authorization_params": schema.MapAttribute{
						MarkdownDescription: "`oauth2`: extra query parameters of the authorization URL.",
						ElementType:         types.StringType,
						Computed:            true,
					},
					"token_params": schema.MapAttribute{
						MarkdownDescription: "`oauth2`: extra form parameters of token requests.",
						ElementType:         types.StringType,
						Computed:            true,
					},
					"redirect_urls": schema.ListAttribute{
						MarkdownDescription: "`apiKey`, `bearer`, `basic`, `oauth2` (authorization_code): where the browser may return after connecting an account.",
						ElementType:         types.StringType,
						Computed:            true,
					},
					"scopes": schema.ListAttribute{
						MarkdownDescription: "`oauth2`: the scopes requested.",
						ElementType:         types.StringType,
						Computed:            true,
					},
					"client_secret_set": schema.BoolAttribute{
						MarkdownDescription: "`oauth2`: whether a client secret is stored (the secret itself is never shown).",
						Computed:            true,
					},
				},
			},
			"connect_page": schema.SingleNestedAttribute{
				MarkdownDescription: "How the hosted connect page presents the connector; null when the server's plain page is used.",
				Computed:            true,
				Attributes: map[string]schema.Attribute{
					"logo_url":    computed("The logo shown on the page."),
					"help_text":   computed("Plain text shown under the form."),
					"test_action": computed("The action the page runs with entered credentials before storing them."),
				},
			},
			"version":    schema.Int64Attribute{MarkdownDescription: "The server's version of the connector.", Computed: true},
			"created_at": schema.StringAttribute{MarkdownDescription: "When the connector was created (RFC 3339).", CustomType: timetypes.RFC3339Type{}, Computed: true},
			"updated_at": schema.StringAttribute{MarkdownDescription: "When the connector was last changed (RFC 3339).", CustomType: timetypes.RFC3339Type{}, Computed: true},
		},
	}
}

func (d *connectorDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.api = configuredClient(req.ProviderData, &resp.Diagnostics)
}

func (d *connectorDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	ctx, report := watchThrottling(ctx)
	defer report(&resp.Diagnostics)
	var m connectorDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := m.Name.ValueString()
	res, err := d.api.GetConnectorWithResponse(ctx, name)
	if err != nil {
		d.api.addTransportError(&resp.Diagnostics, "read connector "+name, err)
		return
	}
	if res.JSON200 == nil {
		if res.StatusCode() == http.StatusNotFound {
			resp.Diagnostics.AddAttributeError(path.Root("name"), "Connector not found", "The server has no connector named "+name+".")
			return
		}
		d.api.addResponseError(&resp.Diagnostics, "read connector "+name, res.StatusCode(), res.Body)
		return
	}
	c := res.JSON200
	var rm connectorModel
	rm.fill(ctx, c, &resp.Diagnostics)
	m.ID, m.DisplayName, m.Description, m.BaseURL = rm.ID, rm.DisplayName, rm.Description, rm.BaseURL
	m.Version, m.CreatedAt, m.UpdatedAt = rm.Version, rm.CreatedAt, rm.UpdatedAt
	m.ConnectPage = rm.ConnectPage
	a := authFromAPI(ctx, c.Auth, &authModel{}, &resp.Diagnostics)
	m.Auth = &authDataModel{
		Type: a.Type, Name: a.Name, In: a.In, Prefix: a.Prefix, AuthorizationURL: a.AuthorizationURL,
		TokenURL: a.TokenURL, ClientID: a.ClientID, Scopes: a.Scopes, Grant: a.Grant, ClientAuth: a.ClientAuth,
		AuthzParams: a.AuthorizationParams, TokenParams: a.TokenParams, RedirectURLs: a.RedirectURLs,
		ClientSecretSet: types.BoolValue(c.Auth.ClientSecretSet != nil && *c.Auth.ClientSecretSet),
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
