package connectors_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store/storetest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// Replicas' invocation logs writing into one store keep every entry once:
// none lost, none doubled, also when a commit's answer is lost (the batch
// is written again) or the store runs a transaction function again.
func TestInvocationLogs_OnOneStoreKeepEveryEntryOnce(t *testing.T) {
	shared := storetest.Shared(t)
	v, _ := vault.New(vault.NewKey())
	svc := &connectors.Service{Store: shared, Vault: v}
	if _, err := svc.CreateConnector(ctx, connectors.Connector{Name: "a", BaseURL: "https://x.example", Auth: connectors.Auth{Type: connectors.AuthNone}}); err != nil {
		t.Fatal(err)
	}
	replicas := []store.Store{
		shared,
		storetest.LostCommits(shared, 2),
		storetest.LostCommits(storetest.Retried(shared), 3),
	}
	const workers, perWorker = 3, 100
	logs := make([]*connectors.InvocationLog, len(replicas))
	var wg sync.WaitGroup
	for i, st := range replicas {
		logs[i] = &connectors.InvocationLog{Store: st, Size: 1 << 20}
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := range perWorker {
					logs[i].Record(connectors.Invocation{Connector: "a", Action: "run", RequestID: fmt.Sprintf("r%d-w%d-%d", i, w, n)})
					if n%10 == 0 {
						_ = logs[i].Flush(ctx) // a lost answer is retried by a later flush
					}
				}
			}()
		}
	}
	wg.Wait()
	for i, l := range logs {
		var err error
		for range 5 {
			if err = l.Close(ctx); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	seen := map[string]int{}
	if err := shared.View(ctx, func(tx store.Tx) error {
		return tx.Scan(connectors.BucketInvocations, "a/", "", func(_ string, b []byte) (bool, error) {
			var inv connectors.Invocation
			if err := json.Unmarshal(b, &inv); err != nil {
				return false, err
			}
			seen[inv.RequestID]++
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if want := len(replicas) * workers * perWorker; len(seen) != want {
		t.Errorf("%d distinct entries stored, want %d", len(seen), want)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("entry %s stored %d times", id, n)
		}
	}
}
