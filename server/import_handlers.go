package server

import (
	"context"
	"encoding/json"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/openapiimport"
)

// maxImportActions bounds the operations one POST /v1/openapi/import
// selects.
const maxImportActions = 1000

func (h *handlers) ImportOpenAPI(ctx context.Context, req api.ImportOpenAPIRequestObject) (api.ImportOpenAPIResponseObject, error) {
	in := *req.Body
	var spec []byte
	switch s := in.Spec.(type) {
	case nil:
		return nil, errs.E(errs.Invalid, "spec is required: the OpenAPI description as a JSON object, or a string of JSON or YAML")
	case string:
		spec = []byte(s)
	default:
		b, err := json.Marshal(s)
		if err != nil {
			return nil, errs.Wrap(errs.Invalid, err, "spec is not JSON")
		}
		spec = b
	}
	opts := openapiimport.Options{Connector: in.Connector, BaseURL: deref(in.BaseUrl), MaxActions: maxImportActions}
	if in.Tags != nil {
		opts.Tags = *in.Tags
	}
	if in.Operations != nil {
		opts.Operations = *in.Operations
	}
	res, err := openapiimport.Import(ctx, spec, opts)
	if err != nil {
		return nil, err
	}
	if in.Auth != nil {
		res.Connector.Auth = connectorFromAPI(api.ConnectorInput{Auth: *in.Auth}).Auth
	}
	dryRun := in.DryRun != nil && *in.DryRun
	done, err := h.s.connectors.Import(ctx, res.Connector, res.Actions, dryRun)
	if err != nil {
		return nil, err
	}
	out := api.ImportOpenAPI200JSONResponse{
		Connector:        toAPIConnector(done.Connector),
		ConnectorOutcome: api.OpenAPIImportResultConnectorOutcome(done.ConnectorOutcome),
		Actions:          make([]api.ImportedAction, 0, len(done.Actions)),
		Skipped:          make([]api.ImportSkipped, 0, len(res.Skipped)),
		DryRun:           dryRun,
	}
	for _, a := range done.Actions {
		out.Actions = append(out.Actions, api.ImportedAction{Name: a.Action.Name, Outcome: api.ImportedActionOutcome(a.Outcome), Action: toAPIAction(a.Action)})
	}
	for _, s := range res.Skipped {
		out.Skipped = append(out.Skipped, api.ImportSkipped{Operation: s.Operation, OperationId: ptrIf(s.OperationID), Reason: s.Reason})
	}
	if len(res.Notes) > 0 {
		out.Notes = &res.Notes
	}
	return out, nil
}
