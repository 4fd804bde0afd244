package openapiimport

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// maxName is the longest connector, action or parameter name.
const maxName = 64

func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// snakeCase turns an operationId (or any text) into a lower-case
// identifier: words split at case changes and at every run of other
// characters, joined by "_". "repos/get-content" → "repos_get_content",
// "listCoreV1NamespacedPod" → "list_core_v1_namespaced_pod",
// "getHTTPStatus" → "get_http_status".
func snakeCase(s string) string {
	var b strings.Builder
	sep := true // at the start or after a "_": no separator needed
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isUpper(c):
			if !sep && i > 0 && (isLower(s[i-1]) || isDigit(s[i-1]) || isUpper(s[i-1]) && i+1 < len(s) && isLower(s[i+1])) {
				b.WriteByte('_')
			}
			b.WriteByte(c + ('a' - 'A'))
			sep = false
		case isLower(c) || isDigit(c):
			b.WriteByte(c)
			sep = false
		default:
			if !sep {
				b.WriteByte('_')
				sep = true
			}
		}
	}
	return strings.TrimRight(b.String(), "_")
}

// actionName is the action name of an operation: its operationId in snake
// case, or method and path when it has none; a name that would not start
// with a letter gets "op_" before it, and one longer than 64 characters is
// cut and ends with a hash of the whole, so that it stays distinct.
func actionName(operationID, method, path string) string {
	base := snakeCase(operationID)
	if base == "" {
		base = snakeCase(strings.ToLower(method) + " " + path)
	}
	if base == "" || !isLower(base[0]) {
		base = strings.TrimSuffix("op_"+base, "_")
	}
	return fit(base, "")
}

// fit cuts name so that name+suffix is at most 64 bytes; a cut name ends
// with 8 hex digits of its hash.
func fit(name, suffix string) string {
	if len(name)+len(suffix) <= maxName {
		return name + suffix
	}
	sum := sha256.Sum256([]byte(name))
	h := "_" + hex.EncodeToString(sum[:4])
	cut := strings.TrimRight(name[:maxName-len(h)-len(suffix)], "_")
	return cut + h + suffix
}

// uniqueName returns name, or name_2, name_3... the first not in used,
// and records it.
func uniqueName(name string, used map[string]bool) string {
	out := name
	for n := 2; used[out]; n++ {
		out = fit(name, "_"+strconv.Itoa(n))
	}
	used[out] = true
	return out
}

// paramName maps a name from a description to a parameter name
// (^[A-Za-z_][A-Za-z0-9_]{0,63}$): each run of other characters becomes
// "_", leading and trailing ones are dropped ("per-page" → "per_page",
// "filter[state]" → "filter_state", "$top" → "top"), a name that would
// start with a digit gets "p_" before it. ok is false when nothing of the
// name is left.
func paramName(s string) (string, bool) {
	var b strings.Builder
	pending := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isLower(c) || isUpper(c) || isDigit(c) || c == '_' {
			if pending && b.Len() > 0 {
				b.WriteByte('_')
			}
			pending = false
			b.WriteByte(c)
			continue
		}
		pending = true
	}
	out := b.String()
	if out == "" {
		return "", false
	}
	if isDigit(out[0]) {
		out = "p_" + out
	}
	if len(out) > maxName {
		out = fit(out, "")
	}
	return out, true
}
