package provider

import (
	"context"
	"fmt"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-timetypes/timetypes"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
)

var (
	_ resource.Resource                = (*oauthClientResource)(nil)
	_ resource.ResourceWithConfigure   = (*oauthClientResource)(nil)
	_ resource.ResourceWithImportState = (*oauthClientResource)(nil)
)

// oauthClientIDPattern is the server's client id format.
var oauthClientIDPattern = regexp.MustCompile(`^oc_[0-9a-f]{32}$`)

// NewOAuthClientResource is the switchboard_oauth_client resource.
func NewOAuthClientResource() resource.Resource {
	return &oauthClientResource{crud[oauthClientModel, client.OAuthClient]{
		typeName: "oauth_client", kind: "OAuth client",
		label: func(m *oauthClientModel) string { return idOr(m.ID, m.Name.ValueString()) },
		fill:  (*oauthClientModel).fill,
		create: func(ctx context.Context, api *apiClient, plan *oauthClientModel, _ tfsdk.Config, diags *diag.Diagnostics) (*client.OAuthClient, error) {
			p := plan.toAPI(ctx, diags)
			body := client.OAuthClientCreate{Name: plan.Name.ValueString(), Scopes: scopesToAPI(ctx, plan.Scopes, diags),
				RateLimit: p.RateLimit, Models: p.Models, Connectors: p.Connectors, Budget: p.Budget}
			if diags.HasError() {
				return nil, nil
			}
			res, err := api.CreateOAuthClientWithResponse(ctx, body)
			if err != nil {
				return nil, err
			}
			c, err := answered(res.JSON201, res.StatusCode(), res.Body)
			if err != nil {
				return nil, err
			}
			// The secret is in this answer only.
			plan.ClientSecret = types.StringValue(c.ClientSecret)
			return &client.OAuthClient{
				Id: c.Id, Name: c.Name, Scopes: c.Scopes, CreatedAt: c.CreatedAt, Version: c.Version,
				RateLimit: c.RateLimit, Models: c.Models, Connectors: c.Connectors, Budget: c.Budget,
			}, nil
		},
		get: func(ctx context.Context, api *apiClient, m *oauthClientModel) (*client.OAuthClient, error) {
			res, err := api.GetOAuthClientWithResponse(ctx, m.ID.ValueString())
			if err != nil {
				return nil, err
			}
			return answered(res.JSON200, res.StatusCode(), res.Body)
		},
		// The name and the policy change in place: the secret and the
		// client's tokens stay valid, and the tokens follow the new policy.
		update: func(ctx context.Context, api *apiClient, plan, state *oauthClientModel, _ tfsdk.Config, diags *diag.Diagnostics) (*client.OAuthClient, error) {
			p := plan.toAPI(ctx, diags)
			if diags.HasError() {
				return nil, nil
			}
			res, err := api.UpdateOAuthClientWithResponse(ctx, state.ID.ValueString(), &client.UpdateOAuthClientParams{IfMatch: etag(state.Version)},
				client.OAuthClientUpdate{Name: plan.Name.ValueString(), RateLimit: p.RateLimit, Models: p.Models, Connectors: p.Connectors, Budget: p.Budget})
			if err != nil {
				return nil, err
			}
			return answered(res.JSON200, res.StatusCode(), res.Body)
		},
		remove: func(ctx context.Context, api *apiClient, m *oauthClientModel) error {
			res, err := api.DeleteOAuthClientWithResponse(ctx, m.ID.ValueString())
			if err != nil {
				return err
			}
			return deleted(res.StatusCode(), res.Body)
		},
		// A client is imported by its id (`oc_...`); its secret stays
		// unknown to Terraform (null), as the server no longer has it.
		importID: func(id string) (map[string]attr.Value, string) {
			if !oauthClientIDPattern.MatchString(id) {
				return nil, fmt.Sprintf("An OAuth client is imported by its client_id, oc_ followed by 32 hex digits (see GET /v1/oauth-clients), got %q. "+
					"The secret (sbcs_...) is not an id.", id)
			}
			return map[string]attr.Value{"id": types.StringValue(id)}, ""
		},
	}}
}

// oauthClientResource manages one OAuth client of Switchboard's own token
// endpoint (client-credentials grant).
type oauthClientResource struct {
	crud[oauthClientModel, client.OAuthClient]
}

// oauthClientModel is the resource's state.
type oauthClientModel struct {
	ID     types.String `tfsdk:"id"`
	Name   types.String `tfsdk:"name"`
	Scopes types.Set    `tfsdk:"scopes"`
	policyModel
	ClientID     types.String      `tfsdk:"client_id"`
	ClientSecret types.String      `tfsdk:"client_secret"`
	Version      types.Int64       `tfsdk:"version"`
	CreatedAt    timetypes.RFC3339 `tfsdk:"created_at"`
}

func (r *oauthClientResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "An OAuth client of Switchboard's token endpoint: a service exchanges its `client_id` and " +
			"`client_secret` for short-lived access tokens (`POST /v1/oauth/token`, client-credentials grant) and calls " +
			"Switchboard with them (`Authorization: Bearer <token>`).\n\n" +
			"The `client_secret` is generated by the server and shown only when the client is created: the provider keeps " +
			"it in state as a sensitive value so that other resources can use it. The name and the policy (`rate_limit`, " +
			"`models`, `connectors`, `budget`) change in place, the secret and the tokens already issued staying valid " +
			"(the tokens follow the new policy from their next request); changing `scopes` registers a new client and " +
			"deletes the old one. Managing clients needs the `admin` scope.",
		Attributes: withPolicy(map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The client's id, the same as `client_id`; the import id.",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "A human name, e.g. the service using the client (1-128 characters, no control characters). Changes in place.",
				Required:            true,
				Validators:          nameValidators(128),
			},
			"scopes": scopesAttribute("The most a token of this client may carry", "Changing them replaces the client."),
			"client_id": schema.StringAttribute{
				MarkdownDescription: "The `client_id` (`oc_...`) to send to the token endpoint; not a secret.",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"client_secret": schema.StringAttribute{
				MarkdownDescription: "The `client_secret` (`sbcs_...`), known only to the Terraform run that created the client; " +
					"null after an import. Sensitive: keep the state encrypted.",
				Computed:      true,
				Sensitive:     true,
				PlanModifiers: keep,
			},
			"version": schema.Int64Attribute{
				MarkdownDescription: "The server's version of the client, incremented by every change of its name or policy; sent as `If-Match`.",
				Computed:            true,
			},
			"created_at": schema.StringAttribute{
				MarkdownDescription: "When the client was registered (RFC 3339, UTC).",
				CustomType:          timetypes.RFC3339Type{},
				Computed:            true,
				PlanModifiers:       keep,
			},
		}, "client"),
	}
}

// fill copies the server's view of a client into the model; the secret is
// untouched.
func (m *oauthClientModel) fill(ctx context.Context, c *client.OAuthClient, diags *diag.Diagnostics) {
	m.ID = types.StringValue(c.Id)
	m.ClientID = types.StringValue(c.Id)
	m.Name = types.StringValue(c.Name)
	m.Scopes = scopesFromAPI(ctx, c.Scopes, diags)
	m.Version = types.Int64Value(c.Version)
	m.CreatedAt = timetypes.NewRFC3339TimeValue(c.CreatedAt.UTC())
	m.policyModel.fill(ctx, apiPolicy{RateLimit: c.RateLimit, Models: c.Models, Connectors: c.Connectors, Budget: c.Budget}, diags)
}
