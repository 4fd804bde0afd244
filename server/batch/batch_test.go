package batch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/batch"
)

func TestBuffer(t *testing.T) {
	ctx := context.Background()

	t.Run("a flush writes, in order, also an empty batch", func(t *testing.T) {
		var got [][]int
		b := &batch.Buffer[int]{Write: func(_ context.Context, _ string, items []int) error { got = append(got, items); return nil }}
		if err := b.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		b.Add(1)
		b.Add(2)
		if err := b.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || len(got[0]) != 0 || len(got[1]) != 2 || got[1][0] != 1 || got[1][1] != 2 {
			t.Fatalf("writes %v, want [[] [1 2]]", got)
		}
	})

	t.Run("a failed write keeps the batch before what came since", func(t *testing.T) {
		fail := true
		var got []int
		b := &batch.Buffer[int]{Write: func(_ context.Context, _ string, items []int) error {
			if fail {
				return errors.New("disk full")
			}
			got = append(got, items...)
			return nil
		}}
		b.Add(1)
		if err := b.Flush(ctx); err == nil {
			t.Fatal("flush succeeded with a failing writer")
		}
		b.Add(2)
		fail = false
		if err := b.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0] != 1 || got[1] != 2 {
			t.Fatalf("wrote %v, want [1 2]", got)
		}
	})

	t.Run("a failed batch is written again under its id, before and apart from what came since", func(t *testing.T) {
		type call struct {
			id    string
			items []int
		}
		fail := true
		var calls []call
		b := &batch.Buffer[int]{Write: func(_ context.Context, id string, items []int) error {
			calls = append(calls, call{id, items})
			if fail {
				return errors.New("connection lost during commit")
			}
			return nil
		}}
		b.Add(1)
		_ = b.Flush(ctx)
		b.Add(2)
		fail = false
		if err := b.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if len(calls) != 4 || calls[0].id == "" || calls[1].id != calls[0].id || calls[2].id == calls[1].id || calls[2].id == "" ||
			len(calls[1].items) != 1 || calls[1].items[0] != 1 || len(calls[2].items) != 1 || calls[2].items[0] != 2 || calls[3].id != "" {
			t.Fatalf("writes %+v, want [1] as id A, [1] as id A, [2] as id B, then an empty one", calls)
		}
	})

	t.Run("past MaxPending the oldest items are dropped, failed batches first", func(t *testing.T) {
		fail := true
		var got []int
		b := &batch.Buffer[int]{MaxPending: 3, Write: func(_ context.Context, _ string, items []int) error {
			if fail {
				return errors.New("store down")
			}
			got = append(got, items...)
			return nil
		}}
		b.Add(1)
		b.Add(2)
		_ = b.Flush(ctx)
		b.Add(3)
		b.Add(4)
		fail = false
		if err := b.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0] != 2 || got[1] != 3 || got[2] != 4 {
			t.Fatalf("wrote %v, want [2 3 4]", got)
		}
	})

	t.Run("Size waiting items are written before the interval ends", func(t *testing.T) {
		wrote := make(chan int, 1)
		b := &batch.Buffer[int]{Interval: time.Hour, Write: func(_ context.Context, _ string, items []int) error {
			if len(items) > 0 {
				wrote <- len(items)
			}
			return nil
		}}
		b.Start()
		defer b.Close(ctx)
		for i := range batch.Size {
			b.Add(i)
		}
		select {
		case n := <-wrote:
			if n != batch.Size {
				t.Fatalf("wrote %d items, want %d", n, batch.Size)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a full batch was not written before the hour-long interval")
		}
	})
}
