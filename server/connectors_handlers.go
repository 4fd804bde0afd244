package server

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

func (h *handlers) CreateConnector(ctx context.Context, req api.CreateConnectorRequestObject) (api.CreateConnectorResponseObject, error) {
	c, err := h.s.connectors.CreateConnector(ctx, connectorFromAPI(*req.Body))
	if err != nil {
		return nil, err
	}
	loc := "/v1/connectors/" + url.PathEscape(c.Name)
	return api.CreateConnector201JSONResponse{
		Body:    toAPIConnector(c),
		Headers: api.CreateConnector201ResponseHeaders{ETag: etag(c.Version), Location: &loc},
	}, nil
}

func (h *handlers) ListConnectors(ctx context.Context, req api.ListConnectorsRequestObject) (api.ListConnectorsResponseObject, error) {
	limit, err := pageLimit(req.Params.Limit)
	if err != nil {
		return nil, err
	}
	list, next, err := h.s.connectors.ListConnectors(ctx, deref(req.Params.Cursor), limit)
	if err != nil {
		return nil, err
	}
	out := api.ListConnectors200JSONResponse{Data: make([]api.Connector, 0, len(list))}
	for _, c := range list {
		out.Data = append(out.Data, toAPIConnector(c))
	}
	if next != "" {
		out.NextCursor = &next
	}
	return out, nil
}

func (h *handlers) GetConnector(ctx context.Context, req api.GetConnectorRequestObject) (api.GetConnectorResponseObject, error) {
	c, err := h.s.connectors.GetConnector(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return api.GetConnector200JSONResponse{Body: toAPIConnector(c), Headers: api.GetConnector200ResponseHeaders{ETag: etag(c.Version)}}, nil
}

func (h *handlers) ReplaceConnector(ctx context.Context, req api.ReplaceConnectorRequestObject) (api.ReplaceConnectorResponseObject, error) {
	version, err := ifMatchVersion(req.Params.IfMatch, func() (int64, error) {
		c, err := h.s.connectors.GetConnector(ctx, req.Name)
		return c.Version, err
	})
	if err != nil {
		return nil, err
	}
	c, err := h.s.connectors.ReplaceConnector(ctx, req.Name, connectorFromAPI(*req.Body), version)
	if err != nil {
		return nil, err
	}
	return api.ReplaceConnector200JSONResponse{Body: toAPIConnector(c), Headers: api.ReplaceConnector200ResponseHeaders{ETag: etag(c.Version)}}, nil
}

func (h *handlers) DeleteConnector(ctx context.Context, req api.DeleteConnectorRequestObject) (api.DeleteConnectorResponseObject, error) {
	version, err := ifMatchVersion(req.Params.IfMatch, func() (int64, error) {
		c, err := h.s.connectors.GetConnector(ctx, req.Name)
		return c.Version, err
	})
	if err != nil {
		return nil, err
	}
	if err := h.s.connectors.DeleteConnector(ctx, req.Name, version); err != nil {
		return nil, err
	}
	return api.DeleteConnector204Response{}, nil
}

func (h *handlers) CreateAction(ctx context.Context, req api.CreateActionRequestObject) (api.CreateActionResponseObject, error) {
	a, err := h.s.connectors.CreateAction(ctx, req.Name, actionFromAPI(*req.Body))
	if err != nil {
		return nil, err
	}
	loc := "/v1/connectors/" + url.PathEscape(a.Connector) + "/actions/" + url.PathEscape(a.Name)
	return api.CreateAction201JSONResponse{
		Body:    toAPIAction(a),
		Headers: api.CreateAction201ResponseHeaders{ETag: etag(a.Version), Location: &loc},
	}, nil
}

func (h *handlers) ListActions(ctx context.Context, req api.ListActionsRequestObject) (api.ListActionsResponseObject, error) {
	limit, err := pageLimit(req.Params.Limit)
	if err != nil {
		return nil, err
	}
	list, next, err := h.s.connectors.ListActions(ctx, req.Name, deref(req.Params.Cursor), limit)
	if err != nil {
		return nil, err
	}
	out := api.ListActions200JSONResponse{Data: make([]api.Action, 0, len(list))}
	for _, a := range list {
		out.Data = append(out.Data, toAPIAction(a))
	}
	if next != "" {
		out.NextCursor = &next
	}
	return out, nil
}

func (h *handlers) GetAction(ctx context.Context, req api.GetActionRequestObject) (api.GetActionResponseObject, error) {
	a, err := h.s.connectors.GetAction(ctx, req.Name, req.Action)
	if err != nil {
		return nil, err
	}
	return api.GetAction200JSONResponse{Body: toAPIAction(a), Headers: api.GetAction200ResponseHeaders{ETag: etag(a.Version)}}, nil
}

func (h *handlers) ReplaceAction(ctx context.Context, req api.ReplaceActionRequestObject) (api.ReplaceActionResponseObject, error) {
	version, err := ifMatchVersion(req.Params.IfMatch, func() (int64, error) {
		a, err := h.s.connectors.GetAction(ctx, req.Name, req.Action)
		return a.Version, err
	})
	if err != nil {
		return nil, err
	}
	a, err := h.s.connectors.ReplaceAction(ctx, req.Name, req.Action, actionFromAPI(*req.Body), version)
	if err != nil {
		return nil, err
	}
	return api.ReplaceAction200JSONResponse{Body: toAPIAction(a), Headers: api.ReplaceAction200ResponseHeaders{ETag: etag(a.Version)}}, nil
}

func (h *handlers) DeleteAction(ctx context.Context, req api.DeleteActionRequestObject) (api.DeleteActionResponseObject, error) {
	version, err := ifMatchVersion(req.Params.IfMatch, func() (int64, error) {
		a, err := h.s.connectors.GetAction(ctx, req.Name, req.Action)
		return a.Version, err
	})
	if err != nil {
		return nil, err
	}
	if err := h.s.connectors.DeleteAction(ctx, req.Name, req.Action, version); err != nil {
		return nil, err
	}
	return api.DeleteAction204Response{}, nil
}

// etag is the ETag of a resource version: the version as a strong entity tag.
func etag(version int64) *string {
	s := `"` + strconv.FormatInt(version, 10) + `"`
	return &s
}

// ifMatchVersion turns an If-Match header into the version a write may
// apply to (0: unconditional, when the header is absent or "*").
//
// Entity tags are compared strongly (RFC 9110 §13.1.1): a weak tag (W/"3")
// never matches. A bare number is accepted as the tag it obviously means.
// When the header lists several tags, current reads the resource's version
// to pick the one that matches; the write checks it again atomically.
func ifMatchVersion(header *string, current func() (int64, error)) (int64, error) {
	if header == nil {
		return 0, nil
	}
	var candidates []int64
	for _, tag := range strings.Split(*header, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" {
			return 0, nil
		}
		if len(tag) >= 2 && tag[0] == '"' && tag[len(tag)-1] == '"' {
			tag = tag[1 : len(tag)-1]
		}
		if v, err := strconv.ParseInt(tag, 10, 64); err == nil && v > 0 {
			candidates = append(candidates, v)
		}
	}
	switch len(candidates) {
	case 0:
		return 0, errs.E(errs.PreconditionFailed, "If-Match %q matches no version; send the ETag of a GET, e.g. \"3\" (weak tags W/\"...\" never match)", *header)
	case 1:
		return candidates[0], nil
	}
	v, err := current()
	if err != nil {
		return 0, err
	}
	for _, c := range candidates {
		if c == v {
			return c, nil
		}
	}
	return candidates[0], nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func ptrIf(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func connectorFromAPI(in api.ConnectorInput) connectors.Connector {
	a := in.Auth
	auth := connectors.Auth{
		Type:             string(a.Type),
		Name:             deref(a.Name),
		Prefix:           deref(a.Prefix),
		AuthorizationURL: deref(a.AuthorizationUrl),
		TokenURL:         deref(a.TokenUrl),
		ClientID:         deref(a.ClientId),
		ClientSecret:     deref(a.ClientSecret),
	}
	if a.In != nil {
		auth.In = string(*a.In)
	}
	if a.Grant != nil {
		auth.Grant = string(*a.Grant)
	}
	if a.Scopes != nil {
		auth.Scopes = *a.Scopes
	}
	oauthExtrasFromAPI(a, &auth)
	return connectors.Connector{
		Name:        deref(in.Name),
		DisplayName: deref(in.DisplayName),
		Description: deref(in.Description),
		BaseURL:     in.BaseUrl,
		Auth:        auth,
		ConnectPage: connectPageFromAPI(in.ConnectPage),
	}
}

// connectPageFromAPI is the connect page's presentation; nil when it says
// nothing.
func connectPageFromAPI(in *api.ConnectPage) *connectors.ConnectPage {
	if in == nil {
		return nil
	}
	p := connectors.ConnectPage{LogoURL: deref(in.LogoUrl), HelpText: deref(in.HelpText), TestAction: deref(in.TestAction)}
	if p == (connectors.ConnectPage{}) {
		return nil
	}
	return &p
}

// toAPIConnector is the wire form of a connector: never its client secret.
func toAPIConnector(c connectors.Connector) api.Connector {
	a := c.Auth
	secretSet := a.HasClientSecret
	auth := api.ConnectorAuth{
		Type:             api.ConnectorAuthType(a.Type),
		Name:             ptrIf(a.Name),
		Prefix:           ptrIf(a.Prefix),
		AuthorizationUrl: ptrIf(a.AuthorizationURL),
		TokenUrl:         ptrIf(a.TokenURL),
		ClientId:         ptrIf(a.ClientID),
		ClientSecretSet:  &secretSet,
	}
	if a.In != "" {
		in := api.ConnectorAuthIn(a.In)
		auth.In = &in
	}
	if a.Grant != "" {
		g := api.ConnectorAuthGrant(a.Grant)
		auth.Grant = &g
	}
	if len(a.Scopes) > 0 {
		scopes := append([]string(nil), a.Scopes...)
		auth.Scopes = &scopes
	}
	oauthExtrasToAPI(a, &auth)
	return api.Connector{
		Name:        c.Name,
		DisplayName: ptrIf(c.DisplayName),
		Description: ptrIf(c.Description),
		BaseUrl:     c.BaseURL,
		Auth:        auth,
		ConnectPage: connectPageToAPI(c.ConnectPage),
		CreatedAt:   c.CreatedAt.UTC(),
		UpdatedAt:   c.UpdatedAt.UTC(),
		Version:     c.Version,
	}
}

func connectPageToAPI(p *connectors.ConnectPage) *api.ConnectPage {
	if p == nil {
		return nil
	}
	return &api.ConnectPage{LogoUrl: ptrIf(p.LogoURL), HelpText: ptrIf(p.HelpText), TestAction: ptrIf(p.TestAction)}
}

func actionFromAPI(in api.ActionInput) connectors.Action {
	a := connectors.Action{
		Name:           deref(in.Name),
		Description:    deref(in.Description),
		Method:         string(in.Method),
		Path:           in.Path,
		Body:           in.Body,
		Transformation: deref(in.Transformation),
	}
	if in.TimeoutMs != nil {
		a.TimeoutMs = *in.TimeoutMs
		if a.TimeoutMs == 0 {
			a.TimeoutMs = -1 // explicitly 0: refused, not silently the default
		}
	}
	if in.Headers != nil && len(*in.Headers) > 0 {
		a.Headers = *in.Headers
	}
	if in.Parameters != nil && len(*in.Parameters) > 0 {
		a.Parameters = make(map[string]connectors.Parameter, len(*in.Parameters))
		for name, p := range *in.Parameters {
			a.Parameters[name] = parameterFromAPI(p)
		}
	}
	return a
}

func parameterFromAPI(p api.ActionParameter) connectors.Parameter {
	out := connectors.Parameter{
		Type:        string(p.Type),
		Description: deref(p.Description),
		Default:     p.Default,
	}
	if p.Required != nil {
		out.Required = *p.Required
	}
	if p.In != nil {
		out.In = string(*p.In)
	}
	if p.Enum != nil && len(*p.Enum) > 0 {
		out.Enum = *p.Enum
	}
	return out
}

func toAPIAction(a connectors.Action) api.Action {
	out := api.Action{
		Connector:      a.Connector,
		Name:           a.Name,
		Description:    ptrIf(a.Description),
		Method:         api.ActionMethod(a.Method),
		Path:           a.Path,
		Parameters:     make(map[string]api.ActionParameter, len(a.Parameters)),
		Headers:        make(map[string]string, len(a.Headers)),
		Body:           a.Body,
		Transformation: ptrIf(a.Transformation),
		CreatedAt:      a.CreatedAt.UTC(),
		UpdatedAt:      a.UpdatedAt.UTC(),
		Version:        a.Version,
	}
	if a.TimeoutMs > 0 {
		t := a.TimeoutMs
		out.TimeoutMs = &t
	}
	for k, v := range a.Headers {
		out.Headers[k] = v
	}
	for name, p := range a.Parameters {
		required := p.Required
		ap := api.ActionParameter{
			Type:        api.ActionParameterType(p.Type),
			Required:    &required,
			Description: ptrIf(p.Description),
			Default:     p.Default,
		}
		if p.In != "" {
			in := api.ActionParameterIn(p.In)
			ap.In = &in
		}
		if len(p.Enum) > 0 {
			enum := append([]any(nil), p.Enum...)
			ap.Enum = &enum
		}
		out.Parameters[name] = ap
	}
	return out
}
