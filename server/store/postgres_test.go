package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/pgtest"
)

// eventually polls cond every 5 ms for at most d.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}

func TestPostgres_ReplicasSeeEachOthersCommits(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a, b := openPostgres(t, url), openPostgres(t, url)
	var cache Cache[string, string]
	read := func() string {
		ch := b.Changes("apikeys")
		if v, ok := cache.Get("k", ch); ok {
			return v
		}
		var v string
		if err := b.View(bg, func(tx Tx) error { v = string(tx.Get("apikeys", "k")); return nil }); err != nil {
			t.Fatal(err)
		}
		cache.Put("k", v, ch)
		return v
	}
	put := func(v string) {
		if err := a.Update(bg, func(tx Tx) error { return tx.Put("apikeys", "k", []byte(v)) }); err != nil {
			t.Fatal(err)
		}
	}
	put("live")
	if !eventually(time.Second, func() bool { return read() == "live" }) {
		t.Fatal("replica b never saw the first write")
	}
	for i := range 3 {
		want := fmt.Sprintf("revoked-%d", i)
		put(want)
		start := time.Now()
		if !eventually(time.Second, func() bool { return read() == want }) {
			t.Fatalf("replica b's cache still answers %q a second after replica a wrote %q", read(), want)
		}
		t.Logf("replica b saw the write after %v", time.Since(start))
	}
}

func TestPostgres_LostListenerTurnsCachesOffUntilItIsBack(t *testing.T) {
	url := pgtest.NewDatabase(t)
	s := openPostgres(t, url)
	if !s.Listening() {
		t.Fatal("not listening after open")
	}
	c0 := s.Changes("connectors")
	if c1 := s.Changes("connectors"); c1 != c0 {
		t.Fatalf("Changes moved without a write: %d -> %d", c0, c1)
	}
	conn, err := pgx.Connect(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(bg)
	var killed int
	if err := conn.QueryRow(bg, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminate the listener: %d terminated, %v", killed, err)
	}
	if !eventually(5*time.Second, func() bool { return !s.Listening() }) {
		// It may already be back: then the epoch moved, which the next check shows.
		t.Log("listener reconnected before the test looked")
	}
	down := s.Changes("connectors")
	if down == c0 {
		t.Fatal("Changes did not move when the listener was lost")
	}
	if !eventually(10*time.Second, s.Listening) {
		t.Fatal("the listener did not come back")
	}
	up := s.Changes("connectors")
	if up <= c0 {
		t.Fatalf("Changes after the listener came back = %d, want more than %d (caches from before must not be trusted)", up, c0)
	}
	if again := s.Changes("connectors"); again != up {
		t.Fatalf("Changes keeps moving once the listener is back: %d -> %d", up, again)
	}
}

func TestPostgres_MigrationsRunOnceWhenReplicasStartTogether(t *testing.T) {
	url := pgtest.NewDatabase(t)
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			s, err := OpenPostgres(bg, url, PostgresOptions{})
			if err != nil {
				errc <- err
				return
			}
			_ = s.Close()
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(bg)
	var n int
	if err := conn.QueryRow(bg, "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil || n != len(sqlMigrations)-1 {
		t.Fatalf("schema_migrations has %d rows (%v), want %d", n, err, len(sqlMigrations)-1)
	}
	s := openPostgres(t, url)
	if err := s.View(bg, func(tx Tx) error {
		if v := string(tx.Get("meta", "schema_version")); v != fmt.Sprint(SchemaVersion()) {
			return fmt.Errorf("schema_version = %q, want %d", v, SchemaVersion())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	t.Run("NewerSchemaIsRefused", func(t *testing.T) {
		if _, err := conn.Exec(bg, "INSERT INTO schema_migrations (version) VALUES (999)"); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenPostgres(bg, url, PostgresOptions{}); !errors.Is(err, ErrSchemaTooNew) {
			t.Fatalf("open a database of a newer binary = %v, want ErrSchemaTooNew", err)
		}
	})
}

func TestPostgres_ScanPagesAndWritesBetweenPages(t *testing.T) {
	s := openPostgres(t, pgtest.NewDatabase(t))
	const n = 3*scanPage + 7
	if err := s.Update(bg, func(tx Tx) error {
		for i := range n {
			if err := tx.Put("events", fmt.Sprintf("e/%05d", i), []byte{byte(i)}); err != nil {
				return err
			}
		}
		// Keys just outside the prefix, and bytes above 0x7f in a key.
		_ = tx.Put("events", "e0", []byte("x"))
		return tx.Put("events", "e/\xff", []byte("high"))
	}); err != nil {
		t.Fatal(err)
	}
	t.Run("DeletesWhileScanning", func(t *testing.T) {
		seen := 0
		err := s.Update(bg, func(tx Tx) error {
			return tx.Scan("events", "e/", "", func(k string, _ []byte) (bool, error) {
				seen++
				return true, tx.Delete("events", k)
			})
		})
		if err != nil || seen != n+1 {
			t.Fatalf("scan and delete: saw %d keys, %v; want %d", seen, err, n+1)
		}
		_ = s.View(bg, func(tx Tx) error {
			left := 0
			_ = tx.Scan("events", "", "", func(string, []byte) (bool, error) { left++; return true, nil })
			if left != 1 {
				t.Errorf("%d keys left, want only e0", left)
			}
			return nil
		})
	})
}

func TestPostgres_RestartedServerIsUnavailableThenServesAgain(t *testing.T) {
	srv := pgtest.New(t)
	s := openPostgres(t, srv.NewDatabase(t))
	if err := s.Update(bg, func(tx Tx) error { return tx.Put("meta", "before", []byte("1")) }); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	err := s.Update(ctx, func(tx Tx) error { return tx.Put("meta", "during", []byte("1")) })
	if errs.KindOf(err) != errs.Unavailable {
		t.Fatalf("Update with the database down = %v (kind %s), want unavailable", err, errs.KindOf(err))
	}
	if err := s.Ping(ctx); errs.KindOf(err) != errs.Unavailable {
		t.Fatalf("Ping with the database down = %v, want unavailable", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if !eventually(10*time.Second, func() bool {
		return s.Update(bg, func(tx Tx) error { return tx.Put("meta", "after", []byte("1")) }) == nil
	}) {
		t.Fatal("no write succeeded after the database came back")
	}
	if !eventually(10*time.Second, s.Listening) {
		t.Fatal("the change listener did not come back")
	}
	_ = s.View(bg, func(tx Tx) error {
		for _, k := range []string{"before", "after"} {
			if tx.Get("meta", k) == nil {
				t.Errorf("meta/%s missing after the restart", k)
			}
		}
		if tx.Get("meta", "during") != nil {
			t.Error("a write refused while the database was down is there")
		}
		return nil
	})
}

func TestPostgres_ErrorsNeverShowThePassword(t *testing.T) {
	_, err := OpenPostgres(bg, "postgres://user:s3cr3t-pw@127.0.0.1:1/db?connect_timeout=1", PostgresOptions{})
	if err == nil || strings.Contains(err.Error(), "s3cr3t-pw") {
		t.Fatalf("open an unreachable database = %v; want an error without the password", err)
	}
	if got := RedactURL("postgres://u:pw@h/db?password=pw2"); strings.Contains(got, "pw@") || strings.Contains(got, "pw2") {
		t.Errorf("RedactURL = %s", got)
	}
}

// TestPostgres_ExclusiveAgainstServingReplicas: Exclusive (rotating the
// master key) is refused while a serving replica is open, naming how many;
// a replica does not open while it is held; and each goes through once
// the other has let go.
func TestPostgres_ExclusiveAgainstServingReplicas(t *testing.T) {
	url := pgtest.NewDatabase(t)
	quiet := slog.New(slog.DiscardHandler)
	serve := func() (*Postgres, error) {
		return OpenPostgres(bg, url, PostgresOptions{Logger: quiet, Serving: true})
	}
	cmd := openPostgres(t, url) // the command's own store does not count
	replicas := make([]*Postgres, 2)
	for i := range replicas {
		r, err := serve()
		if err != nil {
			t.Fatalf("replica %d: %v", i+1, err)
		}
		replicas[i] = r
	}
	if _, err := cmd.Exclusive(bg); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "2 replica(s)") {
		t.Fatalf("Exclusive while two replicas serve = %v, want ErrInUse naming 2 replicas", err)
	}
	for _, r := range replicas {
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	release, err := cmd.Exclusive(bg)
	if err != nil {
		t.Fatalf("Exclusive once the replicas are closed: %v", err)
	}
	if r, err := serve(); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "rotate-master-key") {
		if r != nil {
			_ = r.Close()
		}
		t.Fatalf("a replica opening during Exclusive = %v, want ErrInUse naming the command", err)
	}
	release()
	r, err := serve()
	if err != nil {
		t.Fatalf("a replica opening after the release: %v", err)
	}
	_ = r.Close()
}
