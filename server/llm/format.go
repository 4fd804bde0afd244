package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// Structured outputs: a request's ResponseFormat is checked when the
// request is prepared (a json_schema must be a valid JSON Schema, draft
// 2020-12 or draft-07, with local $refs only), and the model's output is
// checked against it when the call ends, whatever the provider promised.

// compiledFormat is a request's response format ready to check outputs.
type compiledFormat struct {
	rf     *ResponseFormat
	schema *jsonschema.Resolved // nil for json_object
}

// compileFormat validates rf and compiles its schema.
func compileFormat(rf *ResponseFormat) (*compiledFormat, []errs.Problem) {
	switch rf.Type {
	case FormatText:
		return nil, nil
	case FormatJSONObject:
		return &compiledFormat{rf: rf}, nil
	case FormatJSONSchema:
	case "":
		return nil, []errs.Problem{{Field: "responseFormat.type", Problem: "is required (text, json_object or json_schema)"}}
	default:
		return nil, []errs.Problem{{Field: "responseFormat.type", Problem: fmt.Sprintf("must be text, json_object or json_schema, got %q", rf.Type)}}
	}
	var ps []errs.Problem
	if rf.Name == "" {
		ps = append(ps, errs.Problem{Field: "responseFormat.name", Problem: "is required for json_schema"})
	} else if !functionName.MatchString(rf.Name) { // at most 64 characters, OpenAI's limit
		ps = append(ps, errs.Problem{Field: "responseFormat.name", Problem: "must be 1-64 letters, digits, '_' or '-'"})
	}
	raw := bytes.TrimSpace(rf.Schema)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, append(ps, errs.Problem{Field: "responseFormat.schema", Problem: "must be a JSON Schema object"})
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, append(ps, errs.Problem{Field: "responseFormat.schema", Problem: "is not a valid JSON Schema: " + err.Error()})
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		return nil, append(ps, errs.Problem{Field: "responseFormat.schema", Problem: "is not a valid JSON Schema: " + err.Error()})
	}
	if len(ps) > 0 {
		return nil, ps
	}
	return &compiledFormat{rf: rf, schema: resolved}, nil
}

// check returns what is wrong with text as output of the format (nil when
// it conforms).
func (f *compiledFormat) check(text string) []string {
	text = strings.TrimSpace(text)
	var v any
	dec := json.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(&v); err != nil || dec.More() {
		return []string{"the output is not valid JSON: " + truncate(text, 200)}
	}
	if _, ok := v.(map[string]any); !ok && f.schema == nil {
		return []string{"the output is not a JSON object"}
	}
	if f.schema == nil {
		return nil
	}
	if err := f.schema.Validate(v); err != nil {
		return []string{"the output does not conform to the schema: " + err.Error()}
	}
	return nil
}

// OutputCheck is the outcome of checking a model's output against the
// request's response format.
type OutputCheck struct {
	// Problems lists how the output does not conform; empty when it does.
	Problems []string
	// Strict is set when the format was strict: output that does not
	// conform is an error (a stream, having sent it, ends with one).
	Strict bool
}

// Failed reports whether the output broke a strict format.
func (c *OutputCheck) Failed() bool { return c != nil && c.Strict && !c.Valid() }

// Valid reports whether the output conforms.
func (c *OutputCheck) Valid() bool { return len(c.Problems) == 0 }

// checkOutput checks a finished call's text against r's format: nil when
// the request asked for none or the model called tools instead of
// answering.
func checkOutput(r *Request, text string, calls []ToolCall) *OutputCheck {
	if r.format == nil || len(calls) > 0 {
		return nil
	}
	return &OutputCheck{Problems: r.format.check(text), Strict: r.format.rf.Strict}
}

// OutputError is the error for a result whose output does not meet its
// request's strict response format (what a stream ends with, having sent
// the output already).
func (g *Gateway) OutputError(res *Result) error { return outputError(res.Model, res.Output) }

// outputError is the 502 for a strict format the output does not meet.
func outputError(m *Model, c *OutputCheck) error {
	return errs.E(errs.Upstream, "model %s answered with output that does not meet the strict response format: %s", m.ID, strings.Join(c.Problems, "; ")).
		WithDetails(map[string]any{"model": m.ID, "outputProblems": c.Problems})
}
