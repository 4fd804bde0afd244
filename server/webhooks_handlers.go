package server

import (
	"context"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/egress"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/webhooks"
)

// initWebhooks builds the webhooks service, makes it the event Recorder and
// registers its worker's shutdown. Its worker starts at the end of New.
func (s *Server) initWebhooks() error {
	guard, err := egress.New(s.cfg.Egress.Allow)
	if err != nil {
		return err
	}
	s.webhooks = webhooks.New(webhooks.Options{
		Store: s.store, Vault: s.vault, Config: s.cfg.Webhooks, Guard: guard, Log: s.log, Leases: s.leases,
	})
	s.events = s.webhooks
	s.closers = append(s.closers, s.webhooks.Close)
	// Events of the request path (model calls, limits) are queued and
	// recorded in batches; the queue closes before the webhooks do.
	s.eventQueue = &events.Queue{Store: s.store, Recorder: s.webhooks, Logger: s.log, Leases: s.leases}
	s.eventQueue.Start()
	s.closers = append(s.closers, s.eventQueue.Close)
	return nil
}

// EventQueue returns the queue of request-path events (tests flush it).
func (s *Server) EventQueue() *events.Queue { return s.eventQueue }

// Webhooks returns the webhooks service (tests, benchmarks).
func (s *Server) Webhooks() *webhooks.Service { return s.webhooks }

// ifMatchPtr resolves If-Match to the version a write needs (nil: any).
func ifMatchPtr(header *string, current func() (int64, error)) (*int64, error) {
	v, err := ifMatchVersion(header, current)
	if err != nil || v == 0 {
		return nil, err
	}
	return &v, nil
}

func (h *handlers) webhookVersion(ctx context.Context, id string) func() (int64, error) {
	return func() (int64, error) {
		w, err := h.s.webhooks.Get(ctx, id)
		return w.Version, err
	}
}

func webhookInput(url string, events []string, description *string, enabled *bool, secret *string) webhooks.Input {
	return webhooks.Input{URL: url, Events: events, Description: deref(description), Enabled: enabled, Secret: deref(secret)}
}

func (h *handlers) CreateWebhook(ctx context.Context, req api.CreateWebhookRequestObject) (api.CreateWebhookResponseObject, error) {
	b := req.Body
	w, secret, err := h.s.webhooks.Create(ctx, webhookInput(b.Url, b.Events, b.Description, b.Enabled, b.Secret))
	if err != nil {
		return nil, err
	}
	noStore := "no-store"
	return api.CreateWebhook201JSONResponse{
		Body:    withSecret(toWebhook(w), secret),
		Headers: api.CreateWebhook201ResponseHeaders{CacheControl: &noStore, ETag: etag(w.Version)},
	}, nil
}

func (h *handlers) ListWebhooks(ctx context.Context, req api.ListWebhooksRequestObject) (api.ListWebhooksResponseObject, error) {
	limit, err := pageLimit(req.Params.Limit)
	if err != nil {
		return nil, err
	}
	ws, next, err := h.s.webhooks.List(ctx, deref(req.Params.Cursor), limit)
	if err != nil {
		return nil, err
	}
	out := api.ListWebhooks200JSONResponse{Data: make([]api.Webhook, 0, len(ws))}
	for _, w := range ws {
		out.Data = append(out.Data, toWebhook(w))
	}
	if next != "" {
		out.NextCursor = &next
	}
	return out, nil
}

func (h *handlers) GetWebhook(ctx context.Context, req api.GetWebhookRequestObject) (api.GetWebhookResponseObject, error) {
	w, err := h.s.webhooks.Get(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	return api.GetWebhook200JSONResponse{Body: toWebhook(w), Headers: api.GetWebhook200ResponseHeaders{ETag: etag(w.Version)}}, nil
}

func (h *handlers) ReplaceWebhook(ctx context.Context, req api.ReplaceWebhookRequestObject) (api.ReplaceWebhookResponseObject, error) {
	version, err := ifMatchPtr(req.Params.IfMatch, h.webhookVersion(ctx, req.Id))
	if err != nil {
		return nil, err
	}
	b := req.Body
	w, err := h.s.webhooks.Replace(ctx, req.Id, webhookInput(b.Url, b.Events, b.Description, b.Enabled, b.Secret), version)
	if err != nil {
		return nil, err
	}
	return api.ReplaceWebhook200JSONResponse{Body: toWebhook(w), Headers: api.ReplaceWebhook200ResponseHeaders{ETag: etag(w.Version)}}, nil
}

func (h *handlers) DeleteWebhook(ctx context.Context, req api.DeleteWebhookRequestObject) (api.DeleteWebhookResponseObject, error) {
	version, err := ifMatchPtr(req.Params.IfMatch, h.webhookVersion(ctx, req.Id))
	if err != nil {
		return nil, err
	}
	if err := h.s.webhooks.Delete(ctx, req.Id, version); err != nil {
		return nil, err
	}
	return api.DeleteWebhook204Response{}, nil
}

func (h *handlers) RotateWebhookSecret(ctx context.Context, req api.RotateWebhookSecretRequestObject) (api.RotateWebhookSecretResponseObject, error) {
	version, err := ifMatchPtr(req.Params.IfMatch, h.webhookVersion(ctx, req.Id))
	if err != nil {
		return nil, err
	}
	var (
		secret string
		grace  *time.Duration
	)
	if b := req.Body; b != nil {
		secret = deref(b.Secret)
		if b.GracePeriodSeconds != nil {
			g := time.Duration(*b.GracePeriodSeconds) * time.Second
			grace = &g
		}
	}
	w, secret, err := h.s.webhooks.RotateSecret(ctx, req.Id, secret, grace, version)
	if err != nil {
		return nil, err
	}
	noStore := "no-store"
	return api.RotateWebhookSecret200JSONResponse{
		Body:    withSecret(toWebhook(w), secret),
		Headers: api.RotateWebhookSecret200ResponseHeaders{CacheControl: &noStore, ETag: etag(w.Version)},
	}, nil
}

func (h *handlers) TestWebhook(ctx context.Context, req api.TestWebhookRequestObject) (api.TestWebhookResponseObject, error) {
	d, err := h.s.webhooks.Test(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	return api.TestWebhook202JSONResponse(toDelivery(d)), nil
}

func (h *handlers) ListWebhookDeliveries(ctx context.Context, req api.ListWebhookDeliveriesRequestObject) (api.ListWebhookDeliveriesResponseObject, error) {
	limit, err := pageLimit(req.Params.Limit)
	if err != nil {
		return nil, err
	}
	q := webhooks.DeliveryQuery{Cursor: deref(req.Params.Cursor), Limit: limit}
	if req.Params.Status != nil {
		q.Status = string(*req.Params.Status)
	}
	ds, next, err := h.s.webhooks.ListDeliveries(ctx, req.Id, q)
	if err != nil {
		return nil, err
	}
	out := api.ListWebhookDeliveries200JSONResponse{Data: make([]api.WebhookDelivery, 0, len(ds))}
	for _, d := range ds {
		out.Data = append(out.Data, toDelivery(d))
	}
	if next != "" {
		out.NextCursor = &next
	}
	return out, nil
}

func (h *handlers) GetWebhookDelivery(ctx context.Context, req api.GetWebhookDeliveryRequestObject) (api.GetWebhookDeliveryResponseObject, error) {
	d, err := h.s.webhooks.GetDelivery(ctx, req.Id, req.Delivery)
	if err != nil {
		return nil, err
	}
	return api.GetWebhookDelivery200JSONResponse(toDelivery(d)), nil
}

func (h *handlers) RetryWebhookDelivery(ctx context.Context, req api.RetryWebhookDeliveryRequestObject) (api.RetryWebhookDeliveryResponseObject, error) {
	d, err := h.s.webhooks.Retry(ctx, req.Id, req.Delivery)
	if err != nil {
		return nil, err
	}
	return api.RetryWebhookDelivery202JSONResponse(toDelivery(d)), nil
}

// toWebhook is the wire form of a webhook (it has no secret to leave out).
func toWebhook(w webhooks.Webhook) api.Webhook {
	out := api.Webhook{
		Id: w.ID, Url: w.URL, Events: append([]string{}, w.Events...), Enabled: w.Enabled,
		CreatedAt: w.CreatedAt.UTC(), UpdatedAt: w.UpdatedAt.UTC(), Version: w.Version,
		DisabledAt: utcPtr(w.DisabledAt), FailingSince: utcPtr(w.FailingSince),
		PreviousSecretExpiresAt: utcPtr(w.PreviousSecretExpiresAt),
	}
	if w.Description != "" {
		out.Description = &w.Description
	}
	if w.DisabledReason != "" {
		out.DisabledReason = &w.DisabledReason
	}
	return out
}

func withSecret(w api.Webhook, secret string) api.WebhookWithSecret {
	return api.WebhookWithSecret{
		Id: w.Id, Url: w.Url, Events: w.Events, Description: w.Description, Enabled: w.Enabled,
		CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, Version: w.Version,
		DisabledAt: w.DisabledAt, DisabledReason: w.DisabledReason, FailingSince: w.FailingSince,
		PreviousSecretExpiresAt: w.PreviousSecretExpiresAt, Secret: secret,
	}
}

// toDelivery is the wire form of a delivery.
func toDelivery(d webhooks.Delivery) api.WebhookDelivery {
	out := api.WebhookDelivery{
		Id: d.ID, WebhookId: d.WebhookID, EventId: d.EventID, EventType: d.EventType,
		Status: api.WebhookDeliveryStatus(d.Status), Attempts: d.Attempts, CreatedAt: d.CreatedAt.UTC(),
		NextAttemptAt: utcPtr(d.NextAttemptAt), LastAttemptAt: utcPtr(d.LastAttemptAt),
	}
	if d.Status != webhooks.StatusPending {
		out.NextAttemptAt = nil
	}
	if d.LastResponseCode != 0 {
		out.LastResponseCode = &d.LastResponseCode
	}
	if d.LastError != "" {
		out.LastError = &d.LastError
	}
	if d.LastAttemptAt != nil {
		out.LastDurationMs = &d.LastDurationMs
	}
	return out
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
