package server

import (
	"context"
	"net/http"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

func (h *handlers) GetHealthz(context.Context, api.GetHealthzRequestObject) (api.GetHealthzResponseObject, error) {
	return api.GetHealthz200JSONResponse{Status: "ok"}, nil
}

func (h *handlers) GetReadyz(ctx context.Context, _ api.GetReadyzRequestObject) (api.GetReadyzResponseObject, error) {
	if err := h.s.store.Ping(ctx); err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "not ready: the store (database) is not answering")
	}
	if err := h.s.pingRedis(ctx); err != nil {
		return nil, err
	}
	return api.GetReadyz200JSONResponse{Status: "ok"}, nil
}

func (h *handlers) GetOpenAPI(context.Context, api.GetOpenAPIRequestObject) (api.GetOpenAPIResponseObject, error) {
	spec, err := loadedSpec()
	if err != nil {
		return nil, err
	}
	b, err := spec.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return rawJSON(b), nil
}

// rawJSON answers 200 with pre-encoded JSON.
type rawJSON []byte

func (r rawJSON) VisitGetOpenAPIResponse(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(r)
	return err
}
