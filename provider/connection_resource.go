package provider

import (
	"context"
	"fmt"
	"net/http"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-timetypes/timetypes"
	"github.com/hashicorp/terraform-plugin-framework-validators/resourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
)

var (
	_ resource.Resource                     = (*connectionResource)(nil)
	_ resource.ResourceWithConfigure        = (*connectionResource)(nil)
	_ resource.ResourceWithImportState      = (*connectionResource)(nil)
	_ resource.ResourceWithConfigValidators = (*connectionResource)(nil)
	_ resource.ResourceWithModifyPlan       = (*connectionResource)(nil)
)

// NewConnectionResource is the switchboard_connection resource.
func NewConnectionResource() resource.Resource {
	return &connectionResource{crud[connectionModel, client.Connection]{
		typeName: "connection", kind: "connection",
		label:  func(m *connectionModel) string { return m.Connector.ValueString() + "/" + m.Name.ValueString() },
		fill:   (*connectionModel).fill,
		create: createConnection,
		get:    getConnection,
		// Update replaces the credentials (all of them, as configured):
		// planned when the username or credentials_wo_version changes.
		update: func(ctx context.Context, api *apiClient, _, state *connectionModel, cfg tfsdk.Config, diags *diag.Diagnostics) (*client.Connection, error) {
			creds := credentials(ctx, cfg, diags)
			if diags.HasError() {
				return nil, nil
			}
			res, err := api.ReplaceConnectionWithResponse(ctx, state.Connector.ValueString(), state.Name.ValueString(),
				&client.ReplaceConnectionParams{IfMatch: etag(state.Version)}, creds)
			if err != nil {
				return nil, err
			}
			return answered(res.JSON200, res.StatusCode(), res.Body)
		},
		// 404: already gone, alone or with its connector.
		remove: func(ctx context.Context, api *apiClient, m *connectionModel) error {
			res, err := api.DeleteConnectionWithResponse(ctx, m.Connector.ValueString(), m.Name.ValueString(),
				&client.DeleteConnectionParams{IfMatch: etag(m.Version)})
			if err != nil {
				return err
			}
			return deleted(res.StatusCode(), res.Body)
		},
		// A connection is imported by `<connector>/<name>`; its credentials
		// stay on the server.
		importID: func(id string) (map[string]attr.Value, string) {
			connector, name, ok := cutID(id)
			if !ok || !identifierPattern.MatchString(connector) || !connectionNamePattern.MatchString(name) {
				return nil, fmt.Sprintf("A connection is imported by <connector>/<name>, e.g. weather/default, got %q.", id)
			}
			return map[string]attr.Value{
				"id": types.StringValue(id), "connector": types.StringValue(connector), "name": types.StringValue(name),
			}, ""
		},
	}}
}

// connectionResource manages one account's credentials for a connector.
type connectionResource struct {
	crud[connectionModel, client.Connection]
}

// createConnection creates the planned connection. An authorization_code
// connector's connections start pending through the connect route; every
// other kind is created with its credentials.
func createConnection(ctx context.Context, api *apiClient, plan *connectionModel, cfg tfsdk.Config, diags *diag.Diagnostics) (*client.Connection, error) {
	creds := credentials(ctx, cfg, diags)
	if diags.HasError() {
		return nil, nil
	}
	connector, name := plan.Connector.ValueString(), plan.Name.ValueString()
	what := "create connection " + connector + "/" + name
	c, err := api.GetConnectorWithResponse(ctx, connector)
	if err != nil {
		return nil, err
	}
	if c.JSON200 == nil {
		return nil, also(what+": read connector "+connector, &callFailed{status: c.StatusCode(), body: c.Body})
	}
	auth := c.JSON200.Auth
	if auth.Type == client.ConnectorAuthOAuth2 && auth.Grant != nil && *auth.Grant == client.ConnectorGrantClientCredentials {
		diags.AddError("Switchboard: cannot "+what,
			"Connector "+connector+" uses the OAuth 2.0 client_credentials grant: the server fetches its tokens with the "+
				"connector's own client credentials on first use, so it takes no connection. Remove this resource.")
		return nil, nil
	}
	if auth.Type == client.ConnectorAuthOAuth2 && auth.Grant != nil && *auth.Grant == client.ConnectorGrantAuthorizationCode {
		if creds.ApiKey != nil || creds.Token != nil || creds.Username != nil || creds.Password != nil {
			diags.AddError("Switchboard: cannot "+what,
				"Connector "+connector+" uses OAuth 2.0 (authorization_code): its connections get their tokens through the "+
					"browser, not from credentials. Remove api_key_wo, token_wo, username and password_wo.")
			return nil, nil
		}
		res, err := api.ConnectOAuthConnectionWithResponse(ctx, connector, &client.ConnectOAuthConnectionParams{Connection: &name})
		if err != nil {
			return nil, err
		}
		if res.StatusCode() != http.StatusFound {
			return nil, &callFailed{status: res.StatusCode(), body: res.Body}
		}
		return getConnection(ctx, api, plan)
	}
	res, err := api.CreateConnectionWithResponse(ctx, connector, client.ConnectionInput{
		Name: &name, ApiKey: creds.ApiKey, Token: creds.Token, Username: creds.Username, Password: creds.Password,
	})
	if err != nil {
		return nil, err
	}
	return answered(res.JSON201, res.StatusCode(), res.Body)
}

// getConnection reads the connection a model names.
func getConnection(ctx context.Context, api *apiClient, m *connectionModel) (*client.Connection, error) {
	res, err := api.GetConnectionWithResponse(ctx, m.Connector.ValueString(), m.Name.ValueString())
	if err != nil {
		return nil, err
	}
	return answered(res.JSON200, res.StatusCode(), res.Body)
}

// connectionNamePattern is the syntax of connection names.
var connectionNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// connectionModel is the resource's state.
type connectionModel struct {
	ID                   types.String      `tfsdk:"id"`
	Connector            types.String      `tfsdk:"connector"`
	Name                 types.String      `tfsdk:"name"`
	APIKeyWO             types.String      `tfsdk:"api_key_wo"`
	TokenWO              types.String      `tfsdk:"token_wo"`
	Username             types.String      `tfsdk:"username"`
	PasswordWO           types.String      `tfsdk:"password_wo"`
	CredentialsWOVersion types.Int64       `tfsdk:"credentials_wo_version"`
	AuthType             types.String      `tfsdk:"auth_type"`
	Status               types.String      `tfsdk:"status"`
	Scopes               types.List        `tfsdk:"scopes"`
	ExpiresAt            timetypes.RFC3339 `tfsdk:"expires_at"`
	LastRefreshedAt      timetypes.RFC3339 `tfsdk:"last_refreshed_at"`
	Version              types.Int64       `tfsdk:"version"`
	CreatedAt            timetypes.RFC3339 `tfsdk:"created_at"`
	UpdatedAt            timetypes.RFC3339 `tfsdk:"updated_at"`
}

func (r *connectionResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	credential := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{
			MarkdownDescription: desc + " **Write-only** (Terraform 1.11+): sent to the server, which seals it in its vault, " +
				"and never stored in the Terraform state. Sent on create and whenever `credentials_wo_version` changes.",
			Optional:   true,
			WriteOnly:  true,
			Sensitive:  true,
			Validators: []validator.String{stringvalidator.LengthBetween(1, 4096), singleLine},
		}
	}
	computedString := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{MarkdownDescription: desc, Computed: true}
	}
	computedTime := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{MarkdownDescription: desc, CustomType: timetypes.RFC3339Type{}, Computed: true}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A connection: one account's credentials for a connector, used when an application runs " +
			"its actions (`\"connection\": \"<name>\"`, `default` when unnamed).\n\n" +
			"For `apiKey`, `bearer` and `basic` connectors the credentials are write-only attributes: Terraform sends " +
			"them and keeps no copy. For an `oauth2` connector with the `authorization_code` grant the provider creates " +
			"the connection `pending`; an account owner completes it in the browser through " +
			"`GET /v1/connectors/{connector}/connect?connection={name}` (called from your backend), after which `status` " +
			"shows `active` (or `reauth_required` when the provider revokes the grant). Connectors with auth `none` " +
			"and the `client_credentials` grant need no connection.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "`<connector>/<name>`; the import id.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"connector": schema.StringAttribute{
				MarkdownDescription: "The connector's name. Changing it replaces the connection.",
				Required:            true,
				Validators:          identifierValidators(),
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "The connection's name within its connector: a lower-case letter or digit, then up to 63 " +
					"lower-case letters, digits, `_` or `-`. Defaults to `default`. Changing it replaces the connection.",
				Optional:      true,
				Computed:      true,
				Default:       stringdefault.StaticString("default"),
				Validators:    []validator.String{stringvalidator.RegexMatches(connectionNamePattern, "must be a lower-case letter or digit, then up to 63 lower-case letters, digits, _ or -")},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"api_key_wo": credential("The API key, for a connector with auth `apiKey`."),
			"token_wo":   credential("The bearer token, for a connector with auth `bearer`."),
			"username": schema.StringAttribute{
				MarkdownDescription: "The username, for a connector with auth `basic` (no `:`). Not secret, so kept in the state; " +
					"the server never shows it.",
				Optional: true,
				Validators: []validator.String{stringvalidator.LengthBetween(1, 4096), singleLine,
					notMatching(regexp.MustCompile(`:`), "must not contain ':' (it separates username and password in HTTP Basic auth)")},
			},
			"password_wo": credential("The password, for a connector with auth `basic`."),
			"credentials_wo_version": schema.Int64Attribute{
				MarkdownDescription: "Change this number to send new write-only credentials (a rotation): Terraform keeps no " +
					"copy of them, so it cannot see them change.",
				Optional: true,
			},
			"auth_type": computedString("The connector's auth type the connection is for: `apiKey`, `bearer`, `basic` or `oauth2`."),
			"status": computedString("`active` when usable. `reauth_required` when the credentials must be sent again: the " +
				"connector's `base_url` origin, auth type, API key placement or `token_url` changed, so the server dropped " +
				"them (change `credentials_wo_version`), or, OAuth 2.0, the provider refused the refresh token (connect again). " +
				"OAuth 2.0 only: `pending` until an account owner completes the authorization."),
			"scopes": schema.ListAttribute{
				MarkdownDescription: "OAuth 2.0 only: the scopes the provider granted.",
				ElementType:         types.StringType,
				Computed:            true,
			},
			"expires_at":        computedTime("OAuth 2.0 only: when the access token expires (the server refreshes it before)."),
			"last_refreshed_at": computedTime("OAuth 2.0 only: when the access token was obtained."),
			"version": schema.Int64Attribute{
				MarkdownDescription: "The server's version of the connection, incremented when its credentials are replaced; sent as `If-Match`.",
				Computed:            true,
			},
			"created_at": schema.StringAttribute{
				MarkdownDescription: "When the connection was created (RFC 3339, UTC).",
				CustomType:          timetypes.RFC3339Type{},
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"updated_at": computedTime("When the connection last changed (RFC 3339, UTC)."),
		},
	}
}

// ConfigValidators: the credentials of one auth type only.
func (r *connectionResource) ConfigValidators(context.Context) []resource.ConfigValidator {
	return []resource.ConfigValidator{
		resourcevalidator.Conflicting(path.MatchRoot("api_key_wo"), path.MatchRoot("token_wo")),
		resourcevalidator.Conflicting(path.MatchRoot("api_key_wo"), path.MatchRoot("username")),
		resourcevalidator.Conflicting(path.MatchRoot("token_wo"), path.MatchRoot("username")),
		resourcevalidator.Conflicting(path.MatchRoot("api_key_wo"), path.MatchRoot("password_wo")),
		resourcevalidator.Conflicting(path.MatchRoot("token_wo"), path.MatchRoot("password_wo")),
		resourcevalidator.RequiredTogether(path.MatchRoot("password_wo"), path.MatchRoot("username")),
	}
}

// ModifyPlan keeps the server-side attributes (status, token times) as they
// are when nothing the connection is made of changes.
func (r *connectionResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return
	}
	var plan, state connectionModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if plan.Username.Equal(state.Username) && plan.CredentialsWOVersion.Equal(state.CredentialsWOVersion) {
		return
	}
	// Credentials change: the server keeps the connection's OAuth fields and
	// bumps only version and updated_at.
	plan.AuthType, plan.Status, plan.Scopes = state.AuthType, state.Status, state.Scopes
	plan.ExpiresAt, plan.LastRefreshedAt = state.ExpiresAt, state.LastRefreshedAt
	if state.Status.ValueString() == "reauth_required" && state.AuthType.ValueString() != "oauth2" {
		// Static credentials supplied again (after the connector was
		// retargeted) make the connection active.
		plan.Status = types.StringValue("active")
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// credentials reads the write-only credentials from the configuration.
func credentials(ctx context.Context, cfg interface {
	GetAttribute(context.Context, path.Path, any) diag.Diagnostics
}, diags *diag.Diagnostics) client.ConnectionCredentials {
	var apiKey, token, username, password types.String
	diags.Append(cfg.GetAttribute(ctx, path.Root("api_key_wo"), &apiKey)...)
	diags.Append(cfg.GetAttribute(ctx, path.Root("token_wo"), &token)...)
	diags.Append(cfg.GetAttribute(ctx, path.Root("username"), &username)...)
	diags.Append(cfg.GetAttribute(ctx, path.Root("password_wo"), &password)...)
	return client.ConnectionCredentials{ApiKey: strPtr(apiKey), Token: strPtr(token), Username: strPtr(username), Password: strPtr(password)}
}

// fill copies the server's connection into the model; credentials are
// untouched (write-only values are null in state, the username stays as
// configured since the server never shows it).
func (m *connectionModel) fill(ctx context.Context, c *client.Connection, diags *diag.Diagnostics) {
	m.ID = types.StringValue(c.Connector + "/" + c.Name)
	m.Connector = types.StringValue(c.Connector)
	m.Name = types.StringValue(c.Name)
	m.AuthType = types.StringValue(string(c.AuthType))
	m.Status = types.StringValue(string(c.Status))
	m.Scopes = types.ListNull(types.StringType)
	if c.Scopes != nil {
		m.Scopes = listOfStrings(ctx, *c.Scopes, diags)
	}
	m.ExpiresAt = keepTime(timetypes.NewRFC3339Null(), c.ExpiresAt)
	m.LastRefreshedAt = keepTime(timetypes.NewRFC3339Null(), c.LastRefreshedAt)
	m.Version = types.Int64Value(c.Version)
	m.CreatedAt = timetypes.NewRFC3339TimeValue(c.CreatedAt.UTC())
	m.UpdatedAt = timetypes.NewRFC3339TimeValue(c.UpdatedAt.UTC())
}
