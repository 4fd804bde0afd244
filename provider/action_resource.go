package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-jsontypes/jsontypes"
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
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
)

var (
	_ resource.Resource                   = (*actionResource)(nil)
	_ resource.ResourceWithConfigure      = (*actionResource)(nil)
	_ resource.ResourceWithImportState    = (*actionResource)(nil)
	_ resource.ResourceWithValidateConfig = (*actionResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*actionResource)(nil)
)

// NewActionResource is the switchboard_action resource.
func NewActionResource() resource.Resource {
	return &actionResource{crud[actionModel, client.Action]{
		typeName: "action", kind: "action",
		label: func(m *actionModel) string { return m.Connector.ValueString() + "/" + m.Name.ValueString() },
		fill:  (*actionModel).fill,
		create: func(ctx context.Context, api *apiClient, plan *actionModel, _ tfsdk.Config, diags *diag.Diagnostics) (*client.Action, error) {
			body := plan.input(ctx, diags)
			body.Name = strPtr(plan.Name)
			if diags.HasError() {
				return nil, nil
			}
			res, err := api.CreateActionWithResponse(ctx, plan.Connector.ValueString(), body)
			if err != nil {
				return nil, err
			}
			return answered(res.JSON201, res.StatusCode(), res.Body)
		},
		get: func(ctx context.Context, api *apiClient, m *actionModel) (*client.Action, error) {
			res, err := api.GetActionWithResponse(ctx, m.Connector.ValueString(), m.Name.ValueString())
			if err != nil {
				return nil, err
			}
			return answered(res.JSON200, res.StatusCode(), res.Body)
		},
		update: func(ctx context.Context, api *apiClient, plan, state *actionModel, _ tfsdk.Config, diags *diag.Diagnostics) (*client.Action, error) {
			body := plan.input(ctx, diags)
			if diags.HasError() {
				return nil, nil
			}
			res, err := api.ReplaceActionWithResponse(ctx, state.Connector.ValueString(), state.Name.ValueString(),
				&client.ReplaceActionParams{IfMatch: etag(state.Version)}, body)
			if err != nil {
				return nil, err
			}
			return answered(res.JSON200, res.StatusCode(), res.Body)
		},
		// 404: already gone, with the action or with its whole connector.
		remove: func(ctx context.Context, api *apiClient, m *actionModel) error {
			res, err := api.DeleteActionWithResponse(ctx, m.Connector.ValueString(), m.Name.ValueString(),
				&client.DeleteActionParams{IfMatch: etag(m.Version)})
			if err != nil {
				return err
			}
			return deleted(res.StatusCode(), res.Body)
		},
		// An action is imported by `<connector>/<action>`.
		importID: func(id string) (map[string]attr.Value, string) {
			connector, name, ok := cutID(id)
			if !ok || !identifierPattern.MatchString(connector) || !identifierPattern.MatchString(name) {
				return nil, fmt.Sprintf("An action is imported by <connector>/<action>, e.g. weather/forecast, got %q.", id)
			}
			return map[string]attr.Value{
				"id": types.StringValue(id), "connector": types.StringValue(connector), "name": types.StringValue(name),
			}, ""
		},
	}}
}

// actionResource manages one action of a connector.
type actionResource struct {
	crud[actionModel, client.Action]
}

// Values of an action, from the generated client.
var (
	methods = []string{
		string(client.ActionMethodGET), string(client.ActionMethodPOST), string(client.ActionMethodPUT),
		string(client.ActionMethodPATCH), string(client.ActionMethodDELETE), string(client.ActionMethodHEAD),
		string(client.ActionMethodOPTIONS),
	}
	parameterTypes = []string{
		string(client.ActionParameterString), string(client.ActionParameterNumber), string(client.ActionParameterInteger),
		string(client.ActionParameterBoolean), string(client.ActionParameterArray), string(client.ActionParameterObject),
	}
	parameterPlacements = []string{
		string(client.ActionParameterInPath), string(client.ActionParameterInQuery),
		string(client.ActionParameterInHeader), string(client.ActionParameterInBody),
	}
	parameterNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
)

// actionModel is the resource's state.
type actionModel struct {
	ID             types.String         `tfsdk:"id"`
	Connector      types.String         `tfsdk:"connector"`
	Name           types.String         `tfsdk:"name"`
	Description    types.String         `tfsdk:"description"`
	Method         types.String         `tfsdk:"method"`
	Path           types.String         `tfsdk:"path"`
	Parameters     types.Map            `tfsdk:"parameters"`
	Headers        types.Map            `tfsdk:"headers"`
	Body           jsontypes.Normalized `tfsdk:"body"`
	Transformation types.String         `tfsdk:"transformation"`
	TimeoutMs      types.Int64          `tfsdk:"timeout_ms"`
	Version        types.Int64          `tfsdk:"version"`
	CreatedAt      timetypes.RFC3339    `tfsdk:"created_at"`
	UpdatedAt      timetypes.RFC3339    `tfsdk:"updated_at"`
}

// parameterModel is one declared parameter.
type parameterModel struct {
	Type        types.String `tfsdk:"type"`
	Required    types.Bool   `tfsdk:"required"`
	Description types.String `tfsdk:"description"`
	Enum        types.List   `tfsdk:"enum"`
	Default     types.String `tfsdk:"default"`
	In          types.String `tfsdk:"in"`
}

// parameterAttrTypes are the attribute types of a parameter object.
var parameterAttrTypes = map[string]attr.Type{
	"type":        types.StringType,
	"required":    types.BoolType,
	"description": types.StringType,
	"enum":        types.ListType{ElemType: types.StringType},
	"default":     types.StringType,
	"in":          types.StringType,
}

func (r *actionResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "An action: one named, callable request to a connector's API, with declared parameters, " +
			"optional header and body templates and an optional JavaScript transformation of the response. Applications " +
			"run it as `integrations.<connector>.run(\"<action>\", params)`.\n\n" +
			"Templates use `{{params.<name>}}`; every parameter a template names must be declared, and a parameter the " +
			"path names must be `required`. The provider checks this (and everything else the server would refuse " +
			"without running the action) when planning.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "`<connector>/<name>`; the import id.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"connector": schema.StringAttribute{
				MarkdownDescription: "The connector's name (usually `switchboard_connector.<x>.name`). Changing it replaces the action.",
				Required:            true,
				Validators:          identifierValidators(),
				PlanModifiers:       replace,
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "Identifier within the connector: a lower-case letter, then up to 63 lower-case letters, " +
					"digits or underscores. Changing it replaces the action.",
				Required:      true,
				Validators:    identifierValidators(),
				PlanModifiers: replace,
			},
			"description": schema.StringAttribute{
				MarkdownDescription: "What the action does (1-4096 characters).",
				Optional:            true,
				Validators:          []validator.String{stringvalidator.UTF8LengthBetween(1, 4096), multiLine},
			},
			"method": schema.StringAttribute{
				MarkdownDescription: "HTTP method, upper case: `" + strings.Join(methods, "`, `") + "`.",
				Required:            true,
				Validators:          []validator.String{stringvalidator.OneOf(methods...)},
			},
			"path": schema.StringAttribute{
				MarkdownDescription: "Path template joined to the connector's `base_url`, e.g. `/forecast/{{params.city}}`: " +
					"starts with `/`, path characters and percent-escapes only, no query, fragment or `.`/`..` segments " +
					"(declare query parameters with `in = \"query\"`). Each `{{params.<name>}}` becomes one escaped path segment.",
				Required: true,
				Validators: []validator.String{
					stringvalidator.LengthBetween(1, 4096),
					stringvalidator.RegexMatches(regexp.MustCompile(`^/`), "must start with /"),
					pathTemplate(),
				},
			},
			"parameters": schema.MapNestedAttribute{
				MarkdownDescription: "Declared parameters by name (a letter or underscore, then up to 63 letters, digits or " +
					"underscores; at most 64). Callers' values are type-checked against them.",
				Optional: true,
				Validators: []validator.Map{
					mapvalidator.SizeBetween(1, 64),
					mapvalidator.KeysAre(stringvalidator.RegexMatches(parameterNamePattern,
						"must be a letter or underscore, then up to 63 letters, digits or underscores")),
				},
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"type": schema.StringAttribute{
						MarkdownDescription: "The JSON type of values: `" + strings.Join(parameterTypes, "`, `") +
							"` (integers within ±2^53). Path parameters are `string`, `number`, `integer` or `boolean`.",
						Required:   true,
						Validators: []validator.String{stringvalidator.OneOf(parameterTypes...)},
					},
					"required": schema.BoolAttribute{
						MarkdownDescription: "Whether callers must supply it (default `false`); must be `true` for a parameter the path names.",
						Optional:            true,
						Computed:            true,
						Default:             booldefault.StaticBool(false),
					},
					"description": schema.StringAttribute{
						MarkdownDescription: "What the parameter is (1-4096 characters).",
						Optional:            true,
						Validators:          []validator.String{stringvalidator.UTF8LengthBetween(1, 4096), multiLine},
					},
					"enum": schema.ListAttribute{
						MarkdownDescription: "The allowed values (at most 100, distinct), written as strings and read as the " +
							"parameter's `type`: `[\"metric\", \"imperial\"]`, `[1, 2, 3]` (Terraform turns numbers and booleans " +
							"into strings), JSON for `array` and `object` (`jsonencode(...)`).",
						ElementType: types.StringType,
						Optional:    true,
						Validators:  []validator.List{listvalidator.SizeBetween(1, 100), listvalidator.UniqueValues()},
					},
					"default": schema.StringAttribute{
						MarkdownDescription: "The value of an optional parameter a caller leaves out, written like an `enum` " +
							"value (`\"metric\"`, `10`, `true`, `jsonencode([...])`); one of `enum` when there is one. " +
							"Refused on required parameters.",
						Optional: true,
					},
					"in": schema.StringAttribute{
						MarkdownDescription: "Where the value goes: `path` (the path names it), `query`, `header` (a header " +
							"named like the parameter) or `body` (a member of the JSON object body; not on GET or HEAD). When " +
							"unset: where the templates use it; else the query string for GET, DELETE and HEAD, a body member otherwise.",
						Optional:   true,
						Validators: []validator.String{stringvalidator.OneOf(parameterPlacements...)},
					},
				}},
			},
			"headers": schema.MapAttribute{
				MarkdownDescription: "Header templates by header name, e.g. `{ \"X-Units\" = \"{{params.units}}\" }` " +
					"(at most 32; names distinct regardless of case and not one the HTTP client manages; values without CR or LF).",
				ElementType: types.StringType,
				Optional:    true,
				Validators: []validator.Map{
					mapvalidator.SizeBetween(1, 32),
					mapvalidator.KeysAre(stringvalidator.LengthBetween(1, 256), stringvalidator.RegexMatches(httpToken,
						"must be a valid header name (letters, digits and !#$%&'*+-.^_`|~ only)")),
					mapvalidator.ValueStringsAre(stringvalidator.LengthAtMost(4096),
						notMatching(regexp.MustCompile(`[\r\n\x00]`), "must not contain CR, LF or NUL"), template()),
				},
			},
			"body": schema.StringAttribute{
				MarkdownDescription: "JSON body template (use `jsonencode`); string leaves may hold placeholders, and a string " +
					"that is exactly one placeholder (`\"{{params.limit}}\"`) becomes the parameter's typed value. Compared as " +
					"JSON, so formatting does not matter. Not on GET or HEAD; at most 65536 bytes.",
				CustomType:    jsontypes.NormalizedType{},
				Optional:      true,
				Validators:    []validator.String{stringvalidator.LengthAtMost(65536), bodyTemplate()},
				PlanModifiers: []planmodifier.String{sameJSON()},
			},
			"transformation": schema.StringAttribute{
				MarkdownDescription: "JavaScript run on each response: the body of a function that sees `data` (the parsed " +
					"response) and `response` (`{status, headers}`) and returns the result, e.g. " +
					"`return {temp: data.current.temp_c};`. Strict mode; no network, files or timers; at most 65536 bytes. " +
					"Syntax errors are reported with line and column when planning. A run whose script throws, runs too " +
					"long, or returns a result too large or nested deeper than 1000 levels fails with `transformation_failed`.",
				Optional:   true,
				Validators: []validator.String{stringvalidator.LengthBetween(1, 65536), javaScript()},
			},
			"timeout_ms": schema.Int64Attribute{
				MarkdownDescription: "Time limit of one call in milliseconds; the server's default (30000 unless configured) " +
					"when unset, and at most the server's `connectors.maxTimeout` (default 120000).",
				Optional:   true,
				Validators: []validator.Int64{int64validator.AtLeast(1)},
			},
			"version": schema.Int64Attribute{
				MarkdownDescription: "The server's version of the action, incremented by every change; sent as `If-Match`.",
				Computed:            true,
			},
			"created_at": schema.StringAttribute{
				MarkdownDescription: "When the action was created (RFC 3339, UTC).",
				CustomType:          timetypes.RFC3339Type{},
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"updated_at": schema.StringAttribute{
				MarkdownDescription: "When the action was last changed (RFC 3339, UTC).",
				CustomType:          timetypes.RFC3339Type{},
				Computed:            true,
			},
		},
	}
}

// ValidateConfig checks what spans attributes, as the server does when the
// action is saved: templates name declared parameters, path parameters are
// required scalars, enum and default values fit the parameter's type,
// placements fit the method and body, header names are distinct.
func (r *actionResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m actionModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	validateAction(ctx, &m, &resp.Diagnostics)
}

// validateAction reports the cross-attribute problems of an action
// configuration; unknown values are skipped.
func validateAction(ctx context.Context, m *actionModel, diags *diag.Diagnostics) {
	if m.Parameters.IsUnknown() {
		return
	}
	var params map[string]parameterModel
	if !m.Parameters.IsNull() {
		diags.Append(m.Parameters.ElementsAs(ctx, &params, false)...)
		if diags.HasError() {
			return
		}
	}
	method := m.Method.ValueString()
	methodKnown := !m.Method.IsUnknown() && !m.Method.IsNull()
	noBody := methodKnown && (method == "GET" || method == "HEAD")

	undeclared := func(at path.Path, tmpl string) {
		names, err := templateParams(tmpl)
		if err != nil {
			return // reported by the attribute's own validator
		}
		for _, n := range names {
			if _, ok := params[n]; !ok {
				diags.AddAttributeError(at, "Undeclared parameter",
					fmt.Sprintf("{{params.%s}} names an undeclared parameter; declare %q in parameters.", n, n))
			}
		}
	}

	pathParams := map[string]bool{}
	pathKnown := !m.Path.IsUnknown() && !m.Path.IsNull()
	if pathKnown {
		undeclared(path.Root("path"), m.Path.ValueString())
		names, _ := templateParams(m.Path.ValueString())
		for _, n := range names {
			pathParams[n] = true
		}
	}

	if !m.Headers.IsNull() && !m.Headers.IsUnknown() {
		headers := map[string]types.String{}
		diags.Append(m.Headers.ElementsAs(ctx, &headers, false)...)
		seen := map[string]string{}
		keys := make([]string, 0, len(headers))
		for k := range headers {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			at := path.Root("headers").AtMapKey(k)
			if prev, dup := seen[strings.ToLower(k)]; dup {
				diags.AddAttributeError(at, "Duplicate header", fmt.Sprintf("%q duplicates header %q (header names are case-insensitive).", k, prev))
			}
			seen[strings.ToLower(k)] = k
			if isManagedHeader(k) {
				diags.AddAttributeError(at, "Header managed by the HTTP client", fmt.Sprintf("%s is managed by the HTTP client and cannot be set.", k))
			}
			if v := headers[k]; !v.IsUnknown() && !v.IsNull() {
				undeclared(at, v.ValueString())
			}
		}
	}

	bodyIsObject := true
	if !m.Body.IsNull() && !m.Body.IsUnknown() {
		var body any
		if json.Unmarshal([]byte(m.Body.ValueString()), &body) == nil {
			_, bodyIsObject = body.(map[string]any)
			if noBody {
				diags.AddAttributeError(path.Root("body"), "Body on a request without one", method+" requests carry no body.")
			}
			walkStrings(body, func(s string) { undeclared(path.Root("body"), s) })
		}
	}

	names := make([]string, 0, len(params))
	for n := range params {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		validateParameter(ctx, n, params[n], pathParams[n], pathKnown, methodKnown, method, noBody, bodyIsObject, diags)
	}
}

// validateParameter reports the problems of one declared parameter.
func validateParameter(ctx context.Context, name string, p parameterModel, inPath, pathKnown, methodKnown bool, method string, noBody, bodyIsObject bool, diags *diag.Diagnostics) {
	at := path.Root("parameters").AtMapKey(name)
	typ := p.Type.ValueString()
	typeKnown := !p.Type.IsUnknown() && !p.Type.IsNull()
	in := p.In.ValueString()
	inKnown := !p.In.IsUnknown()
	switch {
	case !inKnown:
	case inPath && in != "" && in != "path":
		diags.AddAttributeError(at.AtName("in"), "Invalid placement",
			fmt.Sprintf("in is %q, but the path template uses {{params.%s}}; path parameters are placed in the path.", in, name))
	case !inPath && in == "path" && pathKnown:
		diags.AddAttributeError(at.AtName("in"), "Invalid placement",
			fmt.Sprintf("in is path, but the path template does not use {{params.%s}}.", name))
	case in == "body" && noBody:
		diags.AddAttributeError(at.AtName("in"), "Invalid placement", fmt.Sprintf("in is body, but %s requests carry no body.", method))
	case in == "body" && !bodyIsObject:
		diags.AddAttributeError(at.AtName("in"), "Invalid placement", "in is body, but the body template is not a JSON object to add the parameter to.")
	}
	if inPath {
		if !p.Required.IsUnknown() && !p.Required.ValueBool() {
			diags.AddAttributeError(at.AtName("required"), "Path parameter not required",
				fmt.Sprintf("required must be true: the path template uses {{params.%s}}.", name))
		}
		if typeKnown && (typ == "array" || typ == "object") {
			diags.AddAttributeError(at.AtName("type"), "Invalid path parameter type",
				fmt.Sprintf("Path parameters must be string, number, integer or boolean, not %s.", typ))
		}
	}
	if !typeKnown {
		return
	}
	var enum []any
	if !p.Enum.IsNull() && !p.Enum.IsUnknown() {
		var vals []types.String
		diags.Append(p.Enum.ElementsAs(ctx, &vals, false)...)
		seen := map[string]int{}
		for i, v := range vals {
			if v.IsUnknown() || v.IsNull() {
				continue
			}
			parsed, err := parseParamValue(typ, v.ValueString())
			if err != nil {
				diags.AddAttributeError(at.AtName("enum").AtListIndex(i), "Invalid enum value", err.Error())
				continue
			}
			key := canonicalJSON(parsed)
			if j, dup := seen[key]; dup {
				diags.AddAttributeError(at.AtName("enum").AtListIndex(i), "Duplicate enum value", fmt.Sprintf("duplicates enum[%d].", j))
			}
			seen[key] = i
			enum = append(enum, parsed)
		}
	}
	if !p.Default.IsNull() && !p.Default.IsUnknown() {
		d, err := parseParamValue(typ, p.Default.ValueString())
		switch {
		case !p.Required.IsUnknown() && p.Required.ValueBool():
			diags.AddAttributeError(at.AtName("default"), "Default on a required parameter",
				"A required parameter never uses its default; make it optional or drop the default.")
		case err != nil:
			diags.AddAttributeError(at.AtName("default"), "Invalid default", err.Error())
		case len(enum) > 0 && !containsJSON(enum, d):
			diags.AddAttributeError(at.AtName("default"), "Default not in enum", "default is not one of the enum values.")
		}
	}
}

// ModifyPlan plans no update when the configuration only rewrites values
// the server holds in another spelling (JSON formatting, `1.0` for `1`).
func (r *actionResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	keepVersionWhenUnchanged(ctx, req, resp)
}

// input is the definition to send.
func (m *actionModel) input(ctx context.Context, diags *diag.Diagnostics) client.ActionInput {
	in := client.ActionInput{
		Method:         client.ActionMethod(m.Method.ValueString()),
		Path:           m.Path.ValueString(),
		Description:    strPtr(m.Description),
		Transformation: strPtr(m.Transformation),
	}
	if !m.TimeoutMs.IsNull() {
		t := int(m.TimeoutMs.ValueInt64())
		in.TimeoutMs = &t
	}
	if !m.Headers.IsNull() {
		h := map[string]string{}
		diags.Append(m.Headers.ElementsAs(ctx, &h, false)...)
		in.Headers = &h
	}
	if !m.Body.IsNull() {
		var b any
		diags.Append(m.Body.Unmarshal(&b)...)
		in.Body = b
	}
	if !m.Parameters.IsNull() {
		var params map[string]parameterModel
		diags.Append(m.Parameters.ElementsAs(ctx, &params, false)...)
		out := make(map[string]client.ActionParameter, len(params))
		for name, p := range params {
			ap := client.ActionParameter{
				Type:        client.ActionParameterType(p.Type.ValueString()),
				Description: strPtr(p.Description),
			}
			req := p.Required.ValueBool()
			ap.Required = &req
			if s := strPtr(p.In); s != nil {
				v := client.ActionParameterIn(*s)
				ap.In = &v
			}
			if !p.Enum.IsNull() {
				enum := []any{}
				for i, s := range listStrings(ctx, p.Enum, diags) {
					v, err := parseParamValue(p.Type.ValueString(), s)
					if err != nil {
						diags.AddAttributeError(path.Root("parameters").AtMapKey(name).AtName("enum").AtListIndex(i), "Invalid enum value", err.Error())
					}
					enum = append(enum, v)
				}
				ap.Enum = &enum
			}
			if !p.Default.IsNull() {
				v, err := parseParamValue(p.Type.ValueString(), p.Default.ValueString())
				if err != nil {
					diags.AddAttributeError(path.Root("parameters").AtMapKey(name).AtName("default"), "Invalid default", err.Error())
				}
				ap.Default = v
			}
			out[name] = ap
		}
		in.Parameters = &out
	}
	return in
}

// fill copies the server's action into the model. Empty parameters and
// headers stay null, enum and default values keep the prior spelling when
// they mean the same value (`1.0` and `1`), the body its formatting.
func (m *actionModel) fill(ctx context.Context, a *client.Action, diags *diag.Diagnostics) {
	m.ID = types.StringValue(a.Connector + "/" + a.Name)
	m.Connector = types.StringValue(a.Connector)
	m.Name = types.StringValue(a.Name)
	m.Description = optString(a.Description)
	m.Method = types.StringValue(string(a.Method))
	m.Path = types.StringValue(a.Path)
	m.Transformation = optString(a.Transformation)
	m.TimeoutMs = types.Int64Null()
	if a.TimeoutMs != nil {
		m.TimeoutMs = types.Int64Value(int64(*a.TimeoutMs))
	}
	m.Version = types.Int64Value(a.Version)
	m.CreatedAt = timetypes.NewRFC3339TimeValue(a.CreatedAt.UTC())
	m.UpdatedAt = timetypes.NewRFC3339TimeValue(a.UpdatedAt.UTC())

	if len(a.Headers) == 0 {
		m.Headers = types.MapNull(types.StringType)
	} else {
		v, d := types.MapValueFrom(ctx, types.StringType, a.Headers)
		diags.Append(d...)
		m.Headers = v
	}

	if a.Body == nil {
		m.Body = jsontypes.NewNormalizedNull()
	} else if b, err := json.Marshal(a.Body); err != nil {
		diags.AddError("Cannot encode the action body", err.Error())
	} else {
		m.Body = keepJSON(m.Body, b)
	}

	var prior map[string]parameterModel
	if !m.Parameters.IsNull() && !m.Parameters.IsUnknown() {
		diags.Append(m.Parameters.ElementsAs(ctx, &prior, false)...)
	}
	if len(a.Parameters) == 0 {
		m.Parameters = types.MapNull(types.ObjectType{AttrTypes: parameterAttrTypes})
		return
	}
	params := make(map[string]parameterModel, len(a.Parameters))
	for name, p := range a.Parameters {
		was := prior[name]
		pm := parameterModel{
			Type:        types.StringValue(string(p.Type)),
			Required:    types.BoolValue(p.Required != nil && *p.Required),
			Description: optString(p.Description),
			Enum:        types.ListNull(types.StringType),
			Default:     types.StringNull(),
			In:          types.StringNull(),
		}
		if p.In != nil {
			pm.In = types.StringValue(string(*p.In))
		}
		if p.Enum != nil && len(*p.Enum) > 0 {
			var wasEnum []types.String
			if !was.Enum.IsNull() && !was.Enum.IsUnknown() {
				diags.Append(was.Enum.ElementsAs(ctx, &wasEnum, false)...)
			}
			vals := make([]attr.Value, len(*p.Enum))
			for i, v := range *p.Enum {
				var w types.String
				if i < len(wasEnum) {
					w = wasEnum[i]
				}
				vals[i] = formatParamValue(string(p.Type), v, w)
			}
			l, d := types.ListValue(types.StringType, vals)
			diags.Append(d...)
			pm.Enum = l
		}
		if p.Default != nil {
			pm.Default = formatParamValue(string(p.Type), p.Default, was.Default)
		}
		params[name] = pm
	}
	v, d := types.MapValueFrom(ctx, types.ObjectType{AttrTypes: parameterAttrTypes}, params)
	diags.Append(d...)
	m.Parameters = v
}

// keepJSON is b as a body value, or prior when it is the same JSON.
func keepJSON(prior jsontypes.Normalized, b []byte) jsontypes.Normalized {
	if !prior.IsNull() && !prior.IsUnknown() {
		var p, n any
		if json.Unmarshal([]byte(prior.ValueString()), &p) == nil && json.Unmarshal(b, &n) == nil && canonicalJSON(p) == canonicalJSON(n) {
			return prior
		}
	}
	return jsontypes.NewNormalizedValue(string(b))
}
