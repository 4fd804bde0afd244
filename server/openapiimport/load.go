package openapiimport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oasdiff/yaml"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// Parse reads an API description (OpenAPI 3.0 or 3.1, or Swagger 2.0,
// which is converted to OpenAPI 3), as JSON or YAML, and resolves its
// internal references. References to other files or URLs are refused: a
// description is read from the bytes given and nothing else.
//
// A description that does not parse, names no supported version or whose
// references do not resolve is errs.Invalid saying where.
func Parse(ctx context.Context, data []byte) (*openapi3.T, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errs.E(errs.Invalid, "spec is empty; pass an OpenAPI 3.x or Swagger 2.0 description (JSON or YAML)")
	}
	js := data
	if !json.Valid(data) {
		if t := bytes.TrimSpace(data); t[0] == '{' || t[0] == '[' {
			return nil, errs.E(errs.Invalid, "spec is not valid JSON: %s", jsonSyntaxError(data))
		}
		var err error
		if js, err = yaml.YAMLToJSON(data); err != nil {
			return nil, errs.E(errs.Invalid, "spec is neither JSON nor valid YAML: %v", err)
		}
	}
	var probe struct {
		Swagger any `json:"swagger"`
		OpenAPI any `json:"openapi"`
	}
	if err := json.Unmarshal(js, &probe); err != nil {
		return nil, errs.E(errs.Invalid, "spec is not an object: an OpenAPI description is a JSON or YAML object with an openapi (or swagger) field")
	}
	loader := openapi3.NewLoader()
	loader.Context = ctx
	loader.IsExternalRefsAllowed = false
	swagger, _ := probe.Swagger.(string)
	version, _ := probe.OpenAPI.(string)
	var (
		doc *openapi3.T
		err error
	)
	switch {
	case swagger == "2.0":
		var d2 openapi2.T
		if err = json.Unmarshal(js, &d2); err != nil {
			return nil, errs.E(errs.Invalid, "spec (Swagger 2.0) does not decode: %v", err)
		}
		if doc, err = openapi2conv.ToV3WithLoader(&d2, loader, nil); err != nil {
			return nil, errs.E(errs.Invalid, "spec (Swagger 2.0) does not convert to OpenAPI 3: %v", err)
		}
	case strings.HasPrefix(version, "3.0") || strings.HasPrefix(version, "3.1"):
		if doc, err = loader.LoadFromData(js); err != nil {
			return nil, errs.E(errs.Invalid, "spec (OpenAPI %s) does not load: %v", version, err)
		}
	case probe.Swagger != nil:
		return nil, errs.E(errs.Invalid, "spec says swagger: %v; only Swagger 2.0 and OpenAPI 3.0 and 3.1 are supported", probe.Swagger)
	case probe.OpenAPI != nil:
		return nil, errs.E(errs.Invalid, "spec says openapi: %v; only OpenAPI 3.0 and 3.1 (and Swagger 2.0) are supported", probe.OpenAPI)
	default:
		return nil, errs.E(errs.Invalid, "spec has neither an openapi nor a swagger field; is it an OpenAPI description?")
	}
	if doc.Paths == nil {
		doc.Paths = openapi3.NewPaths()
	}
	return doc, nil
}

// jsonSyntaxError says where JSON stops being valid: line and column.
func jsonSyntaxError(data []byte) string {
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		if err == nil {
			return "unknown error"
		}
		return err.Error()
	}
	line, col := 1, 1
	for _, c := range data[:max(0, min(int(se.Offset)-1, len(data)))] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("line %d, column %d: %v", line, col, se)
}
