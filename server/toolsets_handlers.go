package server

import (
	"context"
	"net/url"
	"slices"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/tools"
)

func (h *handlers) CreateToolset(ctx context.Context, req api.CreateToolsetRequestObject) (api.CreateToolsetResponseObject, error) {
	t, err := h.s.toolsets.Create(ctx, toolsetFromAPI(*req.Body))
	if err != nil {
		return nil, err
	}
	loc := "/v1/toolsets/" + url.PathEscape(t.Name)
	return api.CreateToolset201JSONResponse{
		Body:    toAPIToolset(t),
		Headers: api.CreateToolset201ResponseHeaders{ETag: etag(t.Version), Location: &loc},
	}, nil
}

func (h *handlers) ListToolsets(ctx context.Context, req api.ListToolsetsRequestObject) (api.ListToolsetsResponseObject, error) {
	limit, err := pageLimit(req.Params.Limit)
	if err != nil {
		return nil, err
	}
	list, next, err := h.s.toolsets.List(ctx, deref(req.Params.Cursor), limit)
	if err != nil {
		return nil, err
	}
	out := api.ListToolsets200JSONResponse{Data: make([]api.Toolset, 0, len(list))}
	for _, t := range list {
		out.Data = append(out.Data, toAPIToolset(t))
	}
	if next != "" {
		out.NextCursor = &next
	}
	return out, nil
}

func (h *handlers) GetToolset(ctx context.Context, req api.GetToolsetRequestObject) (api.GetToolsetResponseObject, error) {
	t, err := h.s.toolsets.Get(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return api.GetToolset200JSONResponse{Body: toAPIToolset(t), Headers: api.GetToolset200ResponseHeaders{ETag: etag(t.Version)}}, nil
}

func (h *handlers) ReplaceToolset(ctx context.Context, req api.ReplaceToolsetRequestObject) (api.ReplaceToolsetResponseObject, error) {
	version, err := ifMatchVersion(req.Params.IfMatch, h.toolsetVersion(ctx, req.Name))
	if err != nil {
		return nil, err
	}
	t, err := h.s.toolsets.Replace(ctx, req.Name, toolsetFromAPI(*req.Body), version)
	if err != nil {
		return nil, err
	}
	return api.ReplaceToolset200JSONResponse{Body: toAPIToolset(t), Headers: api.ReplaceToolset200ResponseHeaders{ETag: etag(t.Version)}}, nil
}

func (h *handlers) DeleteToolset(ctx context.Context, req api.DeleteToolsetRequestObject) (api.DeleteToolsetResponseObject, error) {
	version, err := ifMatchVersion(req.Params.IfMatch, h.toolsetVersion(ctx, req.Name))
	if err != nil {
		return nil, err
	}
	if err := h.s.toolsets.Delete(ctx, req.Name, version); err != nil {
		return nil, err
	}
	return api.DeleteToolset204Response{}, nil
}

// toolsetVersion reads the current version, for an If-Match listing several.
func (h *handlers) toolsetVersion(ctx context.Context, name string) func() (int64, error) {
	return func() (int64, error) {
		t, err := h.s.toolsets.Get(ctx, name)
		return t.Version, err
	}
}

// toolsetFromAPI is the domain form of a toolset sent on create or replace.
func toolsetFromAPI(in api.ToolsetInput) tools.Toolset {
	return tools.Toolset{Name: deref(in.Name), Description: deref(in.Description), Tools: slices.Clone(in.Tools)}
}

// toAPIToolset is the wire form of a toolset.
func toAPIToolset(t tools.Toolset) api.Toolset {
	out := api.Toolset{
		Name: t.Name, Tools: slices.Clone(t.Tools),
		CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC(), Version: t.Version,
	}
	if out.Tools == nil {
		out.Tools = []string{}
	}
	if t.Description != "" {
		out.Description = &t.Description
	}
	return out
}
