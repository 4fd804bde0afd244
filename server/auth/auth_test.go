package auth_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

var bg = context.Background()

func newKeys(t testing.TB) (*auth.Keys, *store.Bolt) {
	t.Helper()
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &auth.Keys{Store: st}, st
}

type fixed struct {
	p   *auth.Principal
	err error
}

func (f fixed) Authenticate(context.Context, string) (*auth.Principal, error) { return f.p, f.err }

func TestChain(t *testing.T) {
	alice := &auth.Principal{ID: "alice"}
	refused := errs.E(errs.Unauthenticated, "token expired")
	cases := []struct {
		name    string
		chain   auth.Chain
		want    string
		wantErr string
	}{
		{"first that recognises decides", auth.Chain{fixed{err: auth.ErrNotMine}, fixed{p: alice}}, "alice", ""},
		{"a refusal stops the chain", auth.Chain{fixed{err: refused}, fixed{p: alice}}, "", "token expired"},
		{"nobody recognises it", auth.Chain{fixed{err: auth.ErrNotMine}, fixed{err: auth.ErrNotMine}}, "", "invalid credential"},
		{"empty chain", auth.Chain{}, "", "invalid credential"},
		{"wrapped not-mine is skipped", auth.Chain{fixed{err: fmt.Errorf("oauth: %w", auth.ErrNotMine)}, fixed{p: alice}}, "alice", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.chain.Authenticate(bg, "cred")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || errs.KindOf(err) != errs.Unauthenticated {
					t.Fatalf("err = %v, want 401 %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || p.ID != tc.want {
				t.Fatalf("= %v, %v; want %s", p, err, tc.want)
			}
		})
	}
}

func TestPrincipalRequire(t *testing.T) {
	reader := &auth.Principal{Scopes: []string{auth.ScopeConnectorsRead}}
	admin := &auth.Principal{Scopes: []string{auth.ScopeAdmin}}
	if err := admin.Require(auth.ScopeConnectorsWrite, auth.ScopeLLM); err != nil {
		t.Errorf("admin lacks a scope: %v", err)
	}
	if err := reader.Require(auth.ScopeConnectorsRead); err != nil {
		t.Errorf("reader: %v", err)
	}
	err := reader.Require(auth.ScopeConnectorsRead, auth.ScopeConnectorsWrite, auth.ScopeInvoke)
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Forbidden || fmt.Sprint(e.Details["requiredScopes"]) != "[connectors:write invoke]" {
		t.Errorf("missing scopes = %v (%+v), want 403 listing connectors:write and invoke", err, e)
	}
	var nobody *auth.Principal
	if err := nobody.Require(auth.ScopeLLM); errs.KindOf(err) != errs.Unauthenticated {
		t.Errorf("nil principal = %v, want 401", err)
	}
	if nobody.Has(auth.ScopeLLM) {
		t.Error("nil principal has a scope")
	}
	if p := auth.FromContext(auth.WithPrincipal(bg, admin)); p != admin {
		t.Error("principal lost in the context")
	}
	if auth.FromContext(bg) != nil {
		t.Error("principal from an empty context")
	}
}

func TestKeyCreateAndAuthenticate(t *testing.T) {
	keys, st := newKeys(t)
	key, secret, err := keys.Create(bg, auth.NewAPIKeyInput{Name: "svc", Scopes: []string{auth.ScopeLLM, auth.ScopeInvoke}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, "sb_") || len(secret) != 46 || key.Hash != "" || key.Prefix != secret[:7] {
		t.Errorf("created %+v with secret length %d", key, len(secret))
	}
	_, other, _ := keys.Create(bg, auth.NewAPIKeyInput{Name: "svc", Scopes: []string{auth.ScopeLLM}})
	if other == secret {
		t.Fatal("two keys share a secret")
	}
	p, err := keys.Authenticate(bg, secret)
	if err != nil || p.ID != key.ID || p.Kind != auth.KindAPIKey || !slices.Equal(p.Scopes, []string{auth.ScopeLLM, auth.ScopeInvoke}) {
		t.Fatalf("Authenticate = %+v, %v", p, err)
	}
	for name, cred := range map[string]string{
		"one character off": secret[:len(secret)-1] + string(secret[len(secret)-1]^1),
		"truncated":         secret[:20],
		"with suffix":       secret + "x",
	} {
		if _, err := keys.Authenticate(bg, cred); errs.KindOf(err) != errs.Unauthenticated || strings.Contains(err.Error(), cred) {
			t.Errorf("%s: %v, want 401 without the credential", name, err)
		}
	}
	if _, err := keys.Authenticate(bg, "eyJhbGciOi.jwt.token"); !errors.Is(err, auth.ErrNotMine) {
		t.Errorf("a non-sb_ credential: %v, want ErrNotMine", err)
	}
	// Only the hash is stored.
	_ = st.View(bg, func(tx store.Tx) error {
		for _, b := range []string{"apikeys", "apikeys_by_hash"} {
			_ = tx.Scan(b, "", "", func(k string, v []byte) (bool, error) {
				if strings.Contains(k, secret[3:]) || bytes.Contains(v, []byte(secret[3:])) {
					t.Errorf("bucket %s holds the secret", b)
				}
				return true, nil
			})
		}
		return nil
	})
}

func TestKeyExpiry(t *testing.T) {
	keys, _ := newKeys(t)
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	keys.Now = func() time.Time { return now }
	exp := now.Add(time.Hour)
	key, secret, err := keys.Create(bg, auth.NewAPIKeyInput{Name: "temp", Scopes: []string{auth.ScopeLLM}, ExpiresAt: &exp})
	if err != nil {
		t.Fatal(err)
	}
	if !key.ExpiresAt.Equal(exp) {
		t.Errorf("expiresAt = %v", key.ExpiresAt)
	}
	for _, tc := range []struct {
		at time.Time
		ok bool
	}{{now, true}, {exp.Add(-time.Nanosecond), true}, {exp, false}, {exp.Add(time.Hour), false}} {
		keys.Now = func() time.Time { return tc.at }
		_, err := keys.Authenticate(bg, secret)
		if (err == nil) != tc.ok {
			t.Errorf("at %v: err %v, want ok=%v", tc.at, err, tc.ok)
		}
		if err != nil && (!strings.Contains(err.Error(), "expired") || errs.KindOf(err) != errs.Unauthenticated) {
			t.Errorf("at %v: %v, want 401 expired", tc.at, err)
		}
	}
}

func TestKeyValidation(t *testing.T) {
	keys, _ := newKeys(t)
	past := time.Now().Add(-time.Second)
	cases := []struct {
		name   string
		in     auth.NewAPIKeyInput
		fields []string
	}{
		{"empty", auth.NewAPIKeyInput{}, []string{"name", "scopes"}},
		{"blank name", auth.NewAPIKeyInput{Name: "   ", Scopes: []string{"llm"}}, []string{"name"}},
		{"long name", auth.NewAPIKeyInput{Name: strings.Repeat("é", 129), Scopes: []string{"llm"}}, []string{"name"}},
		{"unknown scope", auth.NewAPIKeyInput{Name: "x", Scopes: []string{"llm", "superuser"}}, []string{"scopes[1]"}},
		{"duplicate scope", auth.NewAPIKeyInput{Name: "x", Scopes: []string{"llm", "llm"}}, []string{"scopes[1]"}},
		{"past expiry", auth.NewAPIKeyInput{Name: "x", Scopes: []string{"llm"}, ExpiresAt: &past}, []string{"expiresAt"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := keys.Create(bg, tc.in)
			var e *errs.Error
			if !errors.As(err, &e) || e.Kind != errs.Validation {
				t.Fatalf("err = %v, want 422", err)
			}
			ps, _ := e.Details["problems"].([]errs.Problem)
			for _, f := range tc.fields {
				if !slices.ContainsFunc(ps, func(p errs.Problem) bool { return p.Field == f }) {
					t.Errorf("problems %v lack %s", ps, f)
				}
			}
		})
	}
	// 128 multi-byte characters are fine.
	if _, _, err := keys.Create(bg, auth.NewAPIKeyInput{Name: strings.Repeat("é", 128), Scopes: []string{"llm"}}); err != nil {
		t.Errorf("128-character name: %v", err)
	}
	for _, secret := range []string{"short", "sb_" + strings.Repeat("a", 31), "sk_" + strings.Repeat("a", 40), "sb_" + strings.Repeat("a", 20) + " " + strings.Repeat("a", 20), "sb_" + strings.Repeat("a", 600)} {
		if _, _, err := keys.Create(bg, auth.NewAPIKeyInput{Name: "boot", Scopes: []string{"admin"}, Secret: secret}); errs.KindOf(err) != errs.Validation || strings.Contains(err.Error(), secret) {
			t.Errorf("given secret %q: %v, want 422 without the secret", secret, err)
		}
	}
	given := "sb_" + strings.Repeat("b", 40)
	if _, _, err := keys.Create(bg, auth.NewAPIKeyInput{Name: "boot", Scopes: []string{"admin"}, Secret: given}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := keys.Create(bg, auth.NewAPIKeyInput{Name: "boot", Scopes: []string{"admin"}, Secret: given}); errs.KindOf(err) != errs.Conflict {
		t.Errorf("same secret twice: %v, want 409", err)
	}
}

func TestKeyIDsSortByCreation(t *testing.T) {
	keys, _ := newKeys(t)
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var want []string
	for i := range 30 {
		at := base.Add(time.Duration(i) * time.Millisecond)
		keys.Now = func() time.Time { return at }
		k, _, err := keys.Create(bg, auth.NewAPIKeyInput{Name: fmt.Sprint(i), Scopes: []string{"llm"}})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, k.Name)
	}
	var got []string
	cursor := ""
	for {
		page, next, err := keys.List(bg, cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range page {
			if k.Hash != "" {
				t.Fatal("List returns hashes")
			}
			got = append(got, k.Name)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if !slices.Equal(got, want) {
		t.Errorf("listed %v, want creation order %v", got, want)
	}
	if n, err := keys.Count(bg); err != nil || n != 30 {
		t.Errorf("Count = %d, %v", n, err)
	}
}

type recorded struct {
	types []string
	data  []any
}

func (r *recorded) Record(_ store.Tx, typ string, data any) error {
	r.types = append(r.types, typ)
	r.data = append(r.data, data)
	return nil
}

func TestRevoke(t *testing.T) {
	keys, _ := newKeys(t)
	rec := &recorded{}
	keys.Events = rec
	now := time.Now().UTC()
	keys.Now = func() time.Time { return now }

	first, firstSecret, _ := keys.Create(bg, auth.NewAPIKeyInput{Name: "admin-1", Scopes: []string{auth.ScopeAdmin}})
	soon := now.Add(time.Minute)
	expiring, _, _ := keys.Create(bg, auth.NewAPIKeyInput{Name: "admin-expiring", Scopes: []string{auth.ScopeAdmin}, ExpiresAt: &soon})
	reader, readerSecret, _ := keys.Create(bg, auth.NewAPIKeyInput{Name: "reader", Scopes: []string{auth.ScopeConnectorsRead}})

	// Authenticated once, the key is cached; revoking must still stop it.
	if _, err := keys.Authenticate(bg, readerSecret); err != nil {
		t.Fatal(err)
	}
	if err := keys.Revoke(bg, reader.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Authenticate(bg, readerSecret); errs.KindOf(err) != errs.Unauthenticated {
		t.Errorf("revoked key authenticates: %v", err)
	}
	if _, err := keys.Get(bg, reader.ID); errs.KindOf(err) != errs.NotFound {
		t.Errorf("revoked key still readable: %v", err)
	}
	if err := keys.Revoke(bg, reader.ID); errs.KindOf(err) != errs.NotFound {
		t.Errorf("second revoke = %v, want 404", err)
	}

	// Once the other admin key has expired, the first is the last one.
	now = soon.Add(time.Second)
	if err := keys.Revoke(bg, first.ID); errs.KindOf(err) != errs.Conflict {
		t.Fatalf("revoking the last live admin key = %v, want 409", err)
	}
	if _, err := keys.Authenticate(bg, firstSecret); err != nil {
		t.Errorf("a refused revoke still revoked: %v", err)
	}
	// An expired admin key can always go.
	if err := keys.Revoke(bg, expiring.ID); err != nil {
		t.Errorf("revoking an expired admin key: %v", err)
	}

	wantEvents := []string{events.APIKeyCreated, events.APIKeyCreated, events.APIKeyCreated, events.APIKeyRevoked, events.APIKeyRevoked}
	if !slices.Equal(rec.types, wantEvents) {
		t.Errorf("events %v, want %v", rec.types, wantEvents)
	}
	for _, d := range rec.data {
		if k, ok := d.(auth.APIKey); !ok || k.Hash != "" {
			t.Errorf("event data %#v carries a hash", d)
		}
	}
}

// BenchmarkAuthenticate measures the per-request cost of checking an API key
// (SHA-256, index lookup and record decode in a bbolt read transaction).
func BenchmarkAuthenticate(b *testing.B) {
	keys, _ := newKeys(b)
	for i := range 200 {
		if _, _, err := keys.Create(bg, auth.NewAPIKeyInput{Name: fmt.Sprint(i), Scopes: []string{"llm"}}); err != nil {
			b.Fatal(err)
		}
	}
	_, secret, err := keys.Create(bg, auth.NewAPIKeyInput{Name: "bench", Scopes: []string{"llm", "invoke"}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := keys.Authenticate(bg, secret); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestRevokeWhileAuthenticating revokes a key while other goroutines keep
// authenticating with it: once Revoke has returned, no authentication that
// starts afterwards may succeed (the key cache must not keep a stale key).
func TestRevokeWhileAuthenticating(t *testing.T) {
	keys, _ := newKeys(t)
	if _, _, err := keys.Create(bg, auth.NewAPIKeyInput{Name: "admin", Scopes: []string{auth.ScopeAdmin}}); err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		key, secret, err := keys.Create(bg, auth.NewAPIKeyInput{Name: fmt.Sprint("k", round), Scopes: []string{auth.ScopeLLM}})
		if err != nil {
			t.Fatal(err)
		}
		var revoked atomic.Bool
		var wg sync.WaitGroup
		stale := make(chan error, 4)
		for range 4 {
			wg.Go(func() {
				for {
					after := revoked.Load()
					_, err := keys.Authenticate(bg, secret)
					if after {
						if err == nil {
							stale <- fmt.Errorf("round %d: revoked key authenticated", round)
						}
						return
					}
				}
			})
		}
		if err := keys.Revoke(bg, key.ID); err != nil {
			t.Fatal(err)
		}
		revoked.Store(true)
		wg.Wait()
		close(stale)
		for err := range stale {
			t.Error(err)
		}
	}
}
