package provider

import (
	"context"
	"fmt"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-timetypes/timetypes"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
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
	_ resource.Resource                = (*toolsetResource)(nil)
	_ resource.ResourceWithConfigure   = (*toolsetResource)(nil)
	_ resource.ResourceWithImportState = (*toolsetResource)(nil)
)

// NewToolsetResource is the switchboard_toolset resource.
func NewToolsetResource() resource.Resource {
	return &toolsetResource{crud[toolsetModel, client.Toolset]{
		typeName: "toolset", kind: "toolset",
		label: func(m *toolsetModel) string { return m.Name.ValueString() },
		fill:  (*toolsetModel).fill,
		create: func(ctx context.Context, api *apiClient, plan *toolsetModel, _ tfsdk.Config, diags *diag.Diagnostics) (*client.Toolset, error) {
			body := plan.input(ctx, diags)
			body.Name = strPtr(plan.Name)
			if diags.HasError() {
				return nil, nil
			}
			res, err := api.CreateToolsetWithResponse(ctx, body)
			if err != nil {
				return nil, err
			}
			return answered(res.JSON201, res.StatusCode(), res.Body)
		},
		get: func(ctx context.Context, api *apiClient, m *toolsetModel) (*client.Toolset, error) {
			res, err := api.GetToolsetWithResponse(ctx, m.ID.ValueString())
			if err != nil {
				return nil, err
			}
			return answered(res.JSON200, res.StatusCode(), res.Body)
		},
		update: func(ctx context.Context, api *apiClient, plan, state *toolsetModel, _ tfsdk.Config, diags *diag.Diagnostics) (*client.Toolset, error) {
			body := plan.input(ctx, diags)
			if diags.HasError() {
				return nil, nil
			}
			res, err := api.ReplaceToolsetWithResponse(ctx, state.ID.ValueString(), &client.ReplaceToolsetParams{IfMatch: etag(state.Version)}, body)
			if err != nil {
				return nil, err
			}
			return answered(res.JSON200, res.StatusCode(), res.Body)
		},
		remove: func(ctx context.Context, api *apiClient, m *toolsetModel) error {
			res, err := api.DeleteToolsetWithResponse(ctx, m.ID.ValueString(), &client.DeleteToolsetParams{IfMatch: etag(m.Version)})
			if err != nil {
				return err
			}
			return deleted(res.StatusCode(), res.Body)
		},
		// A toolset is imported by its name.
		importID: func(id string) (map[string]attr.Value, string) {
			if !identifierPattern.MatchString(id) {
				return nil, fmt.Sprintf("A toolset is imported by its name (%s), got %q.", identifierPattern, id)
			}
			return map[string]attr.Value{"id": types.StringValue(id), "name": types.StringValue(id)}, ""
		},
	}}
}

// toolsetResource manages one toolset: a named selection of actions served
// at /mcp/{name}.
type toolsetResource struct {
	crud[toolsetModel, client.Toolset]
}

// toolsetEntryPattern is the syntax of a toolset's entries (the server's
// tools.EntryProblem): connector.action, connector.* or connector.
var toolsetEntryPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}(\.([a-z][a-z0-9_]{0,63}|\*))?$`)

// toolsetModel is the resource's state.
type toolsetModel struct {
	ID          types.String      `tfsdk:"id"`
	Name        types.String      `tfsdk:"name"`
	Description types.String      `tfsdk:"description"`
	Tools       types.List        `tfsdk:"tools"`
	Version     types.Int64       `tfsdk:"version"`
	CreatedAt   timetypes.RFC3339 `tfsdk:"created_at"`
	UpdatedAt   timetypes.RFC3339 `tfsdk:"updated_at"`
}

func (r *toolsetResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A toolset: a named selection of actions, served as its own MCP endpoint at " +
			"`/mcp/<name>` and usable as the actions of a model's tool loop. A credential using it still sees only " +
			"the tools its scopes and connector policy allow.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The toolset's name; the import id.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "A lower-case letter, then up to 63 lower-case letters, digits or underscores. " +
					"Changing it replaces the toolset.",
				Required:      true,
				Validators:    identifierValidators(),
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"description": schema.StringAttribute{
				MarkdownDescription: "What the toolset is for (1-4096 characters).",
				Optional:            true,
				Validators:          []validator.String{stringvalidator.UTF8LengthBetween(1, 4096), multiLine},
			},
			"tools": schema.ListAttribute{
				MarkdownDescription: "The actions the toolset offers (1-256, distinct), each `connector.action` (one action), " +
					"`connector.*` or `connector` (every action of the connector, including actions created later). " +
					"Entries may name connectors and actions that do not exist yet: they select nothing until they do.",
				ElementType: types.StringType,
				Required:    true,
				Validators: []validator.List{
					listvalidator.SizeBetween(1, 256),
					listvalidator.UniqueValues(),
					listvalidator.ValueStringsAre(stringvalidator.RegexMatches(toolsetEntryPattern,
						"must be connector.action, connector.* or connector (lower-case names of up to 64 letters, digits or underscores)")),
				},
			},
			"version": schema.Int64Attribute{
				MarkdownDescription: "The server's version of the toolset, incremented by every change; sent as `If-Match`.",
				Computed:            true,
			},
			"created_at": schema.StringAttribute{
				MarkdownDescription: "When the toolset was created (RFC 3339, UTC).",
				CustomType:          timetypes.RFC3339Type{},
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"updated_at": schema.StringAttribute{
				MarkdownDescription: "When the toolset was last changed (RFC 3339, UTC).",
				CustomType:          timetypes.RFC3339Type{},
				Computed:            true,
			},
		},
	}
}

// input is the body that creates or replaces the planned toolset (without
// the name, which create adds).
func (m *toolsetModel) input(ctx context.Context, diags *diag.Diagnostics) client.ToolsetInput {
	return client.ToolsetInput{Description: strPtr(m.Description), Tools: listStrings(ctx, m.Tools, diags)}
}

// fill copies the server's toolset into the model.
func (m *toolsetModel) fill(ctx context.Context, t *client.Toolset, diags *diag.Diagnostics) {
	m.ID = types.StringValue(t.Name)
	m.Name = types.StringValue(t.Name)
	m.Description = optString(t.Description)
	m.Tools = listOfStrings(ctx, t.Tools, diags)
	m.Version = types.Int64Value(t.Version)
	m.CreatedAt = timetypes.NewRFC3339TimeValue(t.CreatedAt.UTC())
	m.UpdatedAt = timetypes.NewRFC3339TimeValue(t.UpdatedAt.UTC())
}
