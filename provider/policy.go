package provider

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/float64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
)

// policyModel is the policy of a credential (API key, OAuth client), the
// part of its state that changes in place. Embedded in the resource models.
type policyModel struct {
	RateLimit  *rateLimitModel `tfsdk:"rate_limit"`
	Models     types.Set       `tfsdk:"models"`
	Connectors types.Set       `tfsdk:"connectors"`
	Budget     *budgetModel    `tfsdk:"budget"`
}

type rateLimitModel struct {
	RequestsPerMinute types.Int64 `tfsdk:"requests_per_minute"`
	TokensPerMinute   types.Int64 `tfsdk:"tokens_per_minute"`
}

type budgetModel struct {
	USD     types.Float64 `tfsdk:"usd"`
	Period  types.String  `tfsdk:"period"`
	AlertAt types.List    `tfsdk:"alert_at"`
}

// The server's limits on a policy (server/auth/policy.go).
const (
	maxPolicyEntries = 100
	maxModelPattern  = 256
	maxPerMinute     = 1_000_000_000
	maxBudgetUSD     = 1_000_000_000
	maxBudgetAlerts  = 10
)

// budgetPeriods are the budget periods, from the generated client.
var budgetPeriods = []string{
	string(client.BudgetPeriodDay), string(client.BudgetPeriodWeek),
	string(client.BudgetPeriodMonth), string(client.BudgetPeriodTotal),
}

// connectorEntryPattern is a connector name, optionally "." and an action name.
var connectorEntryPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}(\.[a-z][a-z0-9_]{0,63})?$`)

// policyAttributes are the schema of a policy; credential is "key" or
// "client", for the descriptions. None of them requires replacement: a
// change is sent with PUT and the secret stays the same.
func policyAttributes(credential string) map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"rate_limit": schema.SingleNestedAttribute{
			MarkdownDescription: "Overrides the server's per-credential limits for this " + credential + "; an unset field keeps the " +
				"server's default (`limits.requestsPerMinute`, `limits.tokensPerMinute`). Changes in place.",
			Optional:   true,
			Validators: []validator.Object{notEmptyObject()},
			Attributes: map[string]schema.Attribute{
				"requests_per_minute": schema.Int64Attribute{
					MarkdownDescription: "Requests per minute on every authenticated route (1-1000000000).",
					Optional:            true,
					Validators:          []validator.Int64{int64validator.Between(1, maxPerMinute)},
				},
				"tokens_per_minute": schema.Int64Attribute{
					MarkdownDescription: "Model tokens (prompt + completion) per minute on the model routes (1-1000000000).",
					Optional:            true,
					Validators:          []validator.Int64{int64validator.Between(1, maxPerMinute)},
				},
			},
		},
		"models": schema.SetAttribute{
			MarkdownDescription: "The models the " + credential + " may use (1-100): catalog ids (`openai/gpt-4o-mini`) or patterns where " +
				"`*` matches any run of characters, `/` included (`openai/*`). Unset: every model. Any other model is refused with " +
				"403 and left out of the model lists. Changes in place.",
			ElementType: types.StringType,
			Optional:    true,
			Validators: []validator.Set{
				setvalidator.SizeBetween(1, maxPolicyEntries),
				setvalidator.ValueStringsAre(
					stringvalidator.LengthBetween(1, maxModelPattern),
					notMatching(regexp.MustCompile(`[\s\x00-\x1f\x7f]`), "must not contain spaces or control characters"),
					notMatching(regexp.MustCompile(`^\*{2,}$`), "must name more than wildcards"),
				),
			},
		},
		"connectors": schema.SetAttribute{
			MarkdownDescription: "The connectors the " + credential + " may run actions of (1-100): a connector name (`github`, every " +
				"action) or a `connector.action` pair (`github.list_issues`). Unset: every connector. Any other action is refused " +
				"with 403. Changes in place.",
			ElementType: types.StringType,
			Optional:    true,
			Validators: []validator.Set{
				setvalidator.SizeBetween(1, maxPolicyEntries),
				setvalidator.ValueStringsAre(stringvalidator.RegexMatches(connectorEntryPattern,
					"must be a connector name (github) or a connector.action pair (github.list_issues), lower case")),
			},
		},
		"budget": schema.SingleNestedAttribute{
			MarkdownDescription: "A spend limit in USD per period, counted from the model catalog's pricing on every model route. " +
				"Once spent, the next model call is refused with 429 `budget_exceeded` until the period ends; a stream already " +
				"running is never cut. Read the spend with the `switchboard_usage` data source. Changes in place.",
			Optional: true,
			Attributes: map[string]schema.Attribute{
				"usd": schema.Float64Attribute{
					MarkdownDescription: "The most the " + credential + " may spend per period, in USD (more than 0, at most 1000000000).",
					Required:            true,
					Validators:          []validator.Float64{float64validator.AtMost(maxBudgetUSD), moreThanZero()},
				},
				"period": schema.StringAttribute{
					MarkdownDescription: "`day` (UTC calendar day), `week` (ISO week, from Monday), `month` (UTC calendar month) " +
						"or `total` (the " + credential + "'s whole life).",
					Required:   true,
					Validators: []validator.String{stringvalidator.OneOf(budgetPeriods...)},
				},
				"alert_at": schema.ListAttribute{
					MarkdownDescription: "Fractions of `usd`, strictly ascending, each between 0 and 1 exclusive (e.g. `[0.5, 0.8]`), " +
						"at which the server records a `usage.budget_alert` event, once per fraction and period.",
					ElementType: types.Float64Type,
					Optional:    true,
					Validators:  []validator.List{listvalidator.SizeBetween(1, maxBudgetAlerts), ascendingFractions()},
				},
			},
		},
	}
}

// withPolicy adds the policy attributes to attrs.
func withPolicy(attrs map[string]schema.Attribute, credential string) map[string]schema.Attribute {
	for k, v := range policyAttributes(credential) {
		attrs[k] = v
	}
	return attrs
}

// scopesAttribute is a credential's scopes, replace-only (the server keeps
// them for the credential's life); the description is what, the scopes
// known, then more.
func scopesAttribute(what, more string) schema.SetAttribute {
	return schema.SetAttribute{
		MarkdownDescription: what + " (1-16 of): `" + strings.Join(scopes, "`, `") + "`. " + more,
		ElementType:         types.StringType,
		Required:            true,
		PlanModifiers:       []planmodifier.Set{setplanmodifier.RequiresReplace()},
		Validators: []validator.Set{
			setvalidator.SizeBetween(1, 16),
			setvalidator.ValueStringsAre(stringvalidator.OneOf(scopes...)),
		},
	}
}

// scopesToAPI and scopesFromAPI convert a credential's scopes.
func scopesToAPI(ctx context.Context, s types.Set, diags *diag.Diagnostics) []client.Scope {
	ss := setStrings(ctx, s, diags)
	out := make([]client.Scope, len(ss))
	for i, v := range ss {
		out[i] = client.Scope(v)
	}
	return out
}

func scopesFromAPI(ctx context.Context, scopes []client.Scope, diags *diag.Diagnostics) types.Set {
	ss := make([]string, len(scopes))
	for i, s := range scopes {
		ss[i] = string(s)
	}
	return setOfStrings(ctx, ss, diags)
}

// idOr names an object in messages: its id once the server gave one,
// otherwise what the plan knows of it.
func idOr(id types.String, planned string) string {
	if id.IsUnknown() || id.IsNull() {
		return planned
	}
	return id.ValueString()
}

// apiPolicy is a policy as the wire has it (the same four fields on every
// credential's create and update bodies).
type apiPolicy struct {
	RateLimit  *client.RateLimitOverride
	Models     *[]string
	Connectors *[]string
	Budget     *client.Budget
}

// toAPI is the policy to send.
func (p *policyModel) toAPI(ctx context.Context, diags *diag.Diagnostics) apiPolicy {
	var out apiPolicy
	if r := p.RateLimit; r != nil {
		out.RateLimit = &client.RateLimitOverride{RequestsPerMinute: intPtr(r.RequestsPerMinute), TokensPerMinute: intPtr(r.TokensPerMinute)}
	}
	if !p.Models.IsNull() {
		ss := setStrings(ctx, p.Models, diags)
		out.Models = &ss
	}
	if !p.Connectors.IsNull() {
		ss := setStrings(ctx, p.Connectors, diags)
		out.Connectors = &ss
	}
	if b := p.Budget; b != nil {
		out.Budget = &client.Budget{Usd: b.USD.ValueFloat64(), Period: client.BudgetPeriod(b.Period.ValueString())}
		if !b.AlertAt.IsNull() {
			var fs []float64
			diags.Append(b.AlertAt.ElementsAs(ctx, &fs, false)...)
			out.Budget.AlertAt = &fs
		}
	}
	return out
}

// fill copies the server's policy into the model.
func (p *policyModel) fill(ctx context.Context, a apiPolicy, diags *diag.Diagnostics) {
	p.RateLimit = nil
	if r := a.RateLimit; r != nil && (r.RequestsPerMinute != nil || r.TokensPerMinute != nil) {
		p.RateLimit = &rateLimitModel{RequestsPerMinute: optInt(r.RequestsPerMinute), TokensPerMinute: optInt(r.TokensPerMinute)}
	}
	p.Models = types.SetNull(types.StringType)
	if a.Models != nil {
		p.Models = setOfStrings(ctx, *a.Models, diags)
	}
	p.Connectors = types.SetNull(types.StringType)
	if a.Connectors != nil {
		p.Connectors = setOfStrings(ctx, *a.Connectors, diags)
	}
	p.Budget = nil
	if b := a.Budget; b != nil {
		p.Budget = &budgetModel{
			USD:     types.Float64Value(b.Usd),
			Period:  types.StringValue(string(b.Period)),
			AlertAt: types.ListNull(types.Float64Type),
		}
		if b.AlertAt != nil && len(*b.AlertAt) > 0 {
			v, d := types.ListValueFrom(ctx, types.Float64Type, *b.AlertAt)
			diags.Append(d...)
			p.Budget.AlertAt = v
		}
	}
}

// intPtr is a known int64 value as an *int, nil when null.
func intPtr(v types.Int64) *int {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	i := int(v.ValueInt64())
	return &i
}

// notEmptyObjectValidator refuses an object whose attributes are all null:
// it would set nothing, and the server drops it.
type notEmptyObjectValidator struct{}

var _ validator.Object = notEmptyObjectValidator{}

func notEmptyObject() validator.Object { return notEmptyObjectValidator{} }

func (notEmptyObjectValidator) Description(context.Context) string {
	return "must set at least one attribute (or leave the block out)"
}

func (v notEmptyObjectValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v notEmptyObjectValidator) ValidateObject(ctx context.Context, req validator.ObjectRequest, resp *validator.ObjectResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	names := make([]string, 0, len(req.ConfigValue.Attributes()))
	for name, a := range req.ConfigValue.Attributes() {
		if !a.IsNull() {
			return
		}
		names = append(names, name)
	}
	slices.Sort(names)
	resp.Diagnostics.AddAttributeError(req.Path, "Empty "+req.Path.String(),
		fmt.Sprintf("%s sets none of %s: set at least one, or leave %s out to keep the server's defaults.",
			req.Path, strings.Join(names, ", "), req.Path))
}

// moreThanZeroValidator refuses a number that is not more than 0.
type moreThanZeroValidator struct{}

var _ validator.Float64 = moreThanZeroValidator{}

func moreThanZero() validator.Float64 { return moreThanZeroValidator{} }

func (moreThanZeroValidator) Description(context.Context) string { return "must be more than 0" }

func (v moreThanZeroValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v moreThanZeroValidator) ValidateFloat64(_ context.Context, req validator.Float64Request, resp *validator.Float64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if f := req.ConfigValue.ValueFloat64(); !(f > 0) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid budget",
			fmt.Sprintf("%s must be more than 0, got %v; to remove the limit, leave the budget out.", req.Path, f))
	}
}

// ascendingFractionsValidator checks a list of fractions: each in (0, 1),
// strictly ascending.
type ascendingFractionsValidator struct{}

var _ validator.List = ascendingFractionsValidator{}

func ascendingFractions() validator.List { return ascendingFractionsValidator{} }

func (ascendingFractionsValidator) Description(context.Context) string {
	return "must be strictly ascending fractions, each between 0 and 1 exclusive"
}

func (v ascendingFractionsValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v ascendingFractionsValidator) ValidateList(_ context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	prev, known := 0.0, false
	for i, e := range req.ConfigValue.Elements() {
		f, ok := e.(types.Float64)
		if !ok || f.IsNull() || f.IsUnknown() {
			known = false
			continue
		}
		x := f.ValueFloat64()
		at := req.Path.AtListIndex(i)
		switch {
		case !(x > 0 && x < 1):
			resp.Diagnostics.AddAttributeError(at, "Invalid alert fraction",
				fmt.Sprintf("%s must be a fraction between 0 and 1 exclusive (0.8 for 80%%), got %v.", at, x))
		case known && x <= prev:
			resp.Diagnostics.AddAttributeError(at, "Invalid alert fraction",
				fmt.Sprintf("%s: the fractions must be strictly ascending, but %v follows %v.", at, x, prev))
		}
		prev, known = x, true
	}
}
