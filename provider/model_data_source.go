package provider

import (
	"context"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework-timetypes/timetypes"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

var (
	_ datasource.DataSource              = (*modelDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*modelDataSource)(nil)
)

// NewModelDataSource is the switchboard_model data source.
func NewModelDataSource() datasource.DataSource { return &modelDataSource{} }

// modelDataSource reads one model of the catalog.
type modelDataSource struct {
	api *apiClient
}

// modelModel is the data source's state.
type modelModel struct {
	ID           types.String      `tfsdk:"id"`
	Provider     types.String      `tfsdk:"provider_name"`
	Name         types.String      `tfsdk:"name"`
	Capabilities types.List        `tfsdk:"capabilities"`
	MaxTokens    types.Int64       `tfsdk:"max_tokens"`
	Dimensions   types.Int64       `tfsdk:"dimensions"`
	Pricing      *pricingModel     `tfsdk:"pricing"`
	CreatedAt    timetypes.RFC3339 `tfsdk:"created_at"`
}

// pricingModel is a model's price.
type pricingModel struct {
	Input  types.Float64 `tfsdk:"input"`
	Output types.Float64 `tfsdk:"output"`
}

func (d *modelDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_model"
}

func (d *modelDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "One model of the server's catalog, with its pricing and creation date. Needs the `llm` scope.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The model id, `<provider>/<name>`, e.g. `openai/gpt-4o-mini` (the name may itself contain `/`).",
				Required:            true,
				Validators: []validator.String{stringvalidator.RegexMatches(modelIDPattern,
					"must be <provider>/<name>, e.g. openai/gpt-4o-mini")},
			},
			"provider_name": schema.StringAttribute{
				MarkdownDescription: "The provider part of the id (`provider` is a name Terraform reserves).",
				Computed:            true,
			},
			"name": schema.StringAttribute{MarkdownDescription: "The model name part of the id.", Computed: true},
			"capabilities": schema.ListAttribute{
				MarkdownDescription: "What the model does: `chat`, `code`, `reasoning`, `vision`, `embeddings`, `completion`.",
				ElementType:         types.StringType,
				Computed:            true,
			},
			"max_tokens": schema.Int64Attribute{
				MarkdownDescription: "Chat and text models: the token limit; null when unknown.",
				Computed:            true,
			},
			"dimensions": schema.Int64Attribute{
				MarkdownDescription: "Embedding models: the vector length; null otherwise.",
				Computed:            true,
			},
			"pricing": schema.SingleNestedAttribute{
				MarkdownDescription: "Prices in USD per million tokens; null when the operator configured none.",
				Computed:            true,
				Attributes: map[string]schema.Attribute{
					"input":  schema.Float64Attribute{MarkdownDescription: "USD per million prompt tokens.", Computed: true},
					"output": schema.Float64Attribute{MarkdownDescription: "USD per million completion tokens.", Computed: true},
				},
			},
			"created_at": schema.StringAttribute{
				MarkdownDescription: "The provider's creation date when discovery reports one, else when the model entered the catalog (RFC 3339).",
				CustomType:          timetypes.RFC3339Type{},
				Computed:            true,
			},
		},
	}
}

func (d *modelDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.api = configuredClient(req.ProviderData, &resp.Diagnostics)
}

func (d *modelDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	ctx, report := watchThrottling(ctx)
	defer report(&resp.Diagnostics)
	var m modelModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id := m.ID.ValueString()
	res, err := d.api.GetModelWithResponse(ctx, id)
	if err != nil {
		d.api.addTransportError(&resp.Diagnostics, "read model "+id, err)
		return
	}
	if res.JSON200 == nil {
		if res.StatusCode() == http.StatusNotFound {
			resp.Diagnostics.AddAttributeError(pathID, "Model not found",
				"The server's catalog has no model "+id+". List the models with the switchboard_models data source or GET /v1/models.")
			return
		}
		d.api.addResponseError(&resp.Diagnostics, "read model "+id, res.StatusCode(), res.Body)
		return
	}
	mod := res.JSON200
	m.Provider = types.StringValue(mod.Provider)
	m.Name = types.StringValue(mod.Name)
	m.Capabilities = listOfStrings(ctx, mod.Capabilities, &resp.Diagnostics)
	m.MaxTokens = optInt(mod.MaxTokens)
	m.Dimensions = optInt(mod.Dimensions)
	m.CreatedAt = timetypes.NewRFC3339TimeValue(mod.CreatedAt.UTC())
	m.Pricing = nil
	if p := mod.Pricing; p != nil {
		m.Pricing = &pricingModel{Input: types.Float64Value(p.Input), Output: types.Float64Value(p.Output)}
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
