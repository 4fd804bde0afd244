package provider

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timetypes/timetypes"
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
	_ resource.Resource                = (*apiKeyResource)(nil)
	_ resource.ResourceWithConfigure   = (*apiKeyResource)(nil)
	_ resource.ResourceWithImportState = (*apiKeyResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*apiKeyResource)(nil)
)

// NewAPIKeyResource is the switchboard_api_key resource.
func NewAPIKeyResource() resource.Resource {
	return &apiKeyResource{crud[apiKeyModel, client.APIKey]{
		typeName: "api_key", kind: "API key", deleteVerb: "revoke",
		label: func(m *apiKeyModel) string { return idOr(m.ID, m.Name.ValueString()) },
		fill:  (*apiKeyModel).fill,
		create: func(ctx context.Context, api *apiClient, plan *apiKeyModel, _ tfsdk.Config, diags *diag.Diagnostics) (*client.APIKey, error) {
			body := plan.create(ctx, diags)
			if diags.HasError() {
				return nil, nil
			}
			res, err := api.CreateAPIKeyWithResponse(ctx, body)
			if err != nil {
				return nil, err
			}
			k, err := answered(res.JSON201, res.StatusCode(), res.Body)
			if err != nil {
				return nil, err
			}
			// The secret is in this answer only.
			plan.Key = types.StringValue(k.Key)
			return &client.APIKey{
				Id: k.Id, Name: k.Name, Scopes: k.Scopes, Prefix: k.Prefix,
				CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt, Version: k.Version,
				RateLimit: k.RateLimit, Models: k.Models, Connectors: k.Connectors, Budget: k.Budget, Connection: k.Connection,
			}, nil
		},
		get: func(ctx context.Context, api *apiClient, m *apiKeyModel) (*client.APIKey, error) {
			res, err := api.GetAPIKeyWithResponse(ctx, m.ID.ValueString())
			if err != nil {
				return nil, err
			}
			return answered(res.JSON200, res.StatusCode(), res.Body)
		},
		// The name, the policy and the connection change in place: the
		// secret stays the same.
		update: func(ctx context.Context, api *apiClient, plan, state *apiKeyModel, _ tfsdk.Config, diags *diag.Diagnostics) (*client.APIKey, error) {
			p := plan.toAPI(ctx, diags)
			if diags.HasError() {
				return nil, nil
			}
			res, err := api.UpdateAPIKeyWithResponse(ctx, state.ID.ValueString(), &client.UpdateAPIKeyParams{IfMatch: etag(state.Version)},
				client.APIKeyUpdate{Name: plan.Name.ValueString(), RateLimit: p.RateLimit, Models: p.Models, Connectors: p.Connectors, Budget: p.Budget,
					Connection: strPtr(plan.BoundConnection)})
			if err != nil {
				return nil, err
			}
			return answered(res.JSON200, res.StatusCode(), res.Body)
		},
		remove: func(ctx context.Context, api *apiClient, m *apiKeyModel) error {
			res, err := api.DeleteAPIKeyWithResponse(ctx, m.ID.ValueString())
			if err != nil {
				return err
			}
			return deleted(res.StatusCode(), res.Body)
		},
		// ImportState imports a key by its id (`key_...`); its secret stays
		// unknown to Terraform (null), as the server no longer has it.
		importID: func(id string) (map[string]attr.Value, string) {
			if !apiKeyIDPattern.MatchString(id) {
				return nil, fmt.Sprintf("An API key is imported by its id, key_ followed by 32 hex digits (see GET /v1/api-keys), got %q. "+
					"The secret (sb_...) is not an id.", id)
			}
			return map[string]attr.Value{"id": types.StringValue(id)}, ""
		},
	}}
}

// apiKeyResource manages one API key. Its name, policy and bound
// connection change in place; its scopes and expiry are immutable on the
// server, so changing them replaces the key.
type apiKeyResource struct {
	crud[apiKeyModel, client.APIKey]
}

// apiKeyModel is the resource's state.
type apiKeyModel struct {
	ID        types.String      `tfsdk:"id"`
	Name      types.String      `tfsdk:"name"`
	Scopes    types.Set         `tfsdk:"scopes"`
	ExpiresAt timetypes.RFC3339 `tfsdk:"expires_at"`
	policyModel
	BoundConnection types.String      `tfsdk:"bound_connection"`
	Key             types.String      `tfsdk:"key"`
	Prefix          types.String      `tfsdk:"prefix"`
	Version         types.Int64       `tfsdk:"version"`
	CreatedAt       timetypes.RFC3339 `tfsdk:"created_at"`
}

// scopes are the scopes the server knows, from the generated client.
var scopes = []string{
	string(client.ScopeAdmin), string(client.ScopeConnectorsRead), string(client.ScopeConnectorsWrite),
	string(client.ScopeInvoke), string(client.ScopeLLM), string(client.ScopeWebhooksWrite),
}

// apiKeyIDPattern is the server's key id format.
var apiKeyIDPattern = regexp.MustCompile(`^key_[0-9a-f]{32}$`)

func (r *apiKeyResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "An API key for callers of Switchboard (`Authorization: Bearer sb_...`).\n\n" +
			"The secret `key` is generated by the server and shown only when the key is created: the provider keeps it " +
			"in state as a sensitive value so that other resources can use it. The name, the policy (`rate_limit`, " +
			"`models`, `connectors`, `budget`) and `bound_connection` change in place, the secret staying the same; " +
			"changing `scopes` or `expires_at` creates a new key and revokes the old one. Managing keys needs the `admin` scope. The server " +
			"refuses to revoke its last unexpired admin key.",
		Attributes: withPolicy(map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The key's id (`key_...`), not a secret; the import id.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "A human name, e.g. the application using the key (1-128 characters, no control characters). Changes in place.",
				Required:            true,
				Validators:          nameValidators(128),
			},
			"scopes": scopesAttribute("What the key may do", "`admin` grants every scope. Changing them replaces the key."),
			"expires_at": schema.StringAttribute{
				MarkdownDescription: "When the key stops working, as an RFC 3339 timestamp in the future " +
					"(e.g. `2030-01-01T00:00:00Z`); the same instant written with another offset is no change. " +
					"Never when unset. Changing it replaces the key. A computed expiry such as " +
					"`timeadd(plantimestamp(), \"720h\")` changes at every plan: pair it with `lifecycle { ignore_changes = [expires_at] }`.",
				CustomType:    timetypes.RFC3339Type{},
				Optional:      true,
				PlanModifiers: []planmodifier.String{sameInstant(), stringplanmodifier.RequiresReplace()},
			},
			"bound_connection": schema.StringAttribute{
				MarkdownDescription: "The connection (end user account) every tool call and action run by this key uses " +
					"(the API's `connection`; `connection` is a name Terraform reserves); " +
					"the `Switchboard-Connection` header cannot override it. A connection name (a lower-case letter or digit, " +
					"then up to 63 lower-case letters, digits, `_` or `-`); it need not exist yet. Unset: the caller chooses. " +
					"Changes in place.",
				Optional:   true,
				Validators: []validator.String{stringvalidator.RegexMatches(connectionNamePattern, "must be a lower-case letter or digit, then up to 63 lower-case letters, digits, _ or -")},
			},
			"key": schema.StringAttribute{
				MarkdownDescription: "The secret (`sb_...`), known only to the Terraform run that created the key; " +
					"null after an import. Sensitive: keep the state encrypted.",
				Computed:      true,
				Sensitive:     true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"prefix": schema.StringAttribute{
				MarkdownDescription: "The first characters of the secret (`sb_` and 4 more), to recognise the key; not a secret.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"version": schema.Int64Attribute{
				MarkdownDescription: "The server's version of the key, incremented by every change of its name or policy; sent as `If-Match`.",
				Computed:            true,
			},
			"created_at": schema.StringAttribute{
				MarkdownDescription: "When the key was created (RFC 3339, UTC).",
				CustomType:          timetypes.RFC3339Type{},
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
		}, "key"),
	}
}

// ModifyPlan plans no update when the configuration only rewrites the
// expiry with another offset, and refuses, at plan time, a new key whose
// expiry has passed (the server would refuse it). Existing keys are left
// alone: their expiry passing is not a configuration error.
func (r *apiKeyResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	keepWhenUnchanged(ctx, req, resp, path.Root("version"))
	if req.Plan.Raw.IsNull() || !req.State.Raw.IsNull() {
		return
	}
	var exp timetypes.RFC3339
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("expires_at"), &exp)...)
	if exp.IsNull() || exp.IsUnknown() {
		return
	}
	t, d := exp.ValueRFC3339Time()
	resp.Diagnostics.Append(d...)
	if d.HasError() {
		return
	}
	if now := time.Now(); !t.After(now) {
		resp.Diagnostics.AddAttributeError(path.Root("expires_at"), "API key expiry in the past",
			fmt.Sprintf("expires_at %s must be in the future (now is %s).", exp.ValueString(), now.UTC().Format(time.RFC3339)))
	}
}

// fill copies the server's view of a key into the model. A configured
// expiry that means the same instant as the server's is kept as written.
func (m *apiKeyModel) fill(ctx context.Context, k *client.APIKey, diags *diag.Diagnostics) {
	m.ID = types.StringValue(k.Id)
	m.Name = types.StringValue(k.Name)
	m.Scopes = scopesFromAPI(ctx, k.Scopes, diags)
	m.Prefix = types.StringValue(k.Prefix)
	m.CreatedAt = timetypes.NewRFC3339TimeValue(k.CreatedAt.UTC())
	m.ExpiresAt = keepTime(m.ExpiresAt, k.ExpiresAt)
	m.Version = types.Int64Value(k.Version)
	m.policyModel.fill(ctx, apiPolicy{RateLimit: k.RateLimit, Models: k.Models, Connectors: k.Connectors, Budget: k.Budget}, diags)
	m.BoundConnection = optString(k.Connection)
}

// create is the body that creates the planned key.
func (m *apiKeyModel) create(ctx context.Context, diags *diag.Diagnostics) client.APIKeyCreate {
	p := m.toAPI(ctx, diags)
	body := client.APIKeyCreate{Name: m.Name.ValueString(), Scopes: scopesToAPI(ctx, m.Scopes, diags),
		RateLimit: p.RateLimit, Models: p.Models, Connectors: p.Connectors, Budget: p.Budget, Connection: strPtr(m.BoundConnection)}
	if !m.ExpiresAt.IsNull() {
		t, d := m.ExpiresAt.ValueRFC3339Time()
		diags.Append(d...)
		body.ExpiresAt = &t
	}
	return body
}
