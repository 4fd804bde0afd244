package redistest_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/redistest"
)

func TestServerStopsAndStartsOnItsPort(t *testing.T) {
	srv := redistest.New(t)
	opt, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered by a stopped server")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after restart: %v", err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != redis.Nil {
		t.Fatalf("GET k after restart = %q, %v; want nothing (no persistence)", v, err)
	}
}
