package usage_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store/storetest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/usage"
)

// Replicas' Recorders flushing into one store add up: no increment lost,
// none counted twice, also when a commit's outcome is unknown (the flush
// is retried) and when the store runs a transaction function again.
func TestRecorders_OnOneStoreAddUp(t *testing.T) {
	tests := []struct {
		name string
		// replicas wraps the shared store once per replica.
		replicas []func(store.Store) store.Store
	}{
		{name: "two replicas", replicas: []func(store.Store) store.Store{plain, plain}},
		{name: "three replicas, two of which lose the answer to some commits", replicas: []func(store.Store) store.Store{
			plain, lost(2), lost(3)}},
		{name: "three replicas whose transactions run twice", replicas: []func(store.Store) store.Store{
			storetest.Retried, storetest.Retried, func(s store.Store) store.Store { return storetest.LostCommits(storetest.Retried(s), 2) }}},
	}
	const workers, perWorker = 4, 150
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shared := storetest.Shared(t)
			var wg sync.WaitGroup
			recs := make([]*usage.Recorder, len(tt.replicas))
			for i, wrap := range tt.replicas {
				recs[i] = usage.New(wrap(shared), usage.Options{FlushInterval: time.Hour})
				for w := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for n := range perWorker {
							recs[i].Record(fmt.Sprintf("key_%d", n%3), "local/m", 3, 2, 0.001)
							if w == 0 && n%10 == 0 {
								_ = recs[i].Flush(ctx) // a lost answer is retried by a later flush
							}
						}
					}()
				}
			}
			wg.Wait()
			for i, r := range recs {
				var err error
				for range 5 {
					if err = r.Close(ctx); err == nil {
						break
					}
				}
				if err != nil {
					t.Fatalf("replica %d: %v", i, err)
				}
			}
			reader := usage.New(shared, usage.Options{FlushInterval: time.Hour})
			defer reader.Close(ctx)
			rows, err := reader.Query(ctx, usage.Query{})
			if err != nil {
				t.Fatal(err)
			}
			n := int64(len(tt.replicas) * workers * perWorker)
			got := rows[0]
			if got.Requests != n || got.PromptTokens != 3*n || got.CompletionTokens != 2*n || math.Abs(got.CostUSD-float64(n)*0.001) > 1e-9 {
				t.Errorf("stored totals %+v, want %d requests, %d prompt and %d completion tokens, $%.3f", got, n, 3*n, 2*n, float64(n)*0.001)
			}
		})
	}
}

func plain(s store.Store) store.Store { return s }

func lost(n int) func(store.Store) store.Store {
	return func(s store.Store) store.Store { return storetest.LostCommits(s, n) }
}

// A flush whose commit outcome was unknown is neither lost nor counted
// twice by Query while it waits to be written again.
func TestQuery_CountsAFlushInDoubtOnce(t *testing.T) {
	ctx := context.Background()
	shared := storetest.Shared(t)
	r := usage.New(storetest.LostCommits(shared, 1), usage.Options{FlushInterval: time.Hour})
	r.Record("key_1", "local/m", 10, 5, 0)
	if err := r.Flush(ctx); err == nil {
		t.Fatal("the flush's lost answer was not reported")
	}
	rows, err := r.Query(ctx, usage.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].Requests != 1 || rows[0].PromptTokens != 10 {
		t.Errorf("Query after a flush in doubt: %+v, want 1 request, 10 prompt tokens", rows[0])
	}
}
