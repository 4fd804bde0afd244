package server_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/lease"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store/storetest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/webhooks/webhooktest"
)

// leasesOf returns the names of the leases owner holds.
func leasesOf(t *testing.T, st store.Store, owner string) []string {
	t.Helper()
	var names []string
	if err := st.View(context.Background(), func(tx store.Tx) error {
		return tx.Scan(lease.Bucket, "", "", func(k string, v []byte) (bool, error) {
			var r struct{ Owner string }
			if err := json.Unmarshal(v, &r); err != nil {
				return false, err
			}
			if r.Owner == owner {
				names = append(names, k)
			}
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return names
}

// Two replicas on one store: the pruning job runs on one of them; when
// that one closes, it leaves no lease behind, so the other takes its
// background work over at once instead of after the leases' expiry.
func TestReplicas_CloseReleasesTheReplicasLeases(t *testing.T) {
	ctx := context.Background()
	st := storetest.Shared(t)
	key := vault.NewKey()
	var srvs []*server.Server
	for range 2 {
		v, err := vault.New(key)
		if err != nil {
			t.Fatal(err)
		}
		cfg := config.Default()
		cfg.DataDir = t.TempDir()
		srv, err := server.New(server.Options{Config: cfg, Store: st, Vault: v})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close(ctx) })
		srvs = append(srvs, srv)
	}
	if srvs[0].Leases().Owner() == srvs[1].Leases().Owner() {
		t.Fatal("two replicas share a lease owner id")
	}
	var holder *server.Server
	webhooktest.WaitFor(t, "a replica holding the webhook pruning lease", 30*time.Second, func() bool {
		for _, s := range srvs {
			if len(leasesOf(t, st, s.Leases().Owner())) > 0 {
				holder = s
				return true
			}
		}
		return false
	})
	if _, err := holder.Leases().Acquire(ctx, "test/job", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := holder.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if names := leasesOf(t, st, holder.Leases().Owner()); len(names) != 0 {
		t.Fatalf("a closed replica still holds leases %v", names)
	}
	for _, s := range srvs {
		if s != holder {
			if ok, err := s.Leases().Acquire(ctx, "test/job", time.Hour); err != nil || !ok {
				t.Fatalf("the other replica cannot take the closed one's lease: %v, %v", ok, err)
			}
		}
	}
}
