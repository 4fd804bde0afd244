package server

import (
	"context"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// Paging bounds of list operations (components/parameters/Limit).
const (
	defaultPageLimit = 20
	maxPageLimit     = 100
)

// pageLimit resolves the `limit` query parameter: the default when absent,
// a 400 naming the bounds when out of range.
func pageLimit(limit *int) (int, error) {
	if limit == nil {
		return defaultPageLimit, nil
	}
	if *limit < 1 || *limit > maxPageLimit {
		return 0, errs.E(errs.Invalid, "query parameter limit must be between 1 and %d, got %d", maxPageLimit, *limit).
			WithDetails(map[string]any{"problems": []errs.Problem{{Field: "limit", Problem: "must be between 1 and 100"}}})
	}
	return *limit, nil
}

func (h *handlers) CreateAPIKey(ctx context.Context, req api.CreateAPIKeyRequestObject) (api.CreateAPIKeyResponseObject, error) {
	b := req.Body
	in := auth.NewAPIKeyInput{Name: b.Name, ExpiresAt: b.ExpiresAt, Policy: policyFromAPI(b.RateLimit, b.Models, b.Connectors, b.Budget), Connection: deref(b.Connection)}
	for _, s := range b.Scopes {
		in.Scopes = append(in.Scopes, string(s))
	}
	key, secret, err := h.s.keys.Create(ctx, in)
	if err != nil {
		return nil, err
	}
	pub, err := h.s.apiKeyWithSpend(ctx, key)
	if err != nil {
		return nil, err
	}
	noStore := "no-store"
	return api.CreateAPIKey201JSONResponse{
		Body: api.APIKeyCreated{
			Id: pub.Id, Name: pub.Name, Scopes: pub.Scopes, Prefix: pub.Prefix,
			CreatedAt: pub.CreatedAt, ExpiresAt: pub.ExpiresAt, Version: pub.Version,
			RateLimit: pub.RateLimit, Models: pub.Models, Connectors: pub.Connectors, Budget: pub.Budget, Spend: pub.Spend,
			Connection: pub.Connection, Key: secret,
		},
		Headers: api.CreateAPIKey201ResponseHeaders{CacheControl: &noStore},
	}, nil
}

func (h *handlers) ListAPIKeys(ctx context.Context, req api.ListAPIKeysRequestObject) (api.ListAPIKeysResponseObject, error) {
	limit, err := pageLimit(req.Params.Limit)
	if err != nil {
		return nil, err
	}
	keys, next, err := h.s.keys.List(ctx, deref(req.Params.Cursor), limit)
	if err != nil {
		return nil, err
	}
	out := api.ListAPIKeys200JSONResponse{Data: make([]api.APIKey, 0, len(keys))}
	for _, k := range keys {
		pub, err := h.s.apiKeyWithSpend(ctx, k)
		if err != nil {
			return nil, err
		}
		out.Data = append(out.Data, pub)
	}
	if next != "" {
		out.NextCursor = &next
	}
	return out, nil
}

func (h *handlers) GetAPIKey(ctx context.Context, req api.GetAPIKeyRequestObject) (api.GetAPIKeyResponseObject, error) {
	key, err := h.s.keys.Get(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	pub, err := h.s.apiKeyWithSpend(ctx, key)
	if err != nil {
		return nil, err
	}
	return api.GetAPIKey200JSONResponse{Body: pub, Headers: api.GetAPIKey200ResponseHeaders{ETag: etag(key.Version)}}, nil
}

func (h *handlers) UpdateAPIKey(ctx context.Context, req api.UpdateAPIKeyRequestObject) (api.UpdateAPIKeyResponseObject, error) {
	version, err := ifMatchVersion(req.Params.IfMatch, func() (int64, error) {
		k, err := h.s.keys.Get(ctx, req.Id)
		return k.Version, err
	})
	if err != nil {
		return nil, err
	}
	b := req.Body
	key, err := h.s.keys.Update(ctx, req.Id, version, auth.UpdateAPIKeyInput{
		Name: b.Name, Policy: policyFromAPI(b.RateLimit, b.Models, b.Connectors, b.Budget), Connection: deref(b.Connection)})
	if err != nil {
		return nil, err
	}
	pub, err := h.s.apiKeyWithSpend(ctx, key)
	if err != nil {
		return nil, err
	}
	return api.UpdateAPIKey200JSONResponse{Body: pub, Headers: api.UpdateAPIKey200ResponseHeaders{ETag: etag(key.Version)}}, nil
}

func (h *handlers) DeleteAPIKey(ctx context.Context, req api.DeleteAPIKeyRequestObject) (api.DeleteAPIKeyResponseObject, error) {
	if err := h.s.keys.Revoke(ctx, req.Id); err != nil {
		return nil, err
	}
	return api.DeleteAPIKey204Response{}, nil
}

// toAPIKey is the wire form of a key: never its secret nor its hash.
func toAPIKey(k auth.APIKey) api.APIKey {
	out := api.APIKey{
		Id: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: k.CreatedAt.UTC(),
		Scopes: make([]api.Scope, 0, len(k.Scopes)), Version: k.Version,
	}
	out.RateLimit, out.Models, out.Connectors, out.Budget = toAPIPolicy(k.Policy)
	for _, s := range k.Scopes {
		out.Scopes = append(out.Scopes, api.Scope(s))
	}
	if k.ExpiresAt != nil {
		t := k.ExpiresAt.UTC()
		out.ExpiresAt = &t
	}
	if k.Connection != "" {
		out.Connection = &k.Connection
	}
	return out
}
