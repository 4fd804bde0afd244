package webhooks_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/webhooks"
)

// The Standard Webhooks reference vector (the spec's libraries' own test).
func TestSignReferenceVector(t *testing.T) {
	key, err := webhooks.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := webhooks.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`), key)
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("Sign = %q, want %q", got, want)
	}
}

// Every signature we produce is accepted by the independent Standard
// Webhooks verifier, for each secret of a rotation; a wrong secret, a
// changed body or a changed id is refused.
func TestSignVerifiedByStandardWebhooks(t *testing.T) {
	body := []byte(`{"id":"evt_1","type":"connector.created","createdAt":"2030-01-02T03:04:05.006Z","data":{"name":"gh"}}`)
	secret24 := webhooks.SecretPrefix + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 24))
	secret64 := webhooks.SecretPrefix + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 64))
	tests := []struct {
		name    string
		signers []string // secrets that sign
		checker string   // secret the receiver verifies with
		mutate  func(h http.Header, b []byte) []byte
		ok      bool
	}{
		{name: "generated secret", signers: []string{"gen"}, checker: "gen", ok: true},
		{name: "24-byte secret", signers: []string{secret24}, checker: secret24, ok: true},
		{name: "64-byte secret", signers: []string{secret64}, checker: secret64, ok: true},
		{name: "rotation: new secret verifies", signers: []string{secret64, secret24}, checker: secret64, ok: true},
		{name: "rotation: old secret verifies", signers: []string{secret64, secret24}, checker: secret24, ok: true},
		{name: "wrong secret refused", signers: []string{secret24}, checker: secret64, ok: false},
		{name: "changed body refused", signers: []string{secret24}, checker: secret24, ok: false,
			mutate: func(_ http.Header, b []byte) []byte { return append(bytes.Clone(b), ' ') }},
		{name: "changed id refused", signers: []string{secret24}, checker: secret24, ok: false,
			mutate: func(h http.Header, b []byte) []byte { h.Set(webhooks.HeaderID, "evt_2"); return b }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gen := webhooks.NewSecret()
			resolve := func(s string) string {
				if s == "gen" {
					return gen
				}
				return s
			}
			var keys [][]byte
			for _, s := range tt.signers {
				k, err := webhooks.ParseSecret(resolve(s))
				if err != nil {
					t.Fatal(err)
				}
				keys = append(keys, k)
			}
			ts := time.Now().Unix()
			h := http.Header{}
			h.Set(webhooks.HeaderID, "evt_1")
			h.Set(webhooks.HeaderTimestamp, strconv.FormatInt(ts, 10))
			h.Set(webhooks.HeaderSignature, webhooks.Sign("evt_1", ts, body, keys...))
			if n := len(strings.Fields(h.Get(webhooks.HeaderSignature))); n != len(keys) {
				t.Fatalf("%d signatures for %d keys", n, len(keys))
			}
			b := body
			if tt.mutate != nil {
				b = tt.mutate(h, b)
			}
			wh, err := standardwebhooks.NewWebhook(resolve(tt.checker))
			if err != nil {
				t.Fatal(err)
			}
			err = wh.Verify(b, h)
			if tt.ok && err != nil {
				t.Fatalf("verifier refused: %v", err)
			}
			if !tt.ok && err == nil {
				t.Fatal("verifier accepted a signature it must refuse")
			}
		})
	}
}

func TestParseSecret(t *testing.T) {
	b64 := func(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, n)) }
	tests := []struct {
		name, secret, wantErr string
	}{
		{"generated", webhooks.NewSecret(), ""},
		{"24 bytes", "whsec_" + b64(24), ""},
		{"64 bytes", "whsec_" + b64(64), ""},
		{"23 bytes", "whsec_" + b64(23), "must be 24 to 64 bytes, got 23"},
		{"65 bytes", "whsec_" + b64(65), "must be 24 to 64 bytes, got 65"},
		{"no prefix", b64(32), `must start with "whsec_"`},
		{"url alphabet", "whsec_" + strings.Repeat("-_", 16), "not valid standard base64"},
		{"missing padding", "whsec_" + strings.TrimRight(b64(25), "="), "not valid standard base64"},
		{"empty", "", `must start with "whsec_"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := webhooks.ParseSecret(tt.secret)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("ParseSecret: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("ParseSecret error = %v, want one containing %q", err, tt.wantErr)
			case err != nil && len(tt.secret) > 10 && strings.Contains(err.Error(), tt.secret[6:]):
				t.Fatalf("error repeats the secret: %v", err)
			}
		})
	}
}

// FuzzParseSecret: the parser never panics, never echoes its input, and
// what it accepts is a 24..64-byte key whose signatures the independent
// verifier accepts.
func FuzzParseSecret(f *testing.F) {
	for _, s := range []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "whsec_====", "whsec_" + strings.Repeat("A", 88), "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		key, err := webhooks.ParseSecret(s)
		if err != nil {
			if len(s) > 12 && strings.Contains(err.Error(), s) {
				t.Fatalf("error echoes the input: %v", err)
			}
			return
		}
		if len(key) < webhooks.MinSecretBytes || len(key) > webhooks.MaxSecretBytes {
			t.Fatalf("accepted a %d-byte key", len(key))
		}
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			t.Fatalf("verifier cannot read a secret we accept: %v", err)
		}
		h := http.Header{}
		ts := time.Now().Unix()
		h.Set(webhooks.HeaderID, "evt_x")
		h.Set(webhooks.HeaderTimestamp, strconv.FormatInt(ts, 10))
		h.Set(webhooks.HeaderSignature, webhooks.Sign("evt_x", ts, []byte("{}"), key))
		if err := wh.Verify([]byte("{}"), h); err != nil {
			t.Fatalf("verifier refused: %v", err)
		}
	})
}
