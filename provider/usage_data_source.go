package provider

import (
	"context"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timetypes/timetypes"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
)

var (
	_ datasource.DataSource              = (*usageDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*usageDataSource)(nil)
)

// NewUsageDataSource is the switchboard_usage data source.
func NewUsageDataSource() datasource.DataSource { return &usageDataSource{} }

// usageDataSource reads the model usage report (GET /v1/usage).
type usageDataSource struct {
	api *apiClient
}

// modelIDPattern is a model id, <provider>/<name> (the name may contain /).
var modelIDPattern = regexp.MustCompile(`^[^/]+/.+$`)

// usageGroupBys are the dimensions a report groups by, from the generated client.
var usageGroupBys = []string{
	string(client.UsageGroupByKey), string(client.UsageGroupByModel),
	string(client.UsageGroupByDay), string(client.UsageGroupByHour),
}

// usageModel is the data source's state.
type usageModel struct {
	ID      types.String      `tfsdk:"id"`
	From    timetypes.RFC3339 `tfsdk:"from"`
	To      timetypes.RFC3339 `tfsdk:"to"`
	Key     types.String      `tfsdk:"key"`
	Model   types.String      `tfsdk:"model"`
	GroupBy types.List        `tfsdk:"group_by"`
	Rows    types.List        `tfsdk:"rows"`
	Total   types.Object      `tfsdk:"total"`
}

// usageCounts are the sums of a row and of the total.
type usageCounts struct {
	Requests         types.Int64   `tfsdk:"requests"`
	PromptTokens     types.Int64   `tfsdk:"prompt_tokens"`
	CompletionTokens types.Int64   `tfsdk:"completion_tokens"`
	TotalTokens      types.Int64   `tfsdk:"total_tokens"`
	CostUSD          types.Float64 `tfsdk:"cost_usd"`
}

// usageRow is one group of the report.
type usageRow struct {
	Key    types.String      `tfsdk:"key"`
	Model  types.String      `tfsdk:"model"`
	Period timetypes.RFC3339 `tfsdk:"period"`
	usageCounts
}

var usageCountAttrTypes = map[string]attr.Type{
	"requests":          types.Int64Type,
	"prompt_tokens":     types.Int64Type,
	"completion_tokens": types.Int64Type,
	"total_tokens":      types.Int64Type,
	"cost_usd":          types.Float64Type,
}

var usageRowAttrTypes = func() map[string]attr.Type {
	m := map[string]attr.Type{"key": types.StringType, "model": types.StringType, "period": timetypes.RFC3339Type{}}
	for k, v := range usageCountAttrTypes {
		m[k] = v
	}
	return m
}()

// usageCountAttributes are the schema of the sums.
func usageCountAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"requests":          schema.Int64Attribute{MarkdownDescription: "Model calls.", Computed: true},
		"prompt_tokens":     schema.Int64Attribute{MarkdownDescription: "Prompt (input) tokens.", Computed: true},
		"completion_tokens": schema.Int64Attribute{MarkdownDescription: "Completion (output) tokens.", Computed: true},
		"total_tokens":      schema.Int64Attribute{MarkdownDescription: "`prompt_tokens + completion_tokens`.", Computed: true},
		"cost_usd": schema.Float64Attribute{
			MarkdownDescription: "Cost in USD from the model catalog's pricing (models without pricing cost 0), rounded to 1e-10 USD.",
			Computed:            true,
		},
	}
}

func (d *usageDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_usage"
}

func (d *usageDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	rowAttrs := usageCountAttributes()
	rowAttrs["key"] = schema.StringAttribute{
		MarkdownDescription: "The credential (API key id, OAuth client id or `ext:<issuer>:<sub>`) when grouped by `key`; null otherwise.",
		Computed:            true,
	}
	rowAttrs["model"] = schema.StringAttribute{MarkdownDescription: "The model id when grouped by `model`; null otherwise.", Computed: true}
	rowAttrs["period"] = schema.StringAttribute{
		MarkdownDescription: "The start of the UTC day or hour when grouped by `day` or `hour`; null otherwise.",
		CustomType:          timetypes.RFC3339Type{},
		Computed:            true,
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Language-model usage and spend recorded by the server (`GET /v1/usage`): requests, tokens and " +
			"cost in USD, summed per credential, model and/or period, so that a plan can read spend (e.g. to compare it " +
			"with a key's `budget`). A credential with the `admin` scope sees everyone's usage; any other sees only its own.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The query, as `from=..,to=..,key=..,model=..,group_by=..` (empty parts when unset).",
				Computed:            true,
			},
			"from": schema.StringAttribute{
				MarkdownDescription: "Start (RFC 3339), rounded down to the hour; unbounded when unset.",
				CustomType:          timetypes.RFC3339Type{},
				Optional:            true,
			},
			"to": schema.StringAttribute{
				MarkdownDescription: "End (RFC 3339, exclusive), after `from`; unbounded when unset.",
				CustomType:          timetypes.RFC3339Type{},
				Optional:            true,
			},
			"key": schema.StringAttribute{
				MarkdownDescription: "Only this credential's usage: an API key id (`key_...`, e.g. `switchboard_api_key.x.id`), " +
					"an OAuth client id (`oc_...`) or `ext:<issuer>:<sub>`.",
				Optional:   true,
				Validators: []validator.String{stringvalidator.LengthBetween(1, 256)},
			},
			"model": schema.StringAttribute{
				MarkdownDescription: "Only this model's usage (`provider/name`).",
				Optional:            true,
				Validators: []validator.String{
					stringvalidator.LengthBetween(1, 256),
					stringvalidator.RegexMatches(modelIDPattern, "must be <provider>/<name>"),
				},
			},
			"group_by": schema.ListAttribute{
				MarkdownDescription: "The dimensions to keep apart (1-3 of `" + strings.Join(usageGroupBys, "`, `") + "`); the others " +
					"are summed over. `model` when unset.",
				ElementType: types.StringType,
				Optional:    true,
				Validators: []validator.List{
					listvalidator.SizeBetween(1, 3),
					listvalidator.UniqueValues(),
					listvalidator.ValueStringsAre(stringvalidator.OneOf(usageGroupBys...)),
				},
			},
			"rows": schema.ListNestedAttribute{
				MarkdownDescription: "One row per group, sorted by period, key and model.",
				Computed:            true,
				NestedObject:        schema.NestedAttributeObject{Attributes: rowAttrs},
			},
			"total": schema.SingleNestedAttribute{
				MarkdownDescription: "The sums over every row.",
				Computed:            true,
				Attributes:          usageCountAttributes(),
			},
		},
	}
}

func (d *usageDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.api = configuredClient(req.ProviderData, &resp.Diagnostics)
}

func (d *usageDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	ctx, report := watchThrottling(ctx)
	defer report(&resp.Diagnostics)
	var m usageModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	params := &client.GetUsageParams{Key: strPtr(m.Key), Model: strPtr(m.Model)}
	if !m.From.IsNull() {
		t, ds := m.From.ValueRFC3339Time()
		resp.Diagnostics.Append(ds...)
		params.From = &t
	}
	if !m.To.IsNull() {
		t, ds := m.To.ValueRFC3339Time()
		resp.Diagnostics.Append(ds...)
		params.To = &t
	}
	if !m.GroupBy.IsNull() {
		var gs []client.UsageGroupBy
		for _, g := range listStrings(ctx, m.GroupBy, &resp.Diagnostics) {
			gs = append(gs, client.UsageGroupBy(g))
		}
		params.GroupBy = &gs
	}
	if resp.Diagnostics.HasError() {
		return
	}
	res, err := d.api.GetUsageWithResponse(ctx, params)
	if err != nil {
		d.api.addTransportError(&resp.Diagnostics, "read usage", err)
		return
	}
	if res.JSON200 == nil {
		d.api.addResponseError(&resp.Diagnostics, "read usage", res.StatusCode(), res.Body)
		return
	}
	rows := make([]attr.Value, 0, len(res.JSON200.Data))
	for _, r := range res.JSON200.Data {
		row := usageRow{
			Key:         optString(r.Key),
			Model:       optString(r.Model),
			Period:      keepTime(timetypes.NewRFC3339Null(), r.Period),
			usageCounts: counts(r.Requests, r.PromptTokens, r.CompletionTokens, r.TotalTokens, r.CostUsd),
		}
		v, ds := types.ObjectValueFrom(ctx, usageRowAttrTypes, row)
		resp.Diagnostics.Append(ds...)
		rows = append(rows, v)
	}
	list, ds := types.ListValue(types.ObjectType{AttrTypes: usageRowAttrTypes}, rows)
	resp.Diagnostics.Append(ds...)
	m.Rows = list
	t := res.JSON200.Total
	total, ds := types.ObjectValueFrom(ctx, usageCountAttrTypes, counts(t.Requests, t.PromptTokens, t.CompletionTokens, t.TotalTokens, t.CostUsd))
	resp.Diagnostics.Append(ds...)
	m.Total = total
	m.ID = types.StringValue(usageID(ctx, &m, &resp.Diagnostics))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// counts are sums as state values.
func counts(requests, prompt, completion, total int64, cost float64) usageCounts {
	return usageCounts{
		Requests:         types.Int64Value(requests),
		PromptTokens:     types.Int64Value(prompt),
		CompletionTokens: types.Int64Value(completion),
		TotalTokens:      types.Int64Value(total),
		CostUSD:          types.Float64Value(cost),
	}
}

// usageID names the query.
func usageID(ctx context.Context, m *usageModel, diags *diag.Diagnostics) string {
	return "from=" + m.From.ValueString() + ",to=" + m.To.ValueString() + ",key=" + m.Key.ValueString() +
		",model=" + m.Model.ValueString() + ",group_by=" + strings.Join(listStrings(ctx, m.GroupBy, diags), "+")
}
