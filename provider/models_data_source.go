package provider

import (
	"context"
	"strings"

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
	_ datasource.DataSource              = (*modelsDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*modelsDataSource)(nil)
)

// NewModelsDataSource is the switchboard_models data source.
func NewModelsDataSource() datasource.DataSource { return &modelsDataSource{} }

// modelsDataSource lists the model catalog.
type modelsDataSource struct {
	api *apiClient
}

// capabilities are the model capabilities the catalog filters by.
var capabilities = []string{
	string(client.Chat), string(client.Code), string(client.Reasoning),
	string(client.Vision), string(client.Embeddings), string(client.Completion),
}

// modelsModel is the data source's state.
type modelsModel struct {
	ID         types.String `tfsdk:"id"`
	Provider   types.String `tfsdk:"provider_name"`
	Capability types.String `tfsdk:"capability"`
	Models     types.List   `tfsdk:"models"`
}

// modelEntry is one model of the list.
type modelEntry struct {
	ID           types.String `tfsdk:"id"`
	Provider     types.String `tfsdk:"provider"`
	Name         types.String `tfsdk:"name"`
	Capabilities types.List   `tfsdk:"capabilities"`
	MaxTokens    types.Int64  `tfsdk:"max_tokens"`
	Dimensions   types.Int64  `tfsdk:"dimensions"`
}

var modelEntryAttrTypes = map[string]attr.Type{
	"id":           types.StringType,
	"provider":     types.StringType,
	"name":         types.StringType,
	"capabilities": types.ListType{ElemType: types.StringType},
	"max_tokens":   types.Int64Type,
	"dimensions":   types.Int64Type,
}

func (d *modelsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_models"
}

func (d *modelsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The models of the server's catalog (configured, built-in and discovered), sorted by id, " +
			"optionally filtered by provider and capability. Needs the `llm` scope.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The filters, as `provider=<provider_name>,capability=<capability>` (empty parts when unset).",
				Computed:            true,
			},
			"provider_name": schema.StringAttribute{
				MarkdownDescription: "Only models of this provider (the part of the model id before `/`), e.g. `openai`. " +
					"(`provider` is a name Terraform reserves.)",
				Optional:   true,
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"capability": schema.StringAttribute{
				MarkdownDescription: "Only models with this capability: `" + strings.Join(capabilities, "`, `") + "`.",
				Optional:            true,
				Validators:          []validator.String{stringvalidator.OneOf(capabilities...)},
			},
			"models": schema.ListNestedAttribute{
				MarkdownDescription: "The models, sorted by id.",
				Computed:            true,
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"id":       schema.StringAttribute{MarkdownDescription: "`<provider>/<name>`, as requests name the model.", Computed: true},
					"provider": schema.StringAttribute{MarkdownDescription: "The provider part of the id.", Computed: true},
					"name":     schema.StringAttribute{MarkdownDescription: "The model name part of the id.", Computed: true},
					"capabilities": schema.ListAttribute{
						MarkdownDescription: "What the model does: `chat`, `code`, `reasoning`, `vision`, `embeddings`, `completion`.",
						ElementType:         types.StringType,
						Computed:            true,
					},
					"max_tokens": schema.Int64Attribute{
						MarkdownDescription: "Chat and text models: the token limit; null when unknown (e.g. a discovered model).",
						Computed:            true,
					},
					"dimensions": schema.Int64Attribute{
						MarkdownDescription: "Embedding models: the vector length; null otherwise.",
						Computed:            true,
					},
				}},
			},
		},
	}
}

func (d *modelsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.api = configuredClient(req.ProviderData, &resp.Diagnostics)
}

func (d *modelsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	ctx, report := watchThrottling(ctx)
	defer report(&resp.Diagnostics)
	var m modelsModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	params := &client.ListModelsParams{Provider: strPtr(m.Provider)}
	if c := strPtr(m.Capability); c != nil {
		v := client.ListModelsParamsCapability(*c)
		params.Capability = &v
	}
	var entries []attr.Value
	for {
		res, err := d.api.ListModelsWithResponse(ctx, params)
		if err != nil {
			d.api.addTransportError(&resp.Diagnostics, "list models", err)
			return
		}
		if res.JSON200 == nil {
			d.api.addResponseError(&resp.Diagnostics, "list models", res.StatusCode(), res.Body)
			return
		}
		for _, mod := range res.JSON200.Data {
			entries = append(entries, modelEntryValue(ctx, mod, &resp.Diagnostics))
		}
		if res.JSON200.NextCursor == nil || *res.JSON200.NextCursor == "" {
			break
		}
		params.Cursor = res.JSON200.NextCursor
	}
	list, diags := types.ListValue(types.ObjectType{AttrTypes: modelEntryAttrTypes}, orEmpty(entries))
	resp.Diagnostics.Append(diags...)
	m.Models = list
	m.ID = types.StringValue("provider=" + m.Provider.ValueString() + ",capability=" + m.Capability.ValueString())
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// modelEntryValue is one listed model as an object value.
func modelEntryValue(ctx context.Context, mod client.Model, diags *diag.Diagnostics) attr.Value {
	v, d := types.ObjectValueFrom(ctx, modelEntryAttrTypes, modelEntry{
		ID:           types.StringValue(mod.Id),
		Provider:     types.StringValue(mod.Provider),
		Name:         types.StringValue(mod.Name),
		Capabilities: listOfStrings(ctx, mod.Capabilities, diags),
		MaxTokens:    optInt(mod.MaxTokens),
		Dimensions:   optInt(mod.Dimensions),
	})
	diags.Append(d...)
	return v
}

// optInt is an *int as a state value (null for nil).
func optInt(p *int) types.Int64 {
	if p == nil {
		return types.Int64Null()
	}
	return types.Int64Value(int64(*p))
}

// orEmpty is vs, or an empty (not nil) slice.
func orEmpty(vs []attr.Value) []attr.Value {
	if vs == nil {
		return []attr.Value{}
	}
	return vs
}
