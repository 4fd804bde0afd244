package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
)

// crud is the shape every resource shares, so that a resource file is its
// schema, its model M and its two conversions (the server's object T into
// M, M into a request body). Embedded in a resource, it gives Metadata,
// Configure, Create, Read, Update, Delete and ImportState:
//
//   - every operation records the requests the server throttled
//     (watchThrottling) and reports them as one warning;
//   - Create and Update fill the planned model from the server's answer,
//     Read the prior state; a Read answered 404 removes the resource from
//     the state with a warning (deleted outside Terraform);
//   - Delete takes a 404 as done;
//   - a failed call is one diagnostic saying what the provider tried
//     ("create API key ci"), the server's error and what to do.
//
// The calls (create, get, update, remove) send If-Match themselves
// (etag(state.Version)) where the server takes it.
type crud[M, T any] struct {
	api *apiClient

	typeName string                                                           // after "switchboard_", e.g. "api_key"
	kind     string                                                           // in messages, e.g. "API key"
	label    func(m *M) string                                                // names the object in messages, e.g. its id
	fill     func(m *M, ctx context.Context, obj *T, diags *diag.Diagnostics) // API -> model

	// create sends the plan (plus write-only values from cfg); it may set
	// values only the creation answer holds (a secret) on plan.
	create func(ctx context.Context, api *apiClient, plan *M, cfg tfsdk.Config, diags *diag.Diagnostics) (*T, error)
	get    func(ctx context.Context, api *apiClient, state *M) (*T, error)
	// update is nil for a resource whose every attribute requires replacement.
	update func(ctx context.Context, api *apiClient, plan, state *M, cfg tfsdk.Config, diags *diag.Diagnostics) (*T, error)
	remove func(ctx context.Context, api *apiClient, state *M) error

	// deleteVerb is what Delete does, "delete" when empty ("revoke").
	deleteVerb string
	// importID parses an import id into the attributes it sets; problem
	// says what a valid id looks like when it is not one.
	importID func(id string) (attrs map[string]attr.Value, problem string)
}

// callFailed is a call that got an answer other than the expected one.
type callFailed struct {
	status int
	body   []byte
	what   string // what was tried, when not the operation itself
}

func (e *callFailed) Error() string { return fmt.Sprintf("%s: %d", e.what, e.status) }

// answered is the object of a generated client's answer: obj when the
// status was the expected one (obj set), else a *callFailed.
func answered[T any](obj *T, status int, body []byte) (*T, error) {
	if obj == nil {
		return nil, &callFailed{status: status, body: body}
	}
	return obj, nil
}

// deleted is nil when a delete answered 204, or 404 (already gone).
func deleted(status int, body []byte) error {
	if status != http.StatusNoContent && status != http.StatusNotFound {
		return &callFailed{status: status, body: body}
	}
	return nil
}

// also names a step of an operation other than its main call, for the
// messages ("rotate the secret of webhook wh_1").
func also(what string, err error) error {
	var f *callFailed
	if errors.As(err, &f) {
		f.what = what
		return f
	}
	return &transportFailed{what: what, err: err}
}

// transportFailed is a step (named by also) that got no answer.
type transportFailed struct {
	what string
	err  error
}

func (e *transportFailed) Error() string { return e.what + ": " + e.err.Error() }
func (e *transportFailed) Unwrap() error { return e.err }

// report adds the diagnostic of a failed call to diags; what is the
// operation ("create API key ci").
func (c *crud[M, T]) report(diags *diag.Diagnostics, what string, err error) {
	var f *callFailed
	var t *transportFailed
	switch {
	case errors.As(err, &f):
		if f.what != "" {
			what = f.what
		}
		c.api.addResponseError(diags, what, f.status, f.body)
	case errors.As(err, &t):
		c.api.addTransportError(diags, t.what, t.err)
	default:
		c.api.addTransportError(diags, what, err)
	}
}

// notFound reports whether err is a 404 answer.
func notFound(err error) bool {
	var f *callFailed
	return errors.As(err, &f) && f.status == http.StatusNotFound
}

func (c *crud[M, T]) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_" + c.typeName
}

func (c *crud[M, T]) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	c.api = configuredClient(req.ProviderData, &resp.Diagnostics)
}

func (c *crud[M, T]) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	ctx, report := watchThrottling(ctx)
	defer report(&resp.Diagnostics)
	var plan M
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	what := "create " + c.kind + " " + c.label(&plan)
	obj, err := c.create(ctx, c.api, &plan, req.Config, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	if err != nil {
		c.report(&resp.Diagnostics, what, err)
		return
	}
	c.fill(&plan, ctx, obj, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (c *crud[M, T]) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	ctx, report := watchThrottling(ctx)
	defer report(&resp.Diagnostics)
	var state M
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	obj, err := c.get(ctx, c.api, &state)
	if notFound(err) {
		removedOutside(ctx, resp, c.kind, c.label(&state))
		return
	}
	if err != nil {
		c.report(&resp.Diagnostics, "read "+c.kind+" "+c.label(&state), err)
		return
	}
	c.fill(&state, ctx, obj, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (c *crud[M, T]) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	ctx, report := watchThrottling(ctx)
	defer report(&resp.Diagnostics)
	var plan, state M
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if c.update == nil {
		// Never called with a change: every argument requires replacement.
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		return
	}
	obj, err := c.update(ctx, c.api, &plan, &state, req.Config, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	if err != nil {
		c.report(&resp.Diagnostics, "update "+c.kind+" "+c.label(&state), err)
		return
	}
	c.fill(&plan, ctx, obj, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (c *crud[M, T]) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	ctx, report := watchThrottling(ctx)
	defer report(&resp.Diagnostics)
	var state M
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	verb := c.deleteVerb
	if verb == "" {
		verb = "delete"
	}
	if err := c.remove(ctx, c.api, &state); err != nil {
		c.report(&resp.Diagnostics, verb+" "+c.kind+" "+c.label(&state), err)
	}
}

// ImportState sets the attributes the import id names; Read does the rest.
func (c *crud[M, T]) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	attrs, problem := c.importID(req.ID)
	if problem != "" {
		resp.Diagnostics.AddError("Invalid import id", problem)
		return
	}
	for name, v := range attrs {
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root(name), v)...)
	}
}
