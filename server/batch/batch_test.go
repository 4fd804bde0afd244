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
