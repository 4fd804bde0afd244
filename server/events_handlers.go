package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/webhooks"
)

func (h *handlers) ListEvents(ctx context.Context, req api.ListEventsRequestObject) (api.ListEventsResponseObject, error) {
	limit, err := pageLimit(req.Params.Limit)
	if err != nil {
		return nil, err
	}
	q := webhooks.EventQuery{Cursor: deref(req.Params.Cursor), Limit: limit}
	if req.Params.Type != nil {
		q.Type = string(*req.Params.Type)
	}
	if req.Params.Order != nil {
		q.Oldest = *req.Params.Order == api.EventOrderOldest
	}
	evs, next, err := h.s.webhooks.ListEvents(ctx, q)
	if err != nil {
		return nil, err
	}
	out := eventList{Data: make([]rawEvent, 0, len(evs))}
	for _, ev := range evs {
		out.Data = append(out.Data, rawEvent(ev))
	}
	if next != "" {
		out.NextCursor = &next
	}
	return out, nil
}

func (h *handlers) GetEvent(ctx context.Context, req api.GetEventRequestObject) (api.GetEventResponseObject, error) {
	ev, err := h.s.webhooks.GetEvent(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	return rawEvent(ev), nil
}

// rawEvent writes an event with its data exactly as stored and delivered
// (api.Event would re-encode data through a map).
type rawEvent webhooks.Event

// eventList is api.EventList over rawEvent.
type eventList struct {
	Data       []rawEvent `json:"data"`
	NextCursor *string    `json:"nextCursor,omitempty"`
}

func writeJSON(w http.ResponseWriter, v any) error {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err := buf.WriteTo(w)
	return err
}

// VisitGetEventResponse implements api.GetEventResponseObject.
func (e rawEvent) VisitGetEventResponse(w http.ResponseWriter) error { return writeJSON(w, e) }

// VisitListEventsResponse implements api.ListEventsResponseObject.
func (l eventList) VisitListEventsResponse(w http.ResponseWriter) error { return writeJSON(w, l) }

var (
	_ api.GetEventResponseObject   = rawEvent{}
	_ api.ListEventsResponseObject = eventList{}
)
