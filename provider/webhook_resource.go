package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timetypes/timetypes"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
)

var (
	_ resource.Resource                = (*webhookResource)(nil)
	_ resource.ResourceWithConfigure   = (*webhookResource)(nil)
	_ resource.ResourceWithImportState = (*webhookResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*webhookResource)(nil)
)

// NewWebhookResource is the switchboard_webhook resource.
func NewWebhookResource() resource.Resource {
	return &webhookResource{crud[webhookModel, client.Webhook]{
		typeName: "webhook", kind: "webhook",
		label: func(m *webhookModel) string { return idOr(m.ID, "for "+m.URL.ValueString()) },
		fill:  (*webhookModel).fill,
		create: func(ctx context.Context, api *apiClient, plan *webhookModel, cfg tfsdk.Config, diags *diag.Diagnostics) (*client.Webhook, error) {
			var wo types.String
			diags.Append(cfg.GetAttribute(ctx, path.Root("secret_wo"), &wo)...)
			enabled := plan.Enabled.ValueBool()
			body := client.WebhookCreate{
				Url:         plan.URL.ValueString(),
				Events:      setStrings(ctx, plan.Events, diags),
				Description: strPtr(plan.Description),
				Enabled:     &enabled,
				Secret:      strPtr(wo),
			}
			if diags.HasError() {
				return nil, nil
			}
			res, err := api.CreateWebhookWithResponse(ctx, body)
			if err != nil {
				return nil, err
			}
			w, err := answered(res.JSON201, res.StatusCode(), res.Body)
			if err != nil {
				return nil, err
			}
			// Your own secret is write-only: never echo it into the state.
			plan.Secret = types.StringNull()
			if wo.IsNull() {
				plan.Secret = types.StringValue(w.Secret)
			}
			return &client.Webhook{
				Id: w.Id, Url: w.Url, Events: w.Events, Description: w.Description, Enabled: w.Enabled,
				CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, Version: w.Version,
			}, nil
		},
		get: func(ctx context.Context, api *apiClient, m *webhookModel) (*client.Webhook, error) {
			res, err := api.GetWebhookWithResponse(ctx, m.ID.ValueString())
			if err != nil {
				return nil, err
			}
			return answered(res.JSON200, res.StatusCode(), res.Body)
		},
		update: updateWebhook,
		remove: func(ctx context.Context, api *apiClient, m *webhookModel) error {
			res, err := api.DeleteWebhookWithResponse(ctx, m.ID.ValueString(), &client.DeleteWebhookParams{IfMatch: etag(m.Version)})
			if err != nil {
				return err
			}
			return deleted(res.StatusCode(), res.Body)
		},
		// A webhook is imported by its id (`wh_...`). The secret stays
		// unknown to Terraform (`secret` null) and on the server.
		importID: func(id string) (map[string]attr.Value, string) {
			if !webhookIDPattern.MatchString(id) {
				return nil, fmt.Sprintf("A webhook is imported by its id, wh_... (see GET /v1/webhooks), got %q.", id)
			}
			return map[string]attr.Value{"id": types.StringValue(id), "secret": types.StringNull()}, ""
		},
	}}
}

// webhookResource manages one webhook subscription.
type webhookResource struct {
	crud[webhookModel, client.Webhook]
}

// updateWebhook replaces the webhook; your secret is sent when its version
// changes, or when it replaces a generated one (the server rotates when it
// differs from the current). Dropping secret_wo rotates to a generated secret.
func updateWebhook(ctx context.Context, api *apiClient, plan, state *webhookModel, cfg tfsdk.Config, diags *diag.Diagnostics) (*client.Webhook, error) {
	var wo types.String
	diags.Append(cfg.GetAttribute(ctx, path.Root("secret_wo"), &wo)...)
	id := state.ID.ValueString()
	enabled := plan.Enabled.ValueBool()
	body := client.WebhookReplace{
		Url:         plan.URL.ValueString(),
		Events:      setStrings(ctx, plan.Events, diags),
		Description: strPtr(plan.Description),
		Enabled:     &enabled,
	}
	if !wo.IsNull() && secretDue(state.SecretWOVersion, plan.SecretWOVersion, !state.Secret.IsNull()) {
		body.Secret = strPtr(wo)
	}
	if diags.HasError() {
		return nil, nil
	}
	res, err := api.ReplaceWebhookWithResponse(ctx, id, &client.ReplaceWebhookParams{IfMatch: etag(state.Version)}, body)
	if err != nil {
		return nil, err
	}
	w, err := answered(res.JSON200, res.StatusCode(), res.Body)
	if err != nil || !plan.Secret.IsUnknown() {
		return w, err
	}
	// From your secret to a generated one: rotate and keep the new one.
	rot, err := api.RotateWebhookSecretWithResponse(ctx, id, &client.RotateWebhookSecretParams{IfMatch: etag(types.Int64Value(w.Version))}, client.WebhookSecretRotation{})
	if err != nil {
		return nil, also(fmt.Sprintf("rotate the secret of webhook %s at version %d", id, w.Version), err)
	}
	r, err := answered(rot.JSON200, rot.StatusCode(), rot.Body)
	if err != nil {
		return nil, also("rotate the secret of webhook "+id, err)
	}
	plan.Secret = types.StringValue(r.Secret)
	return &client.Webhook{
		Id: r.Id, Url: r.Url, Events: r.Events, Description: r.Description,
		Enabled: r.Enabled, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Version: r.Version,
	}, nil
}

// eventTypes are the event types a webhook may subscribe to, from the
// generated client, and "*".
var eventTypes = []string{
	"*",
	string(client.EventTypeConnectorCreated), string(client.EventTypeConnectorUpdated), string(client.EventTypeConnectorDeleted),
	string(client.EventTypeActionCreated), string(client.EventTypeActionUpdated), string(client.EventTypeActionDeleted),
	string(client.EventTypeActionInvoked), string(client.EventTypeActionFailed),
	string(client.EventTypeConnectionCreated), string(client.EventTypeConnectionUpdated), string(client.EventTypeConnectionDeleted),
	string(client.EventTypeConnectionReauthRequired),
	string(client.EventTypeAPIKeyCreated), string(client.EventTypeAPIKeyRevoked), string(client.EventTypeAPIKeyUpdated),
	string(client.EventTypeWebhookTest),
	string(client.EventTypeToolsetCreated), string(client.EventTypeToolsetUpdated), string(client.EventTypeToolsetDeleted),
	string(client.EventTypeUsageBudgetAlert), string(client.EventTypeUsageBudgetExhausted),
	string(client.EventTypeLLMFallbackUsed), string(client.EventTypeLLMProviderUnhealthy), string(client.EventTypeLLMProviderRecovered),
	string(client.EventTypeLLMModelsChanged), string(client.EventTypeRateLimitExceeded), string(client.EventTypeLLMRequestCompleted),
}

// webhookIDPattern is the server's webhook id format.
var webhookIDPattern = regexp.MustCompile(`^wh_[0-9a-zA-Z]+$`)

// webhookModel is the resource's state.
type webhookModel struct {
	ID              types.String      `tfsdk:"id"`
	URL             types.String      `tfsdk:"url"`
	Events          types.Set         `tfsdk:"events"`
	Description     types.String      `tfsdk:"description"`
	Enabled         types.Bool        `tfsdk:"enabled"`
	SecretWO        types.String      `tfsdk:"secret_wo"`
	SecretWOVersion types.Int64       `tfsdk:"secret_wo_version"`
	Secret          types.String      `tfsdk:"secret"`
	Version         types.Int64       `tfsdk:"version"`
	CreatedAt       timetypes.RFC3339 `tfsdk:"created_at"`
	UpdatedAt       timetypes.RFC3339 `tfsdk:"updated_at"`
}

func (r *webhookResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A webhook: Switchboard POSTs the events it subscribes to to `url`, signed as the " +
			"[Standard Webhooks](https://www.standardwebhooks.com/) specification says (`webhook-id`, `webhook-timestamp`, " +
			"`webhook-signature`), delivered at least once with retries.\n\n" +
			"The signing secret is either yours, as the write-only `secret_wo` (never stored in the state), or generated " +
			"by the server and exposed once, when the webhook is created, as the sensitive `secret`. Rotating a secret " +
			"keeps the old one signing beside the new one for the server's grace period (24 h by default).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The webhook's id (`wh_...`); the import id.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"url": schema.StringAttribute{
				MarkdownDescription: "Absolute `http://` or `https://` URL deliveries are POSTed to, without credentials or " +
					"fragment. Private and loopback addresses are refused unless the server's egress guard allows them.",
				Required: true,
				Validators: append(endpointValidators(),
					notMatching(regexp.MustCompile(`#`), "must not have a fragment")),
			},
			"events": schema.SetAttribute{
				MarkdownDescription: "Event types to receive (1-32): `" + strings.Join(eventTypes, "`, `") + "`. `*` means every " +
					"type except the high-volume `action.invoked`, `action.failed` and `llm.request.completed`, which must be listed explicitly.",
				ElementType: types.StringType,
				Required:    true,
				Validators: []validator.Set{
					setvalidator.SizeBetween(1, 32),
					setvalidator.ValueStringsAre(stringvalidator.OneOf(eventTypes...)),
				},
			},
			"description": schema.StringAttribute{
				MarkdownDescription: "A human note (1-1024 characters).",
				Optional:            true,
				Validators:          []validator.String{stringvalidator.UTF8LengthBetween(1, 1024), multiLine},
			},
			"enabled": schema.BoolAttribute{
				MarkdownDescription: "Whether the webhook receives events (default `true`). The server disables a webhook " +
					"whose deliveries keep failing; the next apply then enables it again.",
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(true),
			},
			"secret_wo": schema.StringAttribute{
				MarkdownDescription: "Your signing secret, `whsec_` followed by standard base64 of 24 to 64 random bytes. " +
					"**Write-only** (Terraform 1.11+): sent to the server and never stored in the state. Sent on create and " +
					"whenever `secret_wo_version` changes. When unset, the server generates one (see `secret`).",
				Optional:   true,
				WriteOnly:  true,
				Sensitive:  true,
				Validators: []validator.String{webhookSecret()},
			},
			"secret_wo_version": schema.Int64Attribute{
				MarkdownDescription: "Change this number to send a new `secret_wo` (a rotation: the old secret keeps signing " +
					"for the grace period).",
				Optional:   true,
				Validators: []validator.Int64{int64validator.AlsoRequires(path.MatchRoot("secret_wo"))},
			},
			"secret": schema.StringAttribute{
				MarkdownDescription: "The signing secret the server generated when `secret_wo` is unset, known to the run that " +
					"created the webhook (or that switched it from `secret_wo` to a generated secret). Null with `secret_wo` " +
					"and after an import. Sensitive: keep the state encrypted.",
				Computed:  true,
				Sensitive: true,
			},
			"version": schema.Int64Attribute{
				MarkdownDescription: "The server's version of the webhook, incremented by every change (also when the server " +
					"disables it); sent as `If-Match`.",
				Computed: true,
			},
			"created_at": schema.StringAttribute{
				MarkdownDescription: "When the webhook was created (RFC 3339, UTC).",
				CustomType:          timetypes.RFC3339Type{},
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"updated_at": schema.StringAttribute{
				MarkdownDescription: "When the webhook was last changed (RFC 3339, UTC).",
				CustomType:          timetypes.RFC3339Type{},
				Computed:            true,
			},
		},
	}
}

// ModifyPlan plans the generated `secret`: null with secret_wo; kept while
// generated; a new one (unknown) when secret_wo is dropped from the
// configuration, as Update then rotates to a generated secret; null after
// an import, which cannot learn the secret.
func (r *webhookResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var wo types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("secret_wo"), &wo)...)
	if resp.Diagnostics.HasError() {
		return
	}
	secret := types.StringUnknown()
	switch {
	case !wo.IsNull():
		secret = types.StringNull()
	case req.State.Raw.IsNull():
		// create: generated by the server
	default:
		var state webhookModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		switch {
		case !state.Secret.IsNull():
			secret = state.Secret
		case state.SecretWOVersion.IsNull():
			secret = types.StringNull()
		}
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("secret"), secret)...)
}

// fill copies the server's webhook into the model; secrets are untouched.
func (m *webhookModel) fill(ctx context.Context, w *client.Webhook, diags *diag.Diagnostics) {
	m.ID = types.StringValue(w.Id)
	m.URL = types.StringValue(w.Url)
	m.Events = setOfStrings(ctx, w.Events, diags)
	m.Description = optString(w.Description)
	m.Enabled = types.BoolValue(w.Enabled)
	m.Version = types.Int64Value(w.Version)
	m.CreatedAt = timetypes.NewRFC3339TimeValue(w.CreatedAt.UTC())
	m.UpdatedAt = timetypes.NewRFC3339TimeValue(w.UpdatedAt.UTC())
}

// webhookSecretValidator checks the Standard Webhooks secret format.
type webhookSecretValidator struct{}

var _ validator.String = webhookSecretValidator{}

// webhookSecret checks `whsec_` + standard base64 of 24 to 64 bytes.
func webhookSecret() validator.String { return webhookSecretValidator{} }

func (webhookSecretValidator) Description(context.Context) string {
	return "must be whsec_ followed by standard base64 of 24 to 64 bytes"
}

func (v webhookSecretValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v webhookSecretValidator) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	b64, ok := strings.CutPrefix(s, "whsec_")
	raw, err := base64.StdEncoding.DecodeString(b64)
	if !ok || err != nil || len(raw) < 24 || len(raw) > 64 {
		// Never echo the value: it is a secret.
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid webhook secret",
			fmt.Sprintf("%s %s (e.g. \"whsec_\" + base64encode of 32 random bytes).", req.Path, v.Description(ctx)))
	}
}
