package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// Standard Webhooks header names.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every webhook secret (Standard Webhooks format).
const SecretPrefix = "whsec_"

// Bounds of a secret's key, in bytes, as the Standard Webhooks spec sets them.
const (
	MinSecretBytes = 24
	MaxSecretBytes = 64
	// newSecretBytes is the size of generated keys.
	newSecretBytes = 32
)

// NewSecret returns a fresh secret: "whsec_" + base64 of 32 random bytes.
func NewSecret() string {
	b := make([]byte, newSecretBytes)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// ParseSecret returns the key of a secret "whsec_" + standard base64 (with
// padding) of 24 to 64 bytes. Its error never repeats the secret.
func ParseSecret(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, errs.E(errs.Validation, "secret must start with %q followed by standard base64 of %d to %d random bytes", SecretPrefix, MinSecretBytes, MaxSecretBytes)
	}
	key, err := base64.StdEncoding.Strict().DecodeString(rest)
	if err != nil {
		return nil, errs.E(errs.Validation, "secret after %q is not valid standard base64 (with = padding)", SecretPrefix)
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return nil, errs.E(errs.Validation, "secret key must be %d to %d bytes, got %d", MinSecretBytes, MaxSecretBytes, len(key))
	}
	return key, nil
}

// Sign returns the webhook-signature header value for a message: one
// "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>" per key, separated by
// spaces (several keys while a rotated-out secret is still valid).
func Sign(id string, timestamp int64, body []byte, keys ...[]byte) string {
	sigs := make([]string, 0, len(keys))
	for _, k := range keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(id))
		m.Write([]byte{'.'})
		m.Write(strconv.AppendInt(nil, timestamp, 10))
		m.Write([]byte{'.'})
		m.Write(body)
		sigs = append(sigs, fmt.Sprintf("v1,%s", base64.StdEncoding.EncodeToString(m.Sum(nil))))
	}
	return strings.Join(sigs, " ")
}
