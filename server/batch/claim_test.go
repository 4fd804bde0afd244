package batch_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/batch"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store/storetest"
)

func TestClaim(t *testing.T) {
	ctx := context.Background()
	st := storetest.Shared(t)
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	old, young := batch.NewID(now.Add(-batch.ClaimTTL-time.Second)), batch.NewID(now.Add(-time.Minute))
	claim := func(id string) (fresh bool) {
		t.Helper()
		if err := st.Update(ctx, func(tx store.Tx) error {
			var err error
			fresh, err = batch.Claim(tx, id)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return fresh
	}

	t.Run("an id is fresh once, then claimed", func(t *testing.T) {
		if !claim(old) || !claim(young) {
			t.Fatal("a new id is not fresh")
		}
		if claim(old) || claim(young) {
			t.Fatal("a claimed id is fresh again")
		}
	})
	t.Run("pruning forgets the claims older than ClaimTTL only", func(t *testing.T) {
		if err := st.Update(ctx, func(tx store.Tx) error { return batch.PruneClaims(tx, now) }); err != nil {
			t.Fatal(err)
		}
		_ = st.View(ctx, func(tx store.Tx) error {
			if batch.Claimed(tx, old) || !batch.Claimed(tx, young) {
				t.Errorf("after pruning: old claimed %v, young claimed %v; want false, true", batch.Claimed(tx, old), batch.Claimed(tx, young))
			}
			return nil
		})
	})
}
