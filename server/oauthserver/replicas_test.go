package oauthserver

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store/storetest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// openStore is the store the replicas of a test share (bbolt here; the
// one place to point these tests at PostgreSQL).
func openStore(t *testing.T) store.Store { return storetest.Shared(t) }

// startReplicas starts n Services on one store at once.
func startReplicas(t *testing.T, st store.Store, n int) []*Service {
	t.Helper()
	key := vault.NewKey()
	ss := make([]*Service, n)
	errList := make([]error, n)
	var wg sync.WaitGroup
	for i := range ss {
		wg.Go(func() {
			v, err := vault.New(key)
			if err != nil {
				errList[i] = err
				return
			}
			ss[i], errList[i] = New(bg, Options{Store: st, Vault: v, Config: config.Default()})
		})
	}
	wg.Wait()
	for _, err := range errList {
		if err != nil {
			t.Fatal(err)
		}
	}
	return ss
}

// kidOf returns the kid in a JWT's header.
func kidOf(t *testing.T, tok string) string {
	t.Helper()
	h, _, _ := strings.Cut(tok, ".")
	b, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	var hdr struct {
		KID string `json:"kid"`
	}
	if err := json.Unmarshal(b, &hdr); err != nil {
		t.Fatal(err)
	}
	return hdr.KID
}

func TestReplicas_StartingTogetherOnANewDatabaseMakeOneSigningKey(t *testing.T) {
	ss := startReplicas(t, openStore(t), 4)
	for i, s := range ss {
		ks := s.SigningKeys()
		if len(ks) != 1 || ks[0].KID != ss[0].SigningKeys()[0].KID {
			t.Fatalf("replica %d publishes keys %v; want the one key every replica has", i, kids(ks))
		}
	}
}

func TestReplicas_AKeyRotatedThroughOneReplicaSignsOnEvery(t *testing.T) {
	ss := startReplicas(t, openStore(t), 2)
	a, b := ss[0], ss[1]
	_, before := newClientAndToken(t, b, auth.ScopeLLM)
	nk, err := a.RotateSigningKey(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		s    *Service
	}{{"the rotating replica", a}, {"another replica", b}} {
		t.Run(tc.name+" signs with the new key and accepts tokens of the old one", func(t *testing.T) {
			_, tok := newClientAndToken(t, tc.s, auth.ScopeLLM)
			if kid := kidOf(t, tok); kid != nk.KID {
				t.Fatalf("token signed with %s, want the new active key %s", kid, nk.KID)
			}
			if ks := tc.s.SigningKeys(); len(ks) != 2 || ks[0].KID != nk.KID {
				t.Fatalf("published keys %v, want the new key %s first and the retired one", kids(ks), nk.KID)
			}
			for _, other := range ss {
				if _, err := other.Authenticate(bg, tok); err != nil {
					t.Fatalf("a token of the new key is refused: %v", err)
				}
				if _, err := other.Authenticate(bg, before); err != nil {
					t.Fatalf("a token of the retired key is refused: %v", err)
				}
			}
		})
	}
}

func kids(ks []SigningKey) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.KID
	}
	return out
}
