package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timetypes/timetypes"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
)

// configuredClient takes the provider's client from ProviderData; nil (no
// error) before the provider is configured, as the framework calls
// Configure early with no data.
func configuredClient(data any, diags *diag.Diagnostics) *apiClient {
	if data == nil {
		return nil
	}
	c, ok := data.(*apiClient)
	if !ok {
		diags.AddError("Unexpected provider data", fmt.Sprintf("Expected *apiClient, got %T. This is a bug in the provider.", data))
		return nil
	}
	return c
}

// removedOutside drops a resource that no longer exists on the server from
// the state, with a warning; the next plan creates it again.
func removedOutside(ctx context.Context, resp *resource.ReadResponse, kind, id string) {
	resp.Diagnostics.AddWarning(kind+" removed outside Terraform",
		fmt.Sprintf("The %s %s no longer exists on the Switchboard server, so it was removed from the Terraform state. "+
			"The next apply creates it again unless it is removed from the configuration.", kind, id))
	resp.State.RemoveResource(ctx)
}

// setStrings returns a known set of strings as a slice.
func setStrings(ctx context.Context, s types.Set, diags *diag.Diagnostics) []string {
	if s.IsNull() || s.IsUnknown() {
		return nil
	}
	var out []string
	diags.Append(s.ElementsAs(ctx, &out, false)...)
	return out
}

// listStrings returns a known list of strings as a slice.
func listStrings(ctx context.Context, l types.List, diags *diag.Diagnostics) []string {
	if l.IsNull() || l.IsUnknown() {
		return nil
	}
	var out []string
	diags.Append(l.ElementsAs(ctx, &out, false)...)
	return out
}

// setOfStrings is a set value of strings (empty, not null, for none).
func setOfStrings(ctx context.Context, ss []string, diags *diag.Diagnostics) types.Set {
	if ss == nil {
		ss = []string{}
	}
	v, d := types.SetValueFrom(ctx, types.StringType, ss)
	diags.Append(d...)
	return v
}

// listOfStrings is a list value of strings (empty, not null, for none).
func listOfStrings(ctx context.Context, ss []string, diags *diag.Diagnostics) types.List {
	if ss == nil {
		ss = []string{}
	}
	v, d := types.ListValueFrom(ctx, types.StringType, ss)
	diags.Append(d...)
	return v
}

// stringMap returns a known map of strings, or nil when null.
func stringMap(ctx context.Context, m types.Map, diags *diag.Diagnostics) *map[string]string {
	if m.IsNull() || m.IsUnknown() {
		return nil
	}
	out := map[string]string{}
	diags.Append(m.ElementsAs(ctx, &out, false)...)
	return &out
}

// optStringMap is a map of strings as a state value, null when absent or empty.
func optStringMap(ctx context.Context, m *map[string]string, diags *diag.Diagnostics) types.Map {
	if m == nil || len(*m) == 0 {
		return types.MapNull(types.StringType)
	}
	v, d := types.MapValueFrom(ctx, types.StringType, *m)
	diags.Append(d...)
	return v
}

// keepTime is the server's time t as a state value: the prior value when it
// denotes the same instant (so a configured "+02:00" offset survives), else
// t in UTC, or null when t is nil.
func keepTime(prior timetypes.RFC3339, t *time.Time) timetypes.RFC3339 {
	if t == nil {
		return timetypes.NewRFC3339Null()
	}
	if !prior.IsNull() && !prior.IsUnknown() {
		if p, d := prior.ValueRFC3339Time(); !d.HasError() && p.Equal(*t) {
			return prior
		}
	}
	return timetypes.NewRFC3339TimeValue(t.UTC())
}

// objectAsOptions reads nested objects whose attributes may be unknown.
var objectAsOptions = basetypes.ObjectAsOptions{}

// pathID is the path of the id attribute.
var pathID = path.Root("id")

// optString is a *string as a state value (null for nil).
func optString(s *string) types.String { return types.StringPointerValue(s) }

// strPtr is a known, non-null string value as a pointer, else nil.
func strPtr(v basetypes.StringValue) *string {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	s := v.ValueString()
	return &s
}

// cutID splits a two-part import id "<a>/<b>".
func cutID(id string) (a, b string, ok bool) { return strings.Cut(id, "/") }

// controlChars matches any control character.
var controlChars = regexp.MustCompile(`[\x00-\x1f\x7f]`)

// nameValidators check a free-form display name: 1 to max characters, not
// blank, without control characters.
func nameValidators(max int) []validator.String {
	return []validator.String{
		stringvalidator.UTF8LengthBetween(1, max),
		stringvalidator.RegexMatches(regexp.MustCompile(`\S`), "must not be blank"),
		notMatching(controlChars, "must not contain control characters"),
	}
}

// keepVersionWhenUnchanged undoes the framework's marking of version and
// updated_at as unknown when, after the attribute plan modifiers (which may
// have kept a prior value written differently), nothing else changes: no
// update is then planned.
func keepVersionWhenUnchanged(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	keepWhenUnchanged(ctx, req, resp, path.Root("version"), path.Root("updated_at"))
}

// keepWhenUnchanged plans the prior values of the computed attributes at
// paths when, with them, the plan is the state: nothing changes.
func keepWhenUnchanged(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse, paths ...path.Path) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return
	}
	orig := resp.Plan.Raw.Copy()
	for _, p := range paths {
		var v attr.Value
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, p, &v)...)
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, p, v)...)
	}
	if resp.Diagnostics.HasError() || !resp.Plan.Raw.Equal(req.State.Raw) {
		resp.Plan.Raw = orig
	}
}
