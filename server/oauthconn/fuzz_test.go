package oauthconn_test

import (
	"context"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/oauthconn"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/oauthconn/oauthtest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// FuzzCallback feeds arbitrary callback parameters to Complete: it never
// panics, never succeeds without a state it issued, answers a client error,
// and stores nothing.
func FuzzCallback(f *testing.F) {
	e := newEnv(f, oauthtest.Options{}, oauthconn.GrantAuthorizationCode)
	m := e.manager(oauthconn.Hooks{})
	f.Add("", "", "", "")
	f.Add("forged", "code", "", "")
	f.Add("s", "", "access_denied", "the user said no")
	f.Add("\x00\xff", "%zz", "invalid_scope", "<script>")
	f.Fuzz(func(t *testing.T, state, code, oerr, desc string) {
		_, err := m.Complete(context.Background(), oauthconn.CallbackInput{State: state, Code: code, Error: oerr, ErrorDescription: desc})
		if err == nil {
			t.Fatal("an unknown state completed an authorization")
		}
		if k := errs.KindOf(err); k != errs.Invalid {
			t.Fatalf("kind %s for an unknown state: %v", k, err)
		}
		_ = e.st.View(context.Background(), func(tx store.Tx) error {
			return tx.Scan(oauthconn.TokensBucket, "", "", func(k string, _ []byte) (bool, error) {
				t.Fatalf("a refused callback stored %s", k)
				return false, nil
			})
		})
	})
}

// BenchmarkTokenCached measures what an invocation pays for its OAuth
// token while the token is fresh: one read transaction, no decryption.
func BenchmarkTokenCached(b *testing.B) {
	e := newEnv(b, oauthtest.Options{}, oauthconn.GrantClientCredentials)
	m := e.manager(oauthconn.Hooks{})
	ctx := context.Background()
	if _, err := m.Token(ctx, "crm", "default"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := m.Token(ctx, "crm", "default"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
