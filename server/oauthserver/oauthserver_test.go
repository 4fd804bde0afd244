package oauthserver

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

var bg = context.Background()

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// newService opens a real bbolt store and vault in a temp dir.
func newService(t testing.TB, mod func(*config.Config)) (*Service, *testClock, store.Store) {
	t.Helper()
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "test.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	v, err := vault.New(vault.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	if mod != nil {
		mod(&cfg)
	}
	clk := &testClock{t: time.Now()}
	s, err := New(bg, Options{Store: st, Vault: v, Config: cfg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s, clk, st
}

func newClientAndToken(t testing.TB, s *Service, scopes ...string) (Client, string) {
	t.Helper()
	c, secret, err := s.CreateClient(bg, NewClientInput{Name: "svc", Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.IssueToken(bg, TokenRequest{GrantType: GrantClientCredentials, ClientID: c.ID, ClientSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	return c, tok.AccessToken
}

func TestIssueAndAuthenticate(t *testing.T) {
	s, clk, _ := newService(t, nil)
	c, tok := newClientAndToken(t, s, auth.ScopeLLM, auth.ScopeInvoke)
	p, err := s.Authenticate(bg, tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != c.ID || p.Kind != auth.KindOAuthToken || p.Name != "svc" || strings.Join(p.Scopes, " ") != "llm invoke" {
		t.Errorf("principal = %+v", p)
	}
	// A cached principal is a copy: changing it does not leak into the cache.
	p.Scopes[0] = auth.ScopeAdmin
	p.ID = "changed"
	if p2, _ := s.Authenticate(bg, tok); p2.ID != c.ID {
		t.Errorf("cache shared a principal: %+v", p2)
	}
	// Expiry is enforced on the cached path too (15 min + 30 s leeway).
	clk.Add(15*time.Minute + 29*time.Second)
	if _, err := s.Authenticate(bg, tok); err != nil {
		t.Fatalf("within the leeway: %v", err)
	}
	clk.Add(2 * time.Second)
	if _, err := s.Authenticate(bg, tok); !errors.Is(err, errs.Unauthenticated) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("after expiry: %v", err)
	}
	if _, err := s.Authenticate(bg, "sb_notajwt"); err != auth.ErrNotMine {
		t.Errorf("API key shape = %v, want ErrNotMine", err)
	}
}

func TestKeysSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenBolt(filepath.Join(dir, "test.db"))
	if err != nil {
		t.Fatal(err)
	}
	mk := vault.NewKey()
	v, _ := vault.New(mk)
	s1, err := New(bg, Options{Store: st, Vault: v, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	_, tok := newClientAndToken(t, s1, auth.ScopeLLM)
	st.Close()

	st2, err := store.OpenBolt(filepath.Join(dir, "test.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	s2, err := New(bg, Options{Store: st2, Vault: v, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	if len(s2.SigningKeys()) != 1 || s2.SigningKeys()[0].KID != s1.SigningKeys()[0].KID {
		t.Fatalf("keys after restart = %+v, want the same single key", s2.SigningKeys())
	}
	if _, err := s2.Authenticate(bg, tok); err != nil {
		t.Fatalf("token after restart: %v", err)
	}
}

func TestClientCredentialsParsing(t *testing.T) {
	tests := []struct {
		name             string
		req              TokenRequest
		wantID, wantCode string
	}{
		{"basic", TokenRequest{Authorization: "Basic b2NfMTpzJTNBMQ=="}, "oc_1", ""}, // oc_1:s%3A1 → secret "s:1"
		{"basic lower-case scheme", TokenRequest{Authorization: "basic b2NfMTpzJTNBMQ=="}, "oc_1", ""},
		{"form", TokenRequest{ClientID: "oc_2", ClientSecret: "x"}, "oc_2", ""},
		{"basic and same form id", TokenRequest{Authorization: "Basic b2NfMTpzJTNBMQ==", ClientID: "oc_1"}, "oc_1", ""},
		{"basic and other form id", TokenRequest{Authorization: "Basic b2NfMTpzJTNBMQ==", ClientID: "oc_9"}, "", InvalidRequest},
		{"basic and form secret", TokenRequest{Authorization: "Basic b2NfMTpzJTNBMQ==", ClientSecret: "x"}, "", InvalidRequest},
		{"not base64", TokenRequest{Authorization: "Basic !!!"}, "", InvalidClient},
		{"no colon", TokenRequest{Authorization: "Basic b2NfMQ=="}, "", InvalidClient},
		{"bad escape", TokenRequest{Authorization: "Basic b2NfMTpzJVo="}, "", InvalidClient},
		{"form without secret", TokenRequest{ClientID: "oc_2"}, "", InvalidClient},
		{"nothing", TokenRequest{}, "", InvalidClient},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, secret, err := clientCredentials(tc.req)
			if tc.wantCode != "" {
				var e *errs.Error
				if !errors.As(err, &e) || ErrorCode(e) != tc.wantCode {
					t.Fatalf("err = %v, want %s", err, tc.wantCode)
				}
				return
			}
			if err != nil || id != tc.wantID {
				t.Fatalf("= %q %q %v, want id %q", id, secret, err, tc.wantID)
			}
			if tc.req.Authorization != "" && secret != "s:1" {
				t.Errorf("secret = %q, want the form-decoded s:1", secret)
			}
		})
	}
}

// FuzzAuthenticate: no input panics the verifier, and nothing but the
// issued token authenticates.
func FuzzAuthenticate(f *testing.F) {
	s, _, _ := newService(f, nil)
	_, tok := newClientAndToken(f, s, auth.ScopeLLM)
	parts := strings.Split(tok, ".")
	f.Add(tok)
	f.Add(parts[0] + "." + parts[1] + ".")
	f.Add(parts[0] + ".." + parts[2])
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Add("eyJ.e30.x")
	f.Add(strings.Repeat("eyJ.", 3))
	f.Fuzz(func(t *testing.T, cred string) {
		p, err := s.Authenticate(bg, cred)
		if cred == tok {
			if err != nil {
				t.Fatalf("the issued token is refused: %v", err)
			}
			return
		}
		if err == nil {
			t.Fatalf("%q authenticated as %+v", cred, p)
		}
	})
}

func BenchmarkAuthenticate(b *testing.B) {
	s, _, _ := newService(b, nil)
	_, tok := newClientAndToken(b, s, auth.ScopeLLM)
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Authenticate(bg, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Authenticate(bg, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("first use (signature verification)", func(b *testing.B) {
		for b.Loop() {
			s.cache.drop(tok)
			if _, err := s.Authenticate(bg, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkIssueToken(b *testing.B) {
	s, _, _ := newService(b, nil)
	c, secret, err := s.CreateClient(bg, NewClientInput{Name: "svc", Scopes: []string{auth.ScopeLLM}})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.IssueToken(bg, TokenRequest{GrantType: GrantClientCredentials, ClientID: c.ID, ClientSecret: secret}); err != nil {
			b.Fatal(err)
		}
	}
}

// Two services on one store stand for two replicas: what one changes, the
// other sees at its next request, though it verified and cached the token.
func TestReplicasSeeClientChanges(t *testing.T) {
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "test.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	v, err := vault.New(vault.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	replica := func() *Service {
		s, err := New(bg, Options{Store: st, Vault: v, Config: config.Default()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := replica(), replica()
	c, tok := newClientAndToken(t, a, auth.ScopeLLM)
	if p, err := b.Authenticate(bg, tok); err != nil || p.RateLimit != nil {
		t.Fatalf("replica b: %+v, %v", p, err)
	}

	t.Run("PolicyChangedThroughTheOtherReplica", func(t *testing.T) {
		if _, err := a.UpdateClient(bg, c.ID, 0, UpdateClientInput{Name: "svc", Policy: auth.Policy{RateLimit: &auth.RateLimit{RequestsPerMinute: 7}}}); err != nil {
			t.Fatal(err)
		}
		p, err := b.Authenticate(bg, tok)
		if err != nil || p.RateLimit == nil || p.RateLimit.RequestsPerMinute != 7 {
			t.Fatalf("replica b after the update: %+v, %v; want the new rate limit", p, err)
		}
	})
	t.Run("ClientDeletedThroughTheOtherReplica", func(t *testing.T) {
		if err := a.DeleteClient(bg, c.ID); err != nil {
			t.Fatal(err)
		}
		if p, err := b.Authenticate(bg, tok); err == nil {
			t.Fatalf("replica b accepts a token of a deleted client: %+v", p)
		}
	})
}
