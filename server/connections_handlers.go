package server

import (
	"context"
	"net/url"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

func (h *handlers) CreateConnection(ctx context.Context, req api.CreateConnectionRequestObject) (api.CreateConnectionResponseObject, error) {
	b := req.Body
	in := connectors.ConnectionInput{Name: deref(b.Name), Credentials: connectors.Credentials{
		APIKey: deref(b.ApiKey), Token: deref(b.Token), Username: deref(b.Username), Password: deref(b.Password),
	}}
	c, err := h.s.connections.Create(ctx, req.Name, in)
	if err != nil {
		return nil, err
	}
	loc := "/v1/connectors/" + url.PathEscape(c.Connector) + "/connections/" + url.PathEscape(c.Name)
	return api.CreateConnection201JSONResponse{
		Body:    h.toAPIConnection(ctx, c),
		Headers: api.CreateConnection201ResponseHeaders{ETag: etag(c.Version), Location: &loc},
	}, nil
}

func (h *handlers) ListConnections(ctx context.Context, req api.ListConnectionsRequestObject) (api.ListConnectionsResponseObject, error) {
	limit, err := pageLimit(req.Params.Limit)
	if err != nil {
		return nil, err
	}
	list, next, err := h.s.connections.List(ctx, req.Name, deref(req.Params.Cursor), limit)
	if err != nil {
		return nil, err
	}
	out := api.ListConnections200JSONResponse{Data: make([]api.Connection, 0, len(list))}
	for _, c := range list {
		out.Data = append(out.Data, h.toAPIConnection(ctx, c))
	}
	if next != "" {
		out.NextCursor = &next
	}
	return out, nil
}

func (h *handlers) GetConnection(ctx context.Context, req api.GetConnectionRequestObject) (api.GetConnectionResponseObject, error) {
	c, err := h.s.connections.Get(ctx, req.Name, req.Connection)
	if err != nil {
		return nil, err
	}
	return api.GetConnection200JSONResponse{Body: h.toAPIConnection(ctx, c), Headers: api.GetConnection200ResponseHeaders{ETag: etag(c.Version)}}, nil
}

func (h *handlers) ReplaceConnection(ctx context.Context, req api.ReplaceConnectionRequestObject) (api.ReplaceConnectionResponseObject, error) {
	version, err := ifMatchVersion(req.Params.IfMatch, func() (int64, error) {
		c, err := h.s.connections.Get(ctx, req.Name, req.Connection)
		return c.Version, err
	})
	if err != nil {
		return nil, err
	}
	b := req.Body
	in := connectors.ConnectionInput{Credentials: connectors.Credentials{
		APIKey: deref(b.ApiKey), Token: deref(b.Token), Username: deref(b.Username), Password: deref(b.Password),
	}}
	c, err := h.s.connections.Replace(ctx, req.Name, req.Connection, in, version)
	if err != nil {
		return nil, err
	}
	return api.ReplaceConnection200JSONResponse{Body: h.toAPIConnection(ctx, c), Headers: api.ReplaceConnection200ResponseHeaders{ETag: etag(c.Version)}}, nil
}

func (h *handlers) DeleteConnection(ctx context.Context, req api.DeleteConnectionRequestObject) (api.DeleteConnectionResponseObject, error) {
	version, err := ifMatchVersion(req.Params.IfMatch, func() (int64, error) {
		c, err := h.s.connections.Get(ctx, req.Name, req.Connection)
		return c.Version, err
	})
	if err != nil {
		return nil, err
	}
	if err := h.s.connections.Delete(ctx, req.Name, req.Connection, version); err != nil {
		return nil, err
	}
	return api.DeleteConnection204Response{}, nil
}

// toAPIConnection is the wire form of a connection: never a credential.
// OAuth 2.0 connections show their token state (never a token).
func (h *handlers) toAPIConnection(ctx context.Context, c connectors.Connection) api.Connection {
	out := api.Connection{
		Connector: c.Connector, Name: c.Name, AuthType: api.ConnectionAuthType(c.AuthType),
		Status: api.ConnectionStatus(c.Status), CreatedAt: c.CreatedAt.UTC(), UpdatedAt: c.UpdatedAt.UTC(), Version: c.Version,
	}
	if c.AuthType != connectors.AuthOAuth2 || h.s.oauthConns == nil {
		return out
	}
	_ = h.s.store.View(ctx, func(tx store.Tx) error {
		st, err := h.s.oauthConns.Status(tx, c.Connector, c.Name)
		if err != nil || st == nil {
			return err
		}
		out.Status = api.ConnectionStatus(st.Status)
		if len(st.Scopes) > 0 {
			scopes := st.Scopes
			out.Scopes = &scopes
		}
		out.ExpiresAt, out.LastRefreshedAt = st.ExpiresAt, st.LastRefreshedAt
		return nil
	})
	return out
}
