package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// PostgresOptions tune OpenPostgres; the zero value is ready to use.
type PostgresOptions struct {
	// Logger receives listener and migration messages (slog.Default when nil).
	Logger *slog.Logger
	// MaxConns bounds the connection pool (pgxpool's default when 0:
	// max(4, GOMAXPROCS); a pool_max_conns in the URL wins).
	MaxConns int32
	// Owner identifies this process in change notifications (random when
	// empty), so that it does not count its own commits twice.
	Owner string
	// Serving marks a replica (switchboard serve): while its change
	// listener is connected it holds the serving lock shared, so that a
	// command that needs the database to itself (Exclusive) refuses to
	// run, and it does not open while such a command runs.
	Serving bool
}

// Postgres is the PostgreSQL backend: the key-value contract of Store over
// one table, with SERIALIZABLE transactions retried on conflict, and
// LISTEN/NOTIFY so that Changes counts the commits of every replica.
type Postgres struct {
	pool    *pgxpool.Pool
	log     *slog.Logger
	owner   string
	serving bool

	// changes counts, per bucket, the commits that wrote to it (this
	// process's at commit, other replicas' when notified); epoch grows
	// while the listener is down and once when it is back, so that no
	// cache is trusted across a gap in notifications.
	changes   map[string]*atomic.Uint64
	epoch     atomic.Uint64
	listening atomic.Bool

	stop     context.CancelFunc
	listener sync.WaitGroup
}

var _ Store = (*Postgres)(nil)

// notifyChannel is the LISTEN/NOTIFY channel of committed writes. A
// payload is "<owner> <bucket> <bucket>...".
const notifyChannel = "switchboard_changes"

// maxAttempts bounds the runs of an Update's function on serialization
// failures and deadlocks.
const maxAttempts = 30

// scanPage is the number of rows Scan reads per query.
const scanPage = 256

// OpenPostgres connects to the database at url, creates or upgrades its
// schema under an advisory lock (replicas starting together take turns),
// runs the data migrations and starts listening for other replicas'
// commits. The URL's password never appears in an error.
func OpenPostgres(ctx context.Context, rawURL string, o PostgresOptions) (*Postgres, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Owner == "" {
		o.Owner = fmt.Sprintf("%016x", rand.Uint64())
	}
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("database.url: not a valid PostgreSQL URL (%s)", RedactURL(rawURL))
	}
	if o.MaxConns > 0 && !strings.Contains(rawURL, "pool_max_conns") {
		cfg.MaxConns = o.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL at %s: %w", RedactURL(rawURL), err)
	}
	s := &Postgres{pool: pool, log: o.Logger, owner: o.Owner, serving: o.Serving, changes: make(map[string]*atomic.Uint64, len(Buckets))}
	for _, b := range Buckets {
		s.changes[b] = new(atomic.Uint64)
	}
	if err := s.migrateSchema(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	lctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	ready := make(chan error, 1)
	s.listener.Add(1)
	go s.listen(lctx, ready)
	select {
	case err := <-ready:
		if err != nil {
			s.Close()
			return nil, err
		}
	case <-time.After(10 * time.Second):
		s.log.Warn("store: not listening for other replicas' changes yet; caches stay off until it is")
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	}
	return s, nil
}

// RedactURL returns a database or Redis URL without its password, for
// messages and logs.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	q := u.Query()
	for k := range q {
		if strings.EqualFold(k, "password") {
			q.Set(k, "xxxxx")
			u.RawQuery = q.Encode()
		}
	}
	return u.Redacted()
}

// sqlMigrations create the tables; each runs once, in order, recorded in
// schema_migrations. The data migrations of Migrations run on top.
var sqlMigrations = []string{
	1: `CREATE TABLE kv (
		bucket text NOT NULL,
		key bytea NOT NULL,
		value bytea NOT NULL,
		PRIMARY KEY (bucket, key)
	);`,
}

// sequenceName is the PostgreSQL sequence behind a bucket's NextSequence.
// Sequences are not transactional: a number is never handed out twice,
// even by transactions that roll back, and they never make writers wait
// for one another (a counter row would serialize every event written by
// every replica). So numbers grow with each call, with gaps, and two
// transactions may commit in the other order than their numbers.
func sequenceName(bucket string) string { return "seq_" + bucket }

// schemaLock is the advisory lock key that serializes schema changes.
const schemaLock = 0x5357_4254_4348 // "SWBTCH"

// servingLock is the advisory lock key that replicas hold shared while
// they serve, and Exclusive holds alone.
const servingLock = 0x5357_4254_5356 // "SWBTSV"

// migrateSchema applies pending SQL migrations, then the data migrations,
// holding the schema advisory lock.
func (s *Postgres) migrateSchema(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", schemaLock); err != nil {
		return fmt.Errorf("take the schema lock: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", schemaLock) }()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version int PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var cur int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&cur); err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	last := len(sqlMigrations) - 1
	if cur > last {
		return fmt.Errorf("%w: the database has table schema version %d, this binary supports up to %d; run a newer switchboard", ErrSchemaTooNew, cur, last)
	}
	for v := cur + 1; v <= last; v++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, sqlMigrations[v]); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", v)
			return err
		})
		if err != nil {
			return fmt.Errorf("table schema migration %d: %w", v, err)
		}
		s.log.Info("applied table schema migration", "version", v)
	}
	for _, b := range Buckets {
		if _, err := conn.Exec(ctx, "CREATE SEQUENCE IF NOT EXISTS "+pgx.Identifier{sequenceName(b)}.Sanitize()); err != nil {
			return fmt.Errorf("create the sequence of bucket %s: %w", b, err)
		}
	}
	return Migrate(ctx, s)
}

// listen keeps a connection LISTENing for other replicas' commits, and
// reconnects with backoff when it is lost. ready receives nil once it
// first listens, or ErrInUse when, before that, a serving replica finds a
// command holding the database.
func (s *Postgres) listen(ctx context.Context, ready chan<- error) {
	defer s.listener.Done()
	var once sync.Once
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, func() {
			once.Do(func() { ready <- nil })
			backoff = 50 * time.Millisecond
		})
		if s.listening.Swap(false) {
			s.epoch.Add(1)
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, ErrInUse) {
			once.Do(func() { ready <- err }) // OpenPostgres fails and stops this
		}
		s.log.Warn("store: lost the PostgreSQL change listener; caches are off until it is back", "error", err.Error(), "retryIn", backoff.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// listenOnce listens on one connection until it fails.
func (s *Postgres) listenOnce(ctx context.Context, up func()) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection is LISTENing: never give it back to the pool.
	pc := conn.Hijack()
	defer pc.Close(context.Background())
	if _, err := pc.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	if s.serving {
		// Held as long as this connection lives: a connection lost lets
		// the lock go with it, and the next one takes it again.
		var ok bool
		if err := pc.QueryRow(ctx, "SELECT pg_try_advisory_lock_shared($1)", servingLock).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: a command that needs the database to itself (switchboard rotate-master-key) is running; start this replica when it has finished", ErrInUse)
		}
	}
	// Commits made while no one listened were missed: start a new epoch.
	s.epoch.Add(1)
	s.listening.Store(true)
	up()
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		owner, buckets, _ := strings.Cut(n.Payload, " ")
		if owner == s.owner {
			continue // counted at commit
		}
		for _, b := range strings.Fields(buckets) {
			if c, ok := s.changes[b]; ok {
				c.Add(1)
			}
		}
	}
}

// View implements Store: a read-only snapshot.
func (s *Postgres) View(ctx context.Context, fn func(Tx) error) error {
	var err error
	for attempt := range 3 {
		err = s.run(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn, nil)
		// A read is safe to repeat when the connection failed.
		if !retryableRead(err) || ctx.Err() != nil {
			break
		}
		sleepJitter(attempt)
	}
	return dbError(err)
}

// Update implements Store: SERIALIZABLE, with fn run again on a
// serialization failure or deadlock.
func (s *Postgres) Update(ctx context.Context, fn func(Tx) error) error {
	var err error
	for attempt := range maxAttempts {
		var written []string
		var onCommit []func()
		err = s.run(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable}, fn, func(t *pgTx) {
			written, onCommit = t.written, t.onCommit
		})
		if err == nil {
			for _, b := range written {
				s.changes[b].Add(1)
			}
			for _, f := range onCommit {
				f()
			}
			return nil
		}
		if !retryableWrite(err) || ctx.Err() != nil {
			break
		}
		sleepJitter(attempt)
	}
	return dbError(err)
}

// run runs fn in one transaction; for a writable one, committed tells the
// caller what it wrote and what to run after the commit.
func (s *Postgres) run(ctx context.Context, opts pgx.TxOptions, fn func(Tx) error, committed func(*pgTx)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ptx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return &beforeCommit{err}
	}
	t := &pgTx{ctx: ctx, tx: ptx, writable: opts.AccessMode != pgx.ReadOnly}
	ferr := fn(t)
	if t.err != nil {
		// A failed statement explains whatever fn made of it.
		ferr = t.err
	}
	if ferr != nil {
		_ = ptx.Rollback(context.WithoutCancel(ctx))
		if isPgRetryable(ferr) || isConnError(ferr) {
			return &beforeCommit{ferr}
		}
		return ferr
	}
	if len(t.written) > 0 {
		payload := s.owner + " " + strings.Join(t.written, " ")
		if _, err := ptx.Exec(ctx, "SELECT pg_notify($1, $2)", notifyChannel, payload); err != nil {
			_ = ptx.Rollback(context.WithoutCancel(ctx))
			return &beforeCommit{err}
		}
	}
	if err := ptx.Commit(ctx); err != nil {
		if isPgRetryable(err) {
			// The server refused the commit: nothing was written.
			return &beforeCommit{err}
		}
		return fmt.Errorf("commit: %w", err)
	}
	if committed != nil {
		committed(t)
	}
	return nil
}

// beforeCommit marks an error that happened before anything was
// committed, so the transaction may run again.
type beforeCommit struct{ err error }

func (e *beforeCommit) Error() string { return e.err.Error() }
func (e *beforeCommit) Unwrap() error { return e.err }

func retryableWrite(err error) bool {
	var bc *beforeCommit
	return errors.As(err, &bc) && isPgRetryable(bc.err)
}

func retryableRead(err error) bool {
	var bc *beforeCommit
	return errors.As(err, &bc) && (isPgRetryable(bc.err) || isConnError(bc.err))
}

// isPgRetryable reports a serialization failure or a deadlock.
func isPgRetryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// isConnError reports an error of the connection rather than of a statement.
func isConnError(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// admin_shutdown, crash_shutdown, cannot_connect_now: a restart.
		return pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ne net.Error
	return errors.As(err, &ne) || pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrTxClosed) ||
		strings.Contains(err.Error(), "failed to connect") || strings.Contains(err.Error(), "conn closed")
}

// dbError turns a failure of the database itself into errs.Unavailable,
// leaving the domain's errors as they are.
func dbError(err error) error {
	if err == nil {
		return nil
	}
	if errs.KindOf(err) != errs.Internal {
		return err
	}
	if isConnError(err) || isPgRetryable(err) {
		return errs.Wrap(errs.Unavailable, err, "the database is not answering; retry shortly")
	}
	return err
}

func sleepJitter(attempt int) {
	d := time.Duration(1+rand.IntN(5*(attempt+1))) * time.Millisecond
	time.Sleep(min(d, 100*time.Millisecond))
}

// Changes implements Store.
func (s *Postgres) Changes(buckets ...string) uint64 {
	n := s.epoch.Load()
	if !s.listening.Load() {
		// Other replicas' commits are not heard: every call is a change.
		n = s.epoch.Add(1)
	}
	return n + sumChanges(s.changes, buckets)
}

// Ping implements Store.
func (s *Postgres) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return errs.Wrap(errs.Unavailable, err, "the database is not answering")
	}
	return nil
}

// Close implements Store.
func (s *Postgres) Close() error {
	s.stop()
	s.listener.Wait()
	s.pool.Close()
	return nil
}

// Exclusive takes the serving lock for this process alone, for a command
// that must not run while a replica serves the database (a replica
// writes secrets sealed under the master key it started with). It fails
// with ErrInUse while any replica serves; while it is held, replicas do
// not start. release gives it back.
func (s *Postgres) Exclusive(ctx context.Context) (release func(), err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, dbError(err)
	}
	// Session locks live with the connection: keep it out of the pool.
	pc := conn.Hijack()
	var ok bool
	if err := pc.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", servingLock).Scan(&ok); err != nil {
		pc.Close(context.Background())
		return nil, dbError(err)
	}
	if !ok {
		var n int
		_ = pc.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ShareLock' AND granted
			AND ((classid::bigint << 32) | objid::bigint) = $1`, servingLock).Scan(&n)
		pc.Close(context.Background())
		return nil, fmt.Errorf("%w: %d replica(s) serve this database; stop every switchboard serve on it first", ErrInUse, n)
	}
	return func() { pc.Close(context.Background()) }, nil
}

// Listening reports whether the change listener is connected (tests, readiness).
func (s *Postgres) Listening() bool { return s.listening.Load() }

// pgTx is one transaction. A failed statement is kept in err: later calls
// do nothing, and the transaction ends with that error.
type pgTx struct {
	ctx      context.Context
	tx       pgx.Tx
	writable bool
	err      error
	written  []string
	onCommit []func()
}

var _ Sequencer = (*pgTx)(nil)

func (t *pgTx) fail(err error) error {
	if t.err == nil {
		t.err = err
	}
	return t.err
}

func (t *pgTx) wrote(bucket string) {
	if !slices.Contains(t.written, bucket) {
		t.written = append(t.written, bucket)
	}
}

func (t *pgTx) checkWrite(bucket string) error {
	if t.err != nil {
		return t.err
	}
	if !t.writable {
		return errors.New("store: write in a read-only transaction")
	}
	if !slices.Contains(Buckets, bucket) {
		return fmt.Errorf("store: unknown bucket %q", bucket)
	}
	return nil
}

func (t *pgTx) Get(bucket, key string) []byte {
	if t.err != nil {
		return nil
	}
	var v []byte
	err := t.tx.QueryRow(t.ctx, "SELECT value FROM kv WHERE bucket = $1 AND key = $2", bucket, []byte(key)).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		t.fail(fmt.Errorf("get %s/%s: %w", bucket, key, err))
		return nil
	}
	if v == nil {
		v = []byte{}
	}
	return v
}

func (t *pgTx) Put(bucket, key string, value []byte) error {
	if err := t.checkWrite(bucket); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	if _, err := t.tx.Exec(t.ctx, `INSERT INTO kv (bucket, key, value) VALUES ($1, $2, $3)
		ON CONFLICT (bucket, key) DO UPDATE SET value = EXCLUDED.value`, bucket, []byte(key), value); err != nil {
		return t.fail(fmt.Errorf("put %s/%s: %w", bucket, key, err))
	}
	t.wrote(bucket)
	return nil
}

func (t *pgTx) Delete(bucket, key string) error {
	if err := t.checkWrite(bucket); err != nil {
		return err
	}
	if _, err := t.tx.Exec(t.ctx, "DELETE FROM kv WHERE bucket = $1 AND key = $2", bucket, []byte(key)); err != nil {
		return t.fail(fmt.Errorf("delete %s/%s: %w", bucket, key, err))
	}
	t.wrote(bucket)
	return nil
}

// Scan reads scanPage rows at a time, so that a caller that stops early
// reads little, and fn may write to the bucket between pages.
func (t *pgTx) Scan(bucket, prefix, after string, fn func(key string, value []byte) (bool, error)) error {
	if t.err != nil {
		return t.err
	}
	from := []byte(prefix)
	exclusive := false
	if after != "" && after >= prefix {
		from, exclusive = []byte(after), true
	}
	upper := prefixEnd([]byte(prefix))
	type row struct {
		k string
		v []byte
	}
	page := make([]row, 0, scanPage)
	for {
		var (
			rows pgx.Rows
			err  error
			op   = ">="
		)
		if exclusive {
			op = ">"
		}
		if upper != nil {
			rows, err = t.tx.Query(t.ctx, "SELECT key, value FROM kv WHERE bucket = $1 AND key "+op+" $2 AND key < $3 ORDER BY key LIMIT $4",
				bucket, from, upper, scanPage)
		} else {
			rows, err = t.tx.Query(t.ctx, "SELECT key, value FROM kv WHERE bucket = $1 AND key "+op+" $2 ORDER BY key LIMIT $3",
				bucket, from, scanPage)
		}
		if err != nil {
			return t.fail(fmt.Errorf("scan %s: %w", bucket, err))
		}
		page = page[:0]
		for rows.Next() {
			var k, v []byte
			if err := rows.Scan(&k, &v); err != nil {
				rows.Close()
				return t.fail(fmt.Errorf("scan %s: %w", bucket, err))
			}
			page = append(page, row{string(k), v})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return t.fail(fmt.Errorf("scan %s: %w", bucket, err))
		}
		for _, r := range page {
			more, err := fn(r.k, r.v)
			if err != nil || !more {
				return err
			}
			if t.err != nil {
				return t.err
			}
		}
		if len(page) < scanPage {
			return nil
		}
		from, exclusive = []byte(page[len(page)-1].k), true
	}
}

// prefixEnd is the smallest key greater than every key with prefix p; nil
// when there is none (p is empty or all 0xff).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func (t *pgTx) NextSequence(bucket string) (uint64, error) {
	if err := t.checkWrite(bucket); err != nil {
		return 0, err
	}
	var v int64
	if err := t.tx.QueryRow(t.ctx, "SELECT nextval($1)", sequenceName(bucket)).Scan(&v); err != nil {
		return 0, t.fail(fmt.Errorf("next sequence of %s: %w", bucket, err))
	}
	t.wrote(bucket)
	return uint64(v), nil
}

// Sequence implements Sequencer: the last number handed out (0 for none).
func (t *pgTx) Sequence(bucket string) (uint64, error) {
	if t.err != nil {
		return 0, t.err
	}
	if !slices.Contains(Buckets, bucket) {
		return 0, fmt.Errorf("store: unknown bucket %q", bucket)
	}
	var (
		v      int64
		called bool
	)
	if err := t.tx.QueryRow(t.ctx, "SELECT last_value, is_called FROM "+pgx.Identifier{sequenceName(bucket)}.Sanitize()).Scan(&v, &called); err != nil {
		return 0, t.fail(fmt.Errorf("sequence of %s: %w", bucket, err))
	}
	if !called {
		return 0, nil
	}
	return uint64(v), nil
}

// SetSequence implements Sequencer: the next number is above v.
func (t *pgTx) SetSequence(bucket string, v uint64) error {
	if err := t.checkWrite(bucket); err != nil {
		return err
	}
	if v == 0 {
		return nil
	}
	cur, err := t.Sequence(bucket)
	if err != nil || cur >= v {
		return err
	}
	if _, err := t.tx.Exec(t.ctx, "SELECT setval($1, $2)", sequenceName(bucket), int64(v)); err != nil {
		return t.fail(fmt.Errorf("set sequence of %s: %w", bucket, err))
	}
	t.wrote(bucket)
	return nil
}

func (t *pgTx) Writable() bool { return t.writable }

func (t *pgTx) OnCommit(fn func()) { t.onCommit = append(t.onCommit, fn) }
