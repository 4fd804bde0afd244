package provider

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timetypes/timetypes"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
)

var (
	_ resource.Resource                   = (*connectorResource)(nil)
	_ resource.ResourceWithConfigure      = (*connectorResource)(nil)
	_ resource.ResourceWithImportState    = (*connectorResource)(nil)
	_ resource.ResourceWithValidateConfig = (*connectorResource)(nil)
)

// NewConnectorResource is the switchboard_connector resource.
func NewConnectorResource() resource.Resource {
	return &connectorResource{crud[connectorModel, client.Connector]{
		typeName: "connector", kind: "connector",
		label: func(m *connectorModel) string { return m.Name.ValueString() },
		fill:  (*connectorModel).fill,
		create: func(ctx context.Context, api *apiClient, plan *connectorModel, cfg tfsdk.Config, diags *diag.Diagnostics) (*client.Connector, error) {
			body := plan.input(ctx, diags)
			body.Name = strPtr(plan.Name)
			if plan.Auth != nil && plan.Auth.Type.ValueString() == "oauth2" {
				body.Auth.ClientSecret = configSecret(ctx, cfg, diags)
			}
			if diags.HasError() {
				return nil, nil
			}
			res, err := api.CreateConnectorWithResponse(ctx, body)
			if err != nil {
				return nil, err
			}
			return answered(res.JSON201, res.StatusCode(), res.Body)
		},
		get: func(ctx context.Context, api *apiClient, m *connectorModel) (*client.Connector, error) {
			res, err := api.GetConnectorWithResponse(ctx, m.ID.ValueString())
			if err != nil {
				return nil, err
			}
			return answered(res.JSON200, res.StatusCode(), res.Body)
		},
		update: func(ctx context.Context, api *apiClient, plan, state *connectorModel, cfg tfsdk.Config, diags *diag.Diagnostics) (*client.Connector, error) {
			body := plan.input(ctx, diags)
			// The stored secret is kept unless a new one is due: a new version, or
			// the first secret of a connector that just became oauth2.
			if plan.Auth != nil && plan.Auth.Type.ValueString() == "oauth2" && secretDue(stateWOVersion(state.Auth), plan.Auth.ClientSecretWOVersion, state.Auth == nil || state.Auth.Type.ValueString() != "oauth2") {
				body.Auth.ClientSecret = configSecret(ctx, cfg, diags)
			}
			if diags.HasError() {
				return nil, nil
			}
			res, err := api.ReplaceConnectorWithResponse(ctx, state.ID.ValueString(), &client.ReplaceConnectorParams{IfMatch: etag(state.Version)}, body)
			if err != nil {
				return nil, err
			}
			return answered(res.JSON200, res.StatusCode(), res.Body)
		},
		remove: func(ctx context.Context, api *apiClient, m *connectorModel) error {
			res, err := api.DeleteConnectorWithResponse(ctx, m.ID.ValueString(), &client.DeleteConnectorParams{IfMatch: etag(m.Version)})
			if err != nil {
				return err
			}
			return deleted(res.StatusCode(), res.Body)
		},
		// A connector is imported by its name. Its client secret stays on
		// the server; set client_secret_wo_version in the configuration to
		// send a new one.
		importID: func(id string) (map[string]attr.Value, string) {
			if !identifierPattern.MatchString(id) {
				return nil, fmt.Sprintf("A connector is imported by its name (%s), got %q.", identifierPattern, id)
			}
			return map[string]attr.Value{"id": types.StringValue(id), "name": types.StringValue(id)}, ""
		},
	}}
}

// connectorResource manages one connector: an external HTTP API that
// actions call.
type connectorResource struct {
	crud[connectorModel, client.Connector]
}

// configSecret reads auth.client_secret_wo from the configuration (write-only
// values are only there, never in the plan or the state).
func configSecret(ctx context.Context, cfg tfsdk.Config, diags *diag.Diagnostics) *string {
	var s types.String
	diags.Append(cfg.GetAttribute(ctx, path.Root("auth").AtName("client_secret_wo"), &s)...)
	return strPtr(s)
}

// identifierPattern is the syntax of connector and action names.
var identifierPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// identifierValidators check a connector or action name.
func identifierValidators() []validator.String {
	return []validator.String{stringvalidator.RegexMatches(identifierPattern,
		"must be a lower-case letter, then up to 63 lower-case letters, digits or underscores")}
}

// Values of a connector's auth, from the generated client.
var (
	authTypes = []string{
		string(client.ConnectorAuthNone), string(client.ConnectorAuthAPIKey), string(client.ConnectorAuthBearer),
		string(client.ConnectorAuthBasic), string(client.ConnectorAuthOAuth2),
	}
	apiKeyPlacements = []string{string(client.ConnectorAuthInHeader), string(client.ConnectorAuthInQuery), string(client.ConnectorAuthInCookie)}
	grants           = []string{string(client.ConnectorGrantAuthorizationCode), string(client.ConnectorGrantClientCredentials)}
	clientAuths      = []string{string(client.ConnectorClientAuthBasic), string(client.ConnectorClientAuthBody)}
	// The OAuth 2.0 parameters the server sets itself and will not let
	// authorization_params and token_params override.
	reservedAuthorizationParams = []string{"response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge", "code_challenge_method"}
	reservedTokenParams         = []string{"grant_type", "code", "redirect_uri", "code_verifier", "client_id", "client_secret", "refresh_token", "scope"}
)

// oauthParamsValidators check extra OAuth 2.0 parameters.
func oauthParamsValidators(reserved []string) []validator.Map {
	return []validator.Map{
		mapvalidator.SizeBetween(1, 20),
		mapvalidator.KeysAre(stringvalidator.LengthBetween(1, 64),
			stringvalidator.RegexMatches(httpToken, "must be letters, digits and !#$%&'*+-.^_`|~ only"),
			stringvalidator.NoneOf(reserved...)),
		mapvalidator.ValueStringsAre(stringvalidator.LengthAtMost(1024), singleLine),
	}
}

// connectorModel is the resource's state.
type connectorModel struct {
	ID          types.String      `tfsdk:"id"`
	Name        types.String      `tfsdk:"name"`
	DisplayName types.String      `tfsdk:"display_name"`
	Description types.String      `tfsdk:"description"`
	BaseURL     types.String      `tfsdk:"base_url"`
	Auth        *authModel        `tfsdk:"auth"`
	ConnectPage *connectPageModel `tfsdk:"connect_page"`
	Version     types.Int64       `tfsdk:"version"`
	CreatedAt   timetypes.RFC3339 `tfsdk:"created_at"`
	UpdatedAt   timetypes.RFC3339 `tfsdk:"updated_at"`
}

// authModel is a connector's auth attribute.
type authModel struct {
	Type                  types.String `tfsdk:"type"`
	Name                  types.String `tfsdk:"name"`
	In                    types.String `tfsdk:"in"`
	Prefix                types.String `tfsdk:"prefix"`
	AuthorizationURL      types.String `tfsdk:"authorization_url"`
	TokenURL              types.String `tfsdk:"token_url"`
	ClientID              types.String `tfsdk:"client_id"`
	Scopes                types.List   `tfsdk:"scopes"`
	Grant                 types.String `tfsdk:"grant"`
	ClientAuth            types.String `tfsdk:"client_auth"`
	AuthorizationParams   types.Map    `tfsdk:"authorization_params"`
	TokenParams           types.Map    `tfsdk:"token_params"`
	RedirectURLs          types.List   `tfsdk:"redirect_urls"`
	ClientSecretWO        types.String `tfsdk:"client_secret_wo"`
	ClientSecretWOVersion types.Int64  `tfsdk:"client_secret_wo_version"`
}

// connectPageModel is a connector's connect_page attribute.
type connectPageModel struct {
	LogoURL    types.String `tfsdk:"logo_url"`
	HelpText   types.String `tfsdk:"help_text"`
	TestAction types.String `tfsdk:"test_action"`
}

// maxHelpText is the server's limit on connect_page.help_text, in characters.
const maxHelpText = 2000

// singleLine refuses control characters; multiLine allows tabs and newlines.
var (
	singleLine = notMatching(regexp.MustCompile(`[\x00-\x1f\x7f]`), "must not contain control characters")
	multiLine  = notMatching(regexp.MustCompile(`[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]`), "must not contain control characters other than tabs and newlines")
	noSpaces   = notMatching(regexp.MustCompile(`[\x00-\x20\x7f]`), "must not contain spaces or control characters")
)

// endpointValidators check an absolute http(s) URL of at most 2048 bytes.
func endpointValidators() []validator.String {
	return []validator.String{stringvalidator.LengthBetween(1, 2048), httpURL()}
}

func (r *connectorResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A connector: an external HTTP API that Switchboard calls on behalf of applications " +
			"(`integrations.<name>.run(action, params)`). Its actions are `switchboard_action` resources, its accounts' " +
			"credentials `switchboard_connection` resources.\n\n" +
			"Deleting a connector deletes its actions and connections on the server too. Changes are sent with " +
			"`If-Match`, so a connector changed outside Terraform since the last refresh is not overwritten.\n\n" +
			"**Moving credentials.** Switchboard never sends stored credentials to a new place. A change of `base_url`'s " +
			"scheme, host or port, of `auth.type`, of an apiKey's `in`, `name` or `prefix`, or of an oauth2 `token_url` " +
			"drops the credentials stored for the old target: every connection of the connector becomes `reauth_required` " +
			"until its credentials are sent again (change the connection's `credentials_wo_version`, in the same apply or " +
			"later; OAuth 2.0 authorization_code: connect again). The plan shows a warning for such a change. Changing an " +
			"oauth2 `token_url` (or a client_credentials `base_url` origin) must send the client secret again (change " +
			"`auth.client_secret_wo_version`); the plan fails otherwise.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The connector's name; the import id.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "Identifier: a lower-case letter, then up to 63 lower-case letters, digits or underscores " +
					"(usable as `integrations.<name>`). Changing it replaces the connector, its actions and connections.",
				Required:      true,
				Validators:    identifierValidators(),
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"display_name": schema.StringAttribute{
				MarkdownDescription: "A human name (1-128 characters, no control characters).",
				Optional:            true,
				Validators:          []validator.String{stringvalidator.UTF8LengthBetween(1, 128), singleLine},
			},
			"description": schema.StringAttribute{
				MarkdownDescription: "What the API is (1-4096 characters).",
				Optional:            true,
				Validators:          []validator.String{stringvalidator.UTF8LengthBetween(1, 4096), multiLine},
			},
			"base_url": schema.StringAttribute{
				MarkdownDescription: "Absolute `http://` or `https://` URL that action paths are joined to; it may carry a path " +
					"prefix (`https://api.example.com/v2`), never a query, a fragment, credentials or a template. A host the " +
					"server's egress guard refuses (loopback, private, link-local and other special addresses, or a name that " +
					"resolves only to such) is refused on apply unless the server's `egress.allow` includes it.",
				Required: true,
				Validators: append(endpointValidators(),
					notMatching(regexp.MustCompile(`[?#]`), "must not have a query or a fragment; declare query parameters on actions"),
					notMatching(regexp.MustCompile(`\{\{`), "must not contain templates; only action paths, headers and bodies are templates")),
			},
			"auth": schema.SingleNestedAttribute{
				MarkdownDescription: "How the API authenticates calls; no authentication when unset. The credentials themselves " +
					"(API key, token, username and password, OAuth tokens) belong to connections; a connector holds only an " +
					"OAuth 2.0 client secret. Attributes of another `type` are refused.",
				Optional:   true,
				Attributes: authSchemaAttributes(),
			},
			"connect_page": schema.SingleNestedAttribute{
				MarkdownDescription: "How the hosted connect page (`POST /v1/connect-sessions`) presents the connector to the end " +
					"users who connect their accounts on it; the server's plain page when unset. Removing it clears it on the server.",
				Optional:   true,
				Validators: []validator.Object{notEmptyObject()},
				Attributes: connectPageSchemaAttributes(),
			},
			"version": schema.Int64Attribute{
				MarkdownDescription: "The server's version of the connector, 1 on create and incremented by every change; " +
					"sent as `If-Match` so that changes made outside Terraform are not overwritten.",
				Computed: true,
			},
			"created_at": schema.StringAttribute{
				MarkdownDescription: "When the connector was created (RFC 3339, UTC).",
				CustomType:          timetypes.RFC3339Type{},
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"updated_at": schema.StringAttribute{
				MarkdownDescription: "When the connector was last changed (RFC 3339, UTC).",
				CustomType:          timetypes.RFC3339Type{},
				Computed:            true,
			},
		},
	}
}

// authSchemaAttributes are the attributes of a connector's auth.
func authSchemaAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"type": schema.StringAttribute{
			MarkdownDescription: "One of `none`; `apiKey` (the key goes in the header, query parameter or cookie `name`, " +
				"after `prefix`); `bearer` (`Authorization: Bearer <token>`); `basic` (`Authorization: Basic ...`); " +
				"`oauth2` (tokens from `token_url` with `grant`, sent as a bearer token).",
			Required:   true,
			Validators: []validator.String{stringvalidator.OneOf(authTypes...)},
		},
		"name": schema.StringAttribute{
			MarkdownDescription: "`apiKey`: the header, query parameter or cookie carrying the key, e.g. `X-API-Key`. Required for `apiKey`.",
			Optional:            true,
			Validators:          []validator.String{stringvalidator.LengthBetween(1, 256), noSpaces},
		},
		"in": schema.StringAttribute{
			MarkdownDescription: "`apiKey`: where the key goes: `header`, `query` or `cookie`. Required for `apiKey`.",
			Optional:            true,
			Validators:          []validator.String{stringvalidator.OneOf(apiKeyPlacements...)},
		},
		"prefix": schema.StringAttribute{
			MarkdownDescription: "`apiKey`: text sent before the key, e.g. `Token ` (mind the space).",
			Optional:            true,
			Validators:          []validator.String{stringvalidator.LengthBetween(1, 256), singleLine},
		},
		"authorization_url": schema.StringAttribute{
			MarkdownDescription: "`oauth2` with grant `authorization_code`: the authorization endpoint. Required for that grant, refused for `client_credentials`.",
			Optional:            true,
			Validators:          endpointValidators(),
		},
		"token_url": schema.StringAttribute{
			MarkdownDescription: "`oauth2`: the token endpoint. Required for `oauth2`.",
			Optional:            true,
			Validators:          endpointValidators(),
		},
		"client_id": schema.StringAttribute{
			MarkdownDescription: "`oauth2`: the client id. Required for `oauth2`.",
			Optional:            true,
			Validators:          []validator.String{stringvalidator.LengthBetween(1, 256), singleLine},
		},
		"scopes": schema.ListAttribute{
			MarkdownDescription: "`oauth2`: the scopes to request (distinct, without spaces; at most 32).",
			ElementType:         types.StringType,
			Optional:            true,
			Validators: []validator.List{
				listvalidator.SizeBetween(1, 32),
				listvalidator.UniqueValues(),
				listvalidator.ValueStringsAre(stringvalidator.LengthBetween(1, 256),
					notMatching(regexp.MustCompile(`[\x00-\x20"\\\x7f]`), "must not contain spaces, quotes, backslashes or control characters")),
			},
		},
		"grant": schema.StringAttribute{
			MarkdownDescription: "`oauth2`: `authorization_code` (accounts connect through the browser, with PKCE S256 and state) " +
				"or `client_credentials` (the connector's own client credentials). Required for `oauth2`.",
			Optional:   true,
			Validators: []validator.String{stringvalidator.OneOf(grants...)},
		},
		"client_auth": schema.StringAttribute{
			MarkdownDescription: "`oauth2`: how the client authenticates at the token endpoint: `basic` (HTTP Basic header; " +
				"the server's default when unset) or `body` (`client_id` and `client_secret` form fields).",
			Optional:   true,
			Validators: []validator.String{stringvalidator.OneOf(clientAuths...)},
		},
		"authorization_params": schema.MapAttribute{
			MarkdownDescription: "`oauth2` with grant `authorization_code`: extra query parameters of the authorization URL, " +
				"e.g. `{ audience = \"https://api.example.com\", access_type = \"offline\", prompt = \"consent\" }` (at most 20; " +
				"not the ones the server sets: `" + strings.Join(reservedAuthorizationParams, "`, `") + "`).",
			ElementType: types.StringType,
			Optional:    true,
			Validators:  oauthParamsValidators(reservedAuthorizationParams),
		},
		"token_params": schema.MapAttribute{
			MarkdownDescription: "`oauth2`: extra form parameters of token requests, e.g. `{ audience = \"...\" }` (at most 20; " +
				"not the ones the server sets: `" + strings.Join(reservedTokenParams, "`, `") + "`).",
			ElementType: types.StringType,
			Optional:    true,
			Validators:  oauthParamsValidators(reservedTokenParams),
		},
		"redirect_urls": schema.ListAttribute{
			MarkdownDescription: "`apiKey`, `bearer`, `basic`, and `oauth2` with grant `authorization_code`: the absolute " +
				"http(s) URLs (exact match, at most 20) where the browser may return after connecting an account: " +
				"`GET /v1/connectors/{name}/connect` accepts them as `redirect` and `POST /v1/connect-sessions` (the hosted " +
				"connect page) as `redirectUrl`. Refused for auth type `none` and the `client_credentials` grant.",
			ElementType: types.StringType,
			Optional:    true,
			Validators: []validator.List{
				listvalidator.SizeBetween(1, 20),
				listvalidator.UniqueValues(),
				listvalidator.ValueStringsAre(append(endpointValidators(), notMatching(regexp.MustCompile(`#`), "must not have a fragment"))...),
			},
		},
		"client_secret_wo": schema.StringAttribute{
			MarkdownDescription: "`oauth2`: the client secret. **Write-only** (Terraform 1.11+): sent to the server, which seals it " +
				"in its vault, and never stored in the Terraform state. Required for `client_credentials`, optional for " +
				"`authorization_code` (public clients with PKCE). Sent on create and whenever `client_secret_wo_version` changes.",
			Optional:   true,
			WriteOnly:  true,
			Sensitive:  true,
			Validators: []validator.String{stringvalidator.LengthBetween(1, 4096), singleLine},
		},
		"client_secret_wo_version": schema.Int64Attribute{
			MarkdownDescription: "Change this number to send a new `client_secret_wo`: Terraform keeps no copy of a write-only " +
				"value, so it cannot see the secret itself change.",
			Optional: true,
			Validators: []validator.Int64{
				int64validator.AlsoRequires(path.MatchRelative().AtParent().AtName("client_secret_wo")),
			},
		},
	}
}

// connectPageSchemaAttributes are the attributes of a connector's connect_page.
func connectPageSchemaAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"logo_url": schema.StringAttribute{
			MarkdownDescription: "An absolute `https://` URL (`http://` only on a loopback host) of a logo shown on the page, " +
				"without credentials or fragment (at most 2048 bytes). End users' browsers load it from there.",
			Optional: true,
			Validators: append(endpointValidators(), httpsOrLoopback(),
				notMatching(regexp.MustCompile(`[\x00-\x20\x7f]`), "must not contain spaces or control characters"),
				notMatching(regexp.MustCompile(`#`), "must not have a fragment")),
		},
		"help_text": schema.StringAttribute{
			MarkdownDescription: fmt.Sprintf("Plain text shown under the form, e.g. where users find their API key "+
				"(1-%d characters; newlines and tabs allowed, no other control characters; never rendered as HTML or Markdown).", maxHelpText),
			Optional:   true,
			Validators: []validator.String{stringvalidator.UTF8LengthBetween(1, maxHelpText), multiLine},
		},
		"test_action": schema.StringAttribute{
			MarkdownDescription: "The name of an action of this connector, taking no required parameters, that the page runs " +
				"with the credentials the user entered before storing them: the connection is stored only when the upstream " +
				"answers 2xx. Write the name itself: the action's resource depends on this connector, so " +
				"`switchboard_action.<x>.name` here would be a cycle. Not for auth type `none` or oauth2 `client_credentials` " +
				"(their connections take no credentials from users).",
			Optional:   true,
			Validators: identifierValidators(),
		},
	}
}

// redirectAuthTypes are the auth types whose connections users make in a
// browser, which may then return to one of auth.redirect_urls.
var redirectAuthTypes = []string{"apiKey", "bearer", "basic", "oauth2"}

// authFields says which auth types each type-specific attribute belongs to.
var authFields = []struct {
	attr string
	typs []string
	get  func(a *authModel) attr.Value
}{
	{"name", []string{"apiKey"}, func(a *authModel) attr.Value { return a.Name }},
	{"in", []string{"apiKey"}, func(a *authModel) attr.Value { return a.In }},
	{"prefix", []string{"apiKey"}, func(a *authModel) attr.Value { return a.Prefix }},
	{"authorization_url", []string{"oauth2"}, func(a *authModel) attr.Value { return a.AuthorizationURL }},
	{"token_url", []string{"oauth2"}, func(a *authModel) attr.Value { return a.TokenURL }},
	{"client_id", []string{"oauth2"}, func(a *authModel) attr.Value { return a.ClientID }},
	{"scopes", []string{"oauth2"}, func(a *authModel) attr.Value { return a.Scopes }},
	{"grant", []string{"oauth2"}, func(a *authModel) attr.Value { return a.Grant }},
	{"client_auth", []string{"oauth2"}, func(a *authModel) attr.Value { return a.ClientAuth }},
	{"authorization_params", []string{"oauth2"}, func(a *authModel) attr.Value { return a.AuthorizationParams }},
	{"token_params", []string{"oauth2"}, func(a *authModel) attr.Value { return a.TokenParams }},
	{"redirect_urls", redirectAuthTypes, func(a *authModel) attr.Value { return a.RedirectURLs }},
	{"client_secret_wo", []string{"oauth2"}, func(a *authModel) attr.Value { return a.ClientSecretWO }},
	{"client_secret_wo_version", []string{"oauth2"}, func(a *authModel) attr.Value { return a.ClientSecretWOVersion }},
}

// ValidateConfig checks what depends on auth.type, as the server does:
// the fields each type requires, no field of another type, and a
// connect_page.test_action only where users enter credentials.
func (r *connectorResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var obj types.Object
	var testAction types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("auth"), &obj)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("connect_page").AtName("test_action"), &testAction)...)
	if resp.Diagnostics.HasError() || obj.IsUnknown() {
		return
	}
	var a authModel
	if obj.IsNull() {
		a.Type = types.StringValue(string(client.ConnectorAuthNone))
	} else {
		resp.Diagnostics.Append(obj.As(ctx, &a, objectAsOptions)...)
		if resp.Diagnostics.HasError() || a.Type.IsUnknown() {
			return
		}
		validateAuth(&a, path.Root("auth"), &resp.Diagnostics)
	}
	if !testAction.IsNull() && !testAction.IsUnknown() && !a.Grant.IsUnknown() && !takesUserCredentials(&a) {
		what := a.Type.ValueString()
		if what == "oauth2" {
			what += " " + a.Grant.ValueString()
		}
		resp.Diagnostics.AddAttributeError(path.Root("connect_page").AtName("test_action"), "Attribute not applicable",
			fmt.Sprintf("test_action does not apply to auth %s: its connections take no credentials from users, so the "+
				"connect page has nothing to test. Remove test_action.", what))
	}
}

// takesUserCredentials reports whether users enter credentials for a
// connector of auth a (on the connect page or as a connection): every type
// but none and the oauth2 client_credentials grant.
func takesUserCredentials(a *authModel) bool {
	switch a.Type.ValueString() {
	case "none":
		return false
	case "oauth2":
		return a.Grant.ValueString() != "client_credentials"
	}
	return true
}

// validateAuth reports the type-dependent problems of a known auth type.
func validateAuth(a *authModel, at path.Path, diags *diag.Diagnostics) {
	typ := a.Type.ValueString()
	for _, f := range authFields {
		if v := f.get(a); !slices.Contains(f.typs, typ) && !v.IsNull() {
			diags.AddAttributeError(at.AtName(f.attr), "Attribute not applicable",
				fmt.Sprintf("%s applies only to auth %s, not %s.", f.attr, typeList(f.typs), typ))
		}
	}
	need := func(attr string, v attr.Value, why string) {
		if v.IsNull() {
			diags.AddAttributeError(at.AtName(attr), "Missing required attribute", fmt.Sprintf("%s is required %s.", attr, why))
		}
	}
	switch typ {
	case "apiKey":
		need("name", a.Name, "for apiKey auth: the header, query parameter or cookie carrying the key")
		need("in", a.In, "for apiKey auth: header, query or cookie")
		if !a.Name.IsNull() && !a.Name.IsUnknown() && !a.In.IsUnknown() && a.In.ValueString() != "query" {
			if !httpToken.MatchString(a.Name.ValueString()) {
				diags.AddAttributeError(at.AtName("name"), "Invalid header or cookie name",
					fmt.Sprintf("%q is not a valid %s name (letters, digits and !#$%%&'*+-.^_`|~ only).", a.Name.ValueString(), a.In.ValueString()))
			} else if a.In.ValueString() == "header" && isManagedHeader(a.Name.ValueString()) {
				diags.AddAttributeError(at.AtName("name"), "Header managed by the HTTP client",
					fmt.Sprintf("%s is managed by the HTTP client and cannot carry a key.", a.Name.ValueString()))
			}
		}
	case "oauth2":
		need("grant", a.Grant, "for oauth2 auth: authorization_code or client_credentials")
		need("token_url", a.TokenURL, "for oauth2 auth")
		need("client_id", a.ClientID, "for oauth2 auth")
		switch a.Grant.ValueString() {
		case "authorization_code":
			need("authorization_url", a.AuthorizationURL, "for the authorization_code grant")
		case "client_credentials":
			need("client_secret_wo", a.ClientSecretWO, "for the client_credentials grant")
			for _, f := range []struct {
				name string
				v    attr.Value
			}{{"authorization_url", a.AuthorizationURL}, {"authorization_params", a.AuthorizationParams}, {"redirect_urls", a.RedirectURLs}} {
				if !f.v.IsNull() {
					diags.AddAttributeError(at.AtName(f.name), "Attribute not applicable",
						f.name+" applies only to the authorization_code grant.")
				}
			}
		}
	}
}

// typeList names auth types in a message: "type oauth2", "types apiKey,
// bearer, basic or oauth2".
func typeList(ts []string) string {
	if len(ts) == 1 {
		return "type " + ts[0]
	}
	return "types " + strings.Join(ts[:len(ts)-1], ", ") + " or " + ts[len(ts)-1]
}

// httpToken is an RFC 9110 token: a valid header or cookie name.
var httpToken = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")

// isManagedHeader reports whether the HTTP client manages header h.
func isManagedHeader(h string) bool {
	switch strings.ToLower(h) {
	case "connection", "content-length", "host", "keep-alive", "proxy-authorization",
		"proxy-connection", "te", "trailer", "transfer-encoding", "upgrade":
		return true
	}
	return false
}

// input is the definition to send (without the client secret).
func (m *connectorModel) input(ctx context.Context, diags *diag.Diagnostics) client.ConnectorInput {
	in := client.ConnectorInput{
		BaseUrl:     m.BaseURL.ValueString(),
		DisplayName: strPtr(m.DisplayName),
		Description: strPtr(m.Description),
		Auth:        client.ConnectorAuth{Type: client.ConnectorAuthNone},
	}
	if a := m.Auth; a != nil {
		in.Auth = client.ConnectorAuth{
			Type:             client.ConnectorAuthType(a.Type.ValueString()),
			Name:             strPtr(a.Name),
			Prefix:           strPtr(a.Prefix),
			AuthorizationUrl: strPtr(a.AuthorizationURL),
			TokenUrl:         strPtr(a.TokenURL),
			ClientId:         strPtr(a.ClientID),
		}
		if s := strPtr(a.In); s != nil {
			v := client.ConnectorAuthIn(*s)
			in.Auth.In = &v
		}
		if s := strPtr(a.Grant); s != nil {
			v := client.ConnectorAuthGrant(*s)
			in.Auth.Grant = &v
		}
		if !a.Scopes.IsNull() {
			ss := listStrings(ctx, a.Scopes, diags)
			in.Auth.Scopes = &ss
		}
		if s := strPtr(a.ClientAuth); s != nil {
			v := client.ConnectorAuthClientAuth(*s)
			in.Auth.ClientAuth = &v
		}
		if !a.RedirectURLs.IsNull() {
			ss := listStrings(ctx, a.RedirectURLs, diags)
			in.Auth.RedirectUrls = &ss
		}
		in.Auth.AuthorizationParams = stringMap(ctx, a.AuthorizationParams, diags)
		in.Auth.TokenParams = stringMap(ctx, a.TokenParams, diags)
	}
	if p := m.ConnectPage; p != nil {
		in.ConnectPage = &client.ConnectPage{LogoUrl: strPtr(p.LogoURL), HelpText: strPtr(p.HelpText), TestAction: strPtr(p.TestAction)}
	}
	return in
}

// fill copies the server's connector into the model. A null auth stays null
// while the server says none; the write-only secret is always null in
// state, its version is kept from the plan.
func (m *connectorModel) fill(ctx context.Context, c *client.Connector, diags *diag.Diagnostics) {
	m.ID = types.StringValue(c.Name)
	m.Name = types.StringValue(c.Name)
	m.DisplayName = optString(c.DisplayName)
	m.Description = optString(c.Description)
	m.BaseURL = types.StringValue(c.BaseUrl)
	m.Version = types.Int64Value(c.Version)
	m.CreatedAt = timetypes.NewRFC3339TimeValue(c.CreatedAt.UTC())
	m.UpdatedAt = timetypes.NewRFC3339TimeValue(c.UpdatedAt.UTC())
	m.Auth = authFromAPI(ctx, c.Auth, m.Auth, diags)
	m.ConnectPage = connectPageFromAPI(c.ConnectPage)
}

// connectPageFromAPI is the state of a connector's connect_page: null when
// the server has none (absent, or with no field set), as an unset
// connect_page is (notEmptyObject refuses an empty one), so that a plan
// and an import agree with the configuration.
func connectPageFromAPI(p *client.ConnectPage) *connectPageModel {
	if p == nil || emptyStr(p.LogoUrl) && emptyStr(p.HelpText) && emptyStr(p.TestAction) {
		return nil
	}
	return &connectPageModel{LogoURL: optNonEmpty(p.LogoUrl), HelpText: optNonEmpty(p.HelpText), TestAction: optNonEmpty(p.TestAction)}
}

// emptyStr reports whether s is nil or "".
func emptyStr(s *string) bool { return s == nil || *s == "" }

// optNonEmpty is a *string as a state value, null for nil or "" (which a
// configuration cannot hold: the attributes' validators require 1 or more
// characters).
func optNonEmpty(s *string) types.String {
	if emptyStr(s) {
		return types.StringNull()
	}
	return types.StringValue(*s)
}

// authFromAPI is the state of a connector's auth given the prior state.
func authFromAPI(ctx context.Context, a client.ConnectorAuth, prior *authModel, diags *diag.Diagnostics) *authModel {
	if a.Type == client.ConnectorAuthNone && prior == nil {
		return nil
	}
	out := &authModel{
		Type:                  types.StringValue(string(a.Type)),
		Name:                  optString(a.Name),
		Prefix:                optString(a.Prefix),
		AuthorizationURL:      optString(a.AuthorizationUrl),
		TokenURL:              optString(a.TokenUrl),
		ClientID:              optString(a.ClientId),
		In:                    types.StringNull(),
		Grant:                 types.StringNull(),
		Scopes:                types.ListNull(types.StringType),
		ClientAuth:            types.StringNull(),
		AuthorizationParams:   optStringMap(ctx, a.AuthorizationParams, diags),
		TokenParams:           optStringMap(ctx, a.TokenParams, diags),
		RedirectURLs:          types.ListNull(types.StringType),
		ClientSecretWO:        types.StringNull(),
		ClientSecretWOVersion: types.Int64Null(),
	}
	if a.In != nil {
		out.In = types.StringValue(string(*a.In))
	}
	if a.Grant != nil {
		out.Grant = types.StringValue(string(*a.Grant))
	}
	if a.Scopes != nil && len(*a.Scopes) > 0 {
		out.Scopes = listOfStrings(ctx, *a.Scopes, diags)
	}
	if a.ClientAuth != nil {
		out.ClientAuth = types.StringValue(string(*a.ClientAuth))
	}
	if a.RedirectUrls != nil && len(*a.RedirectUrls) > 0 {
		out.RedirectURLs = listOfStrings(ctx, *a.RedirectUrls, diags)
	}
	if prior != nil {
		out.ClientSecretWOVersion = prior.ClientSecretWOVersion
	}
	return out
}

// stateWOVersion is the client_secret_wo_version of a prior auth.
func stateWOVersion(a *authModel) types.Int64 {
	if a == nil {
		return types.Int64Null()
	}
	return a.ClientSecretWOVersion
}

// secretDue says whether a write-only secret must be sent on update: its
// version changed, or the resource did not hold one before (fresh).
func secretDue(prior, planned types.Int64, fresh bool) bool {
	return fresh || !prior.Equal(planned)
}

// etag is the If-Match value of a state version.
func etag(version types.Int64) *string {
	if version.IsNull() || version.IsUnknown() {
		return nil
	}
	s := strconv.Quote(strconv.FormatInt(version.ValueInt64(), 10))
	return &s
}
