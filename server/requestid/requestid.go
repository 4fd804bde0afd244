// Package requestid carries the X-Request-Id of the request being served
// through its context, so that domain code can log and record it.
package requestid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
)

// Header is the request and response header carrying the id.
const Header = "X-Request-Id"

type ctxKey struct{}

// With returns ctx carrying id.
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// From returns the request id in ctx, or "".
func From(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// New returns a fresh random id.
func New() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Valid reports whether a caller-sent id is safe to honour: 1-128 characters
// of letters, digits and . _ : -.
func Valid(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == ':', r == '-':
		default:
			return false
		}
	}
	return true
}
