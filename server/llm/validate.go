package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// Limits on what a caller may send besides the body size.
const (
	MaxMessages        = 2048
	MaxFunctions       = 128
	MaxStopSequences   = 4
	MaxEmbeddingInputs = 2048
	MaxChoices         = 128
	maxSchemaDepth     = 16
)

// Knob ranges.
const (
	MinTemperature = 0.0
	MaxTemperature = 2.0
	MinTopP        = 0.0
	MaxTopP        = 1.0
	MinPenalty     = -2.0
	MaxPenalty     = 2.0
)

func rangeProblem(ps []errs.Problem, field string, v *float64, lo, hi float64) []errs.Problem {
	if v == nil {
		return ps
	}
	if math.IsNaN(*v) || *v < lo || *v > hi {
		ps = append(ps, errs.Problem{Field: field, Problem: fmt.Sprintf("must be between %s and %s, got %s", fnum(lo), fnum(hi), fnum(*v))})
	}
	return ps
}

func fnum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// knobProblems checks the sampling knobs against their ranges.
func knobProblems(r *Request) []errs.Problem {
	var ps []errs.Problem
	ps = rangeProblem(ps, "temperature", r.Temperature, MinTemperature, MaxTemperature)
	ps = rangeProblem(ps, "topP", r.TopP, MinTopP, MaxTopP)
	ps = rangeProblem(ps, "frequencyPenalty", r.FrequencyPenalty, MinPenalty, MaxPenalty)
	ps = rangeProblem(ps, "presencePenalty", r.PresencePenalty, MinPenalty, MaxPenalty)
	if r.MaxTokens != nil && *r.MaxTokens < 1 {
		ps = append(ps, errs.Problem{Field: "maxTokens", Problem: fmt.Sprintf("must be at least 1, got %d", *r.MaxTokens)})
	}
	if r.N < 0 || r.N > MaxChoices {
		ps = append(ps, errs.Problem{Field: "n", Problem: fmt.Sprintf("must be between 1 and %d, got %d", MaxChoices, r.N)})
	}
	switch r.ReasoningEffort {
	case "", EffortMinimal, EffortLow, EffortMedium, EffortHigh:
	default:
		ps = append(ps, errs.Problem{Field: "reasoningEffort", Problem: fmt.Sprintf("must be minimal, low, medium or high, got %q", r.ReasoningEffort)})
	}
	if len(r.Stop) > MaxStopSequences {
		ps = append(ps, errs.Problem{Field: "stop", Problem: fmt.Sprintf("at most %d stop sequences", MaxStopSequences)})
	}
	return ps
}

// maxTokensProblem checks maxTokens against the model's limit.
func maxTokensProblem(m *Model, r *Request) []errs.Problem {
	if r.MaxTokens == nil || m.MaxTokens <= 0 || *r.MaxTokens <= m.MaxTokens || *r.MaxTokens < 1 {
		return nil
	}
	return []errs.Problem{{Field: "maxTokens", Problem: fmt.Sprintf("must be at most %d (the limit of %s), got %d", m.MaxTokens, m.ID, *r.MaxTokens)}}
}

var functionName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// schema is the part of JSON Schema that function parameters use.
type schema struct {
	Type                 any                `json:"type"`
	Description          string             `json:"description"`
	Enum                 []json.RawMessage  `json:"enum"`
	Properties           map[string]*schema `json:"properties"`
	Required             []string           `json:"required"`
	Items                *schema            `json:"items"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
}

var schemaTypes = []string{"string", "number", "integer", "boolean", "array", "object", "null"}

// types returns the schema's type names (none means any).
func (s *schema) types() ([]string, error) {
	switch t := s.Type.(type) {
	case nil:
		return nil, nil
	case string:
		return []string{t}, nil
	case []any:
		out := make([]string, 0, len(t))
		for _, x := range t {
			xs, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("type must be a string or an array of strings")
			}
			out = append(out, xs)
		}
		return out, nil
	}
	return nil, fmt.Errorf("type must be a string or an array of strings")
}

// closed reports whether properties outside Properties are refused: when
// additionalProperties is false, or unset on an object that declares properties.
func (s *schema) closed() bool {
	ap := bytes.TrimSpace(s.AdditionalProperties)
	if len(ap) == 0 {
		return s.Properties != nil
	}
	return string(ap) == "false"
}

// checkSchema reports problems of a parameters schema at field.
func checkSchema(s *schema, field string, depth int, ps []errs.Problem) []errs.Problem {
	if depth > maxSchemaDepth {
		return append(ps, errs.Problem{Field: field, Problem: fmt.Sprintf("nested deeper than %d levels", maxSchemaDepth)})
	}
	ts, err := s.types()
	if err != nil {
		return append(ps, errs.Problem{Field: field + ".type", Problem: err.Error()})
	}
	for _, t := range ts {
		if !slices.Contains(schemaTypes, t) {
			ps = append(ps, errs.Problem{Field: field + ".type", Problem: fmt.Sprintf("unknown type %q (one of %s)", t, strings.Join(schemaTypes, ", "))})
		}
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := s.Properties[name]
		if p == nil {
			ps = append(ps, errs.Problem{Field: field + ".properties." + name, Problem: "must be a schema object"})
			continue
		}
		ps = checkSchema(p, field+".properties."+name, depth+1, ps)
	}
	for i, r := range s.Required {
		if _, ok := s.Properties[r]; !ok {
			ps = append(ps, errs.Problem{Field: fmt.Sprintf("%s.required[%d]", field, i), Problem: fmt.Sprintf("names %q, which is not in properties", r)})
		}
	}
	if s.Items != nil {
		ps = checkSchema(s.Items, field+".items", depth+1, ps)
	}
	return ps
}

// FunctionDef is a function the caller declares for function calling.
type FunctionDef struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments (type object).
	Parameters json.RawMessage
}

// Tool is the function as a tool offered to the model.
func (f FunctionDef) Tool() Tool {
	return Tool{Name: f.Name, Description: f.Description, Parameters: f.Parameters}
}

// compiledFunction is a declared function with its parsed schema.
type compiledFunction struct {
	def    FunctionDef
	schema *schema
}

// compileFunctions validates function definitions (names, uniqueness,
// parameters of type object whose required names exist in properties).
func compileFunctions(fns []FunctionDef, field string) (map[string]*compiledFunction, []errs.Problem) {
	var ps []errs.Problem
	if len(fns) > MaxFunctions {
		return nil, []errs.Problem{{Field: field, Problem: fmt.Sprintf("at most %d functions", MaxFunctions)}}
	}
	out := make(map[string]*compiledFunction, len(fns))
	for i, f := range fns {
		at := fmt.Sprintf("%s[%d]", field, i)
		if !functionName.MatchString(f.Name) {
			ps = append(ps, errs.Problem{Field: at + ".name", Problem: "must be 1-64 letters, digits, '_' or '-'"})
		} else if _, dup := out[f.Name]; dup {
			ps = append(ps, errs.Problem{Field: at + ".name", Problem: fmt.Sprintf("function %q is declared twice", f.Name)})
		}
		cf := &compiledFunction{def: f, schema: &schema{Type: "object", Properties: map[string]*schema{}}}
		if raw := bytes.TrimSpace(f.Parameters); len(raw) > 0 && string(raw) != "null" {
			var s schema
			if err := json.Unmarshal(raw, &s); err != nil {
				ps = append(ps, errs.Problem{Field: at + ".parameters", Problem: "must be a JSON Schema object: " + err.Error()})
				continue
			}
			ts, _ := s.types()
			if len(ts) != 1 || ts[0] != "object" {
				ps = append(ps, errs.Problem{Field: at + ".parameters.type", Problem: `must be "object"`})
			}
			ps = checkSchema(&s, at+".parameters", 0, ps)
			cf.schema = &s
		}
		out[f.Name] = cf
	}
	return out, ps
}

// checkArguments validates a call's arguments text against its function.
// It returns the arguments as an object (nil when they are not one) and
// the problems found, with fields relative to "arguments".
func checkArguments(cf *compiledFunction, args string) (map[string]any, []errs.Problem) {
	args = strings.TrimSpace(args)
	if args == "" {
		args = "{}"
	}
	dec := json.NewDecoder(strings.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, []errs.Problem{{Field: "arguments", Problem: "is not valid JSON: " + truncate(args, 200)}}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, []errs.Problem{{Field: "arguments", Problem: "must be a JSON object"}}
	}
	return obj, checkValue(cf.schema, obj, "arguments", nil)
}

// checkValue validates v (decoded with UseNumber) against s.
func checkValue(s *schema, v any, field string, ps []errs.Problem) []errs.Problem {
	ts, _ := s.types()
	if len(ts) > 0 {
		ok := false
		for _, t := range ts {
			if jsonTypeIs(v, t) {
				ok = true
				break
			}
		}
		if !ok {
			return append(ps, errs.Problem{Field: field, Problem: fmt.Sprintf("must be of type %s, got %s", strings.Join(ts, " or "), jsonTypeName(v))})
		}
	}
	if len(s.Enum) > 0 && !enumContains(s.Enum, v) {
		allowed := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			allowed[i] = string(e)
		}
		ps = append(ps, errs.Problem{Field: field, Problem: "must be one of " + strings.Join(allowed, ", ")})
	}
	switch x := v.(type) {
	case map[string]any:
		for _, r := range s.Required {
			if _, ok := x[r]; !ok {
				ps = append(ps, errs.Problem{Field: field + "." + r, Problem: "is required"})
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if ps2, ok := s.Properties[k]; ok && ps2 != nil {
				ps = checkValue(ps2, x[k], field+"."+k, ps)
			} else if s.closed() {
				ps = append(ps, errs.Problem{Field: field + "." + k, Problem: "is not a declared parameter"})
			}
		}
	case []any:
		if s.Items != nil {
			for i, item := range x {
				ps = checkValue(s.Items, item, fmt.Sprintf("%s[%d]", field, i), ps)
			}
		}
	}
	return ps
}

func jsonTypeIs(v any, t string) bool {
	switch t {
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		if _, err := n.Int64(); err == nil {
			return true
		}
		f, err := n.Float64()
		return err == nil && f == math.Trunc(f) && !math.IsInf(f, 0)
	}
	return false
}

func jsonTypeName(v any) string {
	switch x := v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case json.Number:
		if jsonTypeIs(x, "integer") {
			return "integer"
		}
		return "number"
	}
	return "unknown"
}

// enumContains compares v with each enum value as JSON (numbers by value).
func enumContains(enum []json.RawMessage, v any) bool {
	for _, e := range enum {
		dec := json.NewDecoder(bytes.NewReader(e))
		dec.UseNumber()
		var ev any
		if dec.Decode(&ev) != nil {
			continue
		}
		if jsonEqual(ev, v) {
			return true
		}
	}
	return false
}

func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, e1 := x.Float64()
		fy, e2 := y.Float64()
		return e1 == nil && e2 == nil && fx == fy
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}
