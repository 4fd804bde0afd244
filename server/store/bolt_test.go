package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

var bg = context.Background()

func openTemp(t *testing.T) (*Bolt, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "switchboard.db")
	s, err := OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func TestConcurrentWritersLoseNoUpdate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s Store) {
		const writers, perWriter = 12, 20
		var wg sync.WaitGroup
		errc := make(chan error, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perWriter {
					// Read-modify-write of one shared counter, plus one record of
					// this writer's own, in one transaction.
					err := s.Update(bg, func(tx Tx) error {
						n := 0
						if b := tx.Get("meta", "counter"); b != nil {
							var err error
							if n, err = strconv.Atoi(string(b)); err != nil {
								return err
							}
						}
						if err := tx.Put("meta", "counter", []byte(strconv.Itoa(n+1))); err != nil {
							return err
						}
						return PutJSON(tx, "events", fmt.Sprintf("w%02d-%03d", w, i), map[string]int{"writer": w, "i": i})
					})
					if err != nil {
						errc <- err
						return
					}
				}
			}()
		}
		// Readers run alongside and always see a consistent counter.
		stop := make(chan struct{})
		var readers sync.WaitGroup
		for range 4 {
			readers.Add(1)
			go func() {
				defer readers.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(200 * time.Microsecond):
					}
					err := s.View(bg, func(tx Tx) error {
						n := 0
						if b := tx.Get("meta", "counter"); b != nil {
							n, _ = strconv.Atoi(string(b))
						}
						rows := 0
						_ = tx.Scan("events", "w", "", func(string, []byte) (bool, error) { rows++; return true, nil })
						if rows != n {
							return fmt.Errorf("a reader saw counter %d but %d rows", n, rows)
						}
						return nil
					})
					if err != nil {
						errc <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(stop)
		readers.Wait()
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}
		var counter, rows int
		if err := s.View(bg, func(tx Tx) error {
			counter, _ = strconv.Atoi(string(tx.Get("meta", "counter")))
			return tx.Scan("events", "w", "", func(string, []byte) (bool, error) { rows++; return true, nil })
		}); err != nil {
			t.Fatal(err)
		}
		if counter != writers*perWriter || rows != writers*perWriter {
			t.Fatalf("counter = %d, rows = %d, want %d each (lost updates)", counter, rows, writers*perWriter)
		}
	})
}

func TestUpdateRollsBackOnError(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s Store) {
		committed := false
		boom := errors.New("boom")
		err := s.Update(bg, func(tx Tx) error {
			tx.OnCommit(func() { committed = true })
			if err := tx.Put("meta", "half", []byte("written")); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Update = %v, want boom", err)
		}
		if committed {
			t.Error("OnCommit ran for a rolled-back transaction")
		}
		_ = s.View(bg, func(tx Tx) error {
			if tx.Get("meta", "half") != nil {
				t.Error("a failed transaction left its write behind")
			}
			if tx.Writable() {
				t.Error("View transaction is writable")
			}
			return nil
		})
		if err := s.Update(bg, func(tx Tx) error {
			tx.OnCommit(func() { committed = true })
			return tx.Put("meta", "whole", []byte("x"))
		}); err != nil || !committed {
			t.Fatalf("commit: err %v, OnCommit ran %v", err, committed)
		}
	})
}

func TestCancelledContext(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s Store) {
		ctx, cancel := context.WithCancel(bg)
		cancel()
		ran := false
		if err := s.Update(ctx, func(Tx) error { ran = true; return nil }); !errors.Is(err, context.Canceled) || ran {
			t.Errorf("Update with a cancelled context = %v (ran %v)", err, ran)
		}
		if err := s.View(ctx, func(Tx) error { ran = true; return nil }); !errors.Is(err, context.Canceled) || ran {
			t.Errorf("View with a cancelled context = %v (ran %v)", err, ran)
		}
	})
}

type item struct {
	N int `json:"n"`
}

func TestPage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s Store) {
		if err := s.Update(bg, func(tx Tx) error {
			for i := range 7 {
				if err := PutJSON(tx, "actions", fmt.Sprintf("gh/%02d", i), item{i}); err != nil {
					return err
				}
			}
			// Neighbours outside the prefix must never leak into a page.
			if err := PutJSON(tx, "actions", "gg/00", item{-1}); err != nil {
				return err
			}
			return PutJSON(tx, "actions", "gi/00", item{-2})
		}); err != nil {
			t.Fatal(err)
		}
		page := func(prefix, cursor string, limit int) ([]int, string) {
			t.Helper()
			var (
				items []item
				next  string
			)
			if err := s.View(bg, func(tx Tx) error {
				var err error
				items, next, err = Page[item](tx, "actions", prefix, cursor, limit)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			var ns []int
			for _, it := range items {
				ns = append(ns, it.N)
			}
			return ns, next
		}
		cases := []struct {
			name, prefix, cursor string
			limit                int
			want                 string
			wantNext             string
		}{
			{"first page", "gh/", "", 3, "[0 1 2]", "gh/02"},
			{"middle page", "gh/", "gh/02", 3, "[3 4 5]", "gh/05"},
			{"last page has no cursor", "gh/", "gh/05", 3, "[6]", ""},
			{"exact fit has no cursor", "gh/", "gh/03", 3, "[4 5 6]", ""},
			{"all at once", "gh/", "", 100, "[0 1 2 3 4 5 6]", ""},
			{"cursor past the end", "gh/", "gh/99", 3, "[]", ""},
			{"cursor before the prefix", "gh/", "ga", 2, "[0 1]", "gh/01"},
			{"cursor of a deleted key", "gh/", "gh/015", 2, "[2 3]", "gh/03"},
			{"limit below 1 means 1", "gh/", "", 0, "[0]", "gh/00"},
			{"empty prefix spans the bucket", "", "", 2, "[-1 0]", "gh/00"},
			{"unknown prefix", "zz/", "", 5, "[]", ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				got, next := page(tc.prefix, tc.cursor, tc.limit)
				if fmt.Sprint(got) != tc.want && !(tc.want == "[]" && got == nil) || next != tc.wantNext {
					t.Errorf("Page(%q, %q, %d) = %v next %q, want %s next %q", tc.prefix, tc.cursor, tc.limit, got, next, tc.want, tc.wantNext)
				}
			})
		}
	})
}

func TestGetJSONNotFound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s Store) {
		_ = s.View(bg, func(tx Tx) error {
			var v item
			if err := GetJSON(tx, "connectors", "nope", &v); !errors.Is(err, errs.NotFound) {
				t.Errorf("GetJSON of a missing key = %v, want errs.NotFound", err)
			}
			return nil
		})
	})
}

func TestSecondOpenFailsFastWithErrInUse(t *testing.T) {
	_, path := openTemp(t)
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		s2, err := OpenBolt(path)
		if err == nil {
			s2.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrInUse) {
			t.Fatalf("second OpenBolt = %v, want ErrInUse", err)
		}
		if !strings.Contains(err.Error(), "database is in use by another process") {
			t.Errorf("message %q", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second OpenBolt hangs")
	}
	t.Logf("second open refused after %v", time.Since(start))
}

func TestReopenAfterClose(t *testing.T) {
	s, path := openTemp(t)
	if err := s.Update(bg, func(tx Tx) error { return tx.Put("meta", "kept", []byte("yes")) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(bg); err == nil {
		t.Error("Ping on a closed store succeeded")
	}
	s2, err := OpenBolt(path)
	if err != nil {
		t.Fatalf("reopen after close: %v", err)
	}
	defer s2.Close()
	if err := s2.Ping(bg); err != nil {
		t.Fatal(err)
	}
	_ = s2.View(bg, func(tx Tx) error {
		if string(tx.Get("meta", "kept")) != "yes" {
			t.Error("data lost across reopen")
		}
		return nil
	})
}

func TestMigrations(t *testing.T) {
	t.Run("schema version written at open", func(t *testing.T) {
		s, _ := openTemp(t)
		_ = s.View(bg, func(tx Tx) error {
			if got := string(tx.Get("meta", "schema_version")); got != strconv.Itoa(SchemaVersion()) {
				t.Errorf("schema_version = %q, want %d", got, SchemaVersion())
			}
			return nil
		})
	})

	t.Run("pending migrations applied once, in order", func(t *testing.T) {
		s, path := openTemp(t)
		if err := s.Update(bg, func(tx Tx) error { return tx.Put("connectors", "a", []byte(`{"old":true}`)) }); err != nil {
			t.Fatal(err)
		}
		s.Close()

		saved := Migrations
		t.Cleanup(func() { Migrations = saved })
		var applied []int
		Migrations = append(append([]Migration{}, saved...),
			Migration{To: len(saved) + 1, Name: "rewrite connectors", Apply: func(tx Tx) error {
				applied = append(applied, len(saved)+1)
				return tx.Put("connectors", "a", []byte(`{"new":true}`))
			}},
			Migration{To: len(saved) + 2, Name: "add marker", Apply: func(tx Tx) error {
				applied = append(applied, len(saved)+2)
				return tx.Put("meta", "marker", []byte("x"))
			}},
		)
		s2, err := OpenBolt(path)
		if err != nil {
			t.Fatal(err)
		}
		_ = s2.View(bg, func(tx Tx) error {
			if string(tx.Get("connectors", "a")) != `{"new":true}` || tx.Get("meta", "marker") == nil {
				t.Error("migrations not applied")
			}
			if got := string(tx.Get("meta", "schema_version")); got != strconv.Itoa(len(saved)+2) {
				t.Errorf("schema_version = %s, want %d", got, len(saved)+2)
			}
			return nil
		})
		s2.Close()
		if fmt.Sprint(applied) != fmt.Sprint([]int{len(saved) + 1, len(saved) + 2}) {
			t.Errorf("applied %v", applied)
		}
		// Opening again applies nothing.
		s3, err := OpenBolt(path)
		if err != nil {
			t.Fatal(err)
		}
		s3.Close()
		if len(applied) != 2 {
			t.Errorf("migrations re-applied: %v", applied)
		}
	})

	t.Run("a failing migration leaves the old version", func(t *testing.T) {
		s, path := openTemp(t)
		s.Close()
		saved := Migrations
		t.Cleanup(func() { Migrations = saved })
		Migrations = append(append([]Migration{}, saved...), Migration{To: len(saved) + 1, Name: "broken", Apply: func(tx Tx) error {
			_ = tx.Put("meta", "partial", []byte("x"))
			return errors.New("cannot convert")
		}})
		if _, err := OpenBolt(path); err == nil || !strings.Contains(err.Error(), "broken") || !strings.Contains(err.Error(), "cannot convert") {
			t.Fatalf("open with a failing migration = %v", err)
		}
		Migrations = saved
		s2, err := OpenBolt(path)
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		_ = s2.View(bg, func(tx Tx) error {
			if tx.Get("meta", "partial") != nil {
				t.Error("a failed migration left a partial write")
			}
			if got := string(tx.Get("meta", "schema_version")); got != strconv.Itoa(SchemaVersion()) {
				t.Errorf("schema_version = %s", got)
			}
			return nil
		})
	})

	t.Run("newer schema refused", func(t *testing.T) {
		s, path := openTemp(t)
		s.Close()
		// Simulate a newer binary having written the file.
		db := mustRaw(t, path)
		if err := db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("meta")).Put([]byte("schema_version"), []byte(strconv.Itoa(SchemaVersion()+1)))
		}); err != nil {
			t.Fatal(err)
		}
		db.Close()
		_, err := OpenBolt(path)
		if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), strconv.Itoa(SchemaVersion()+1)) {
			t.Fatalf("open of a newer schema = %v, want ErrSchemaTooNew naming the version", err)
		}
		// And the file was not touched.
		db = mustRaw(t, path)
		defer db.Close()
		_ = db.View(func(tx *bolt.Tx) error {
			if got := string(tx.Bucket([]byte("meta")).Get([]byte("schema_version"))); got != strconv.Itoa(SchemaVersion()+1) {
				t.Errorf("schema_version rewritten to %s", got)
			}
			return nil
		})
	})
}

// mustRaw opens path with bbolt directly (the store must be closed).
func mustRaw(t *testing.T, path string) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("raw open: %v", err)
	}
	return db
}

func TestChanges(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s Store) {
		write := func(fn func(Tx) error) error { return s.Update(bg, fn) }
		for _, tc := range []struct {
			name              string
			do                func() error
			connectors, other uint64 // expected change of Changes("connectors") and Changes("actions", "secrets")
		}{
			{"put counts once per transaction", func() error {
				return write(func(tx Tx) error {
					_ = tx.Put("connectors", "a", []byte("1"))
					return tx.Put("connectors", "b", []byte("2"))
				})
			}, 1, 0},
			{"delete counts", func() error { return write(func(tx Tx) error { return tx.Delete("connectors", "a") }) }, 1, 0},
			{"two buckets in one transaction", func() error {
				return write(func(tx Tx) error {
					_ = tx.Put("actions", "x", []byte("1"))
					return tx.Put("secrets", "y", []byte("1"))
				})
			}, 0, 2},
			{"sequence counts", func() error {
				return write(func(tx Tx) error { _, err := tx.NextSequence("actions"); return err })
			}, 0, 1},
			{"rolled back: no change", func() error {
				err := write(func(tx Tx) error {
					_ = tx.Put("connectors", "c", []byte("1"))
					return errors.New("abort")
				})
				if err == nil {
					return errors.New("abort not returned")
				}
				return nil
			}, 0, 0},
			{"reads: no change", func() error {
				return s.View(bg, func(tx Tx) error { tx.Get("connectors", "b"); return nil })
			}, 0, 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c0, o0 := s.Changes("connectors"), s.Changes("actions", "secrets")
				if err := tc.do(); err != nil {
					t.Fatal(err)
				}
				if d := s.Changes("connectors") - c0; d != tc.connectors {
					t.Errorf("connectors changed by %d, want %d", d, tc.connectors)
				}
				if d := s.Changes("actions", "secrets") - o0; d != tc.other {
					t.Errorf("actions+secrets changed by %d, want %d", d, tc.other)
				}
			})
		}
	})
}
