package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/pgtest"
)

func TestNewDatabaseAcceptsQueries(t *testing.T) {
	url := pgtest.NewDatabase(t)
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT 40+2").Scan(&n); err != nil || n != 42 {
		t.Fatalf("SELECT 40+2 = %d, %v", n, err)
	}
}

func TestServerRestartsWithItsData(t *testing.T) {
	srv := pgtest.New(t)
	url := srv.NewDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(ctx, url); err == nil {
		t.Fatal("connected to a stopped server")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 7 {
		t.Fatalf("after restart: v = %d, %v", v, err)
	}
}
