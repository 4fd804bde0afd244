package connectors

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
)

// Redacted replaces a secret found in upstream output.
const Redacted = "[REDACTED]"

// Redactor removes a connection's secrets from text an upstream or a
// script produced (an API that echoes the key it was sent, an error body
// quoting it), in the forms they travel in: as is, URL-escaped (query and
// path escaping) and JSON-escaped. The secrets are the values of the
// connection (API key, token, password, client secret) and the values as
// sent (for HTTP Basic, the base64 of "username:password" that the
// Authorization header carries).
//
// What redaction promises: it is defence in depth against the accidental
// echo of a credential in exactly one of those forms, by an upstream (an
// API that reflects request headers, an error page quoting the query
// string) or by a transformation passing such a body through. It is not a
// boundary against action authors. Whoever holds connectors:write writes
// the action's path, headers, body and transformation, and is trusted with
// whatever the upstream answers and whatever their script computes from
// it: a script that reverses, splits, re-encodes (base64, hex, character
// codes) or otherwise transforms a secret it finds in a response gets it
// through, and so does an upstream that returns it encoded. Other
// encodings are deliberately not chased: the base64 of a secret inside a
// longer string depends on its offset, and any fixed list of encodings is
// one more encoding away from being bypassed, while it would redact
// innocent text that happens to match.
type Redactor struct {
	forms []string
}

// NewRedactor returns a redactor for secrets (empty ones are ignored).
func NewRedactor(secrets ...string) *Redactor {
	r := &Redactor{}
	seen := map[string]bool{}
	for _, s := range secrets {
		if s == "" {
			continue
		}
		j, _ := json.Marshal(s)
		for _, f := range []string{s, url.QueryEscape(s), url.PathEscape(s), string(j[1 : len(j)-1])} {
			if !seen[f] {
				seen[f] = true
				r.forms = append(r.forms, f)
			}
		}
	}
	// Longer forms first, so that a secret containing another is replaced whole.
	for i := 1; i < len(r.forms); i++ {
		for j := i; j > 0 && len(r.forms[j]) > len(r.forms[j-1]); j-- {
			r.forms[j], r.forms[j-1] = r.forms[j-1], r.forms[j]
		}
	}
	return r
}

// Text returns s with every secret replaced by Redacted.
func (r *Redactor) Text(s string) string {
	for _, f := range r.forms {
		if strings.Contains(s, f) {
			s = strings.ReplaceAll(s, f, Redacted)
		}
	}
	return s
}

func (r *Redactor) found(b []byte) bool {
	for _, f := range r.forms {
		if bytes.Contains(b, []byte(f)) {
			return true
		}
	}
	return false
}

// JSON returns the JSON document b with every secret in its strings and
// member names replaced, keeping it valid JSON; b itself when there is
// none (the common case costs one scan).
func (r *Redactor) JSON(b []byte) []byte {
	if len(r.forms) == 0 || !r.found(b) {
		return b
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return []byte(`"` + Redacted + `"`)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r.value(v)); err != nil {
		return []byte(`"` + Redacted + `"`)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n"))
}

func (r *Redactor) value(v any) any {
	switch x := v.(type) {
	case string:
		return r.Text(x)
	case []any:
		for i := range x {
			x[i] = r.value(x[i])
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[r.Text(k)] = r.value(e)
		}
		return out
	}
	return v
}
