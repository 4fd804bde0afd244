package connectors

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/batch"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// BucketInvocations holds the invocation log: "<connector>/<key>" where
// key sorts the newest first.
const BucketInvocations = "invocations"

// Invocation is one entry of a connector's invocation log: what was run
// and how it went, never a body, a parameter or a secret.
type Invocation struct {
	// Connector and Action name what was run; Connection whose credentials.
	Connector  string `json:"connector"`
	Action     string `json:"action"`
	Connection string `json:"connection,omitempty"`
	// Status is the upstream's HTTP status; 0 when none was received.
	Status int `json:"status,omitempty"`
	// DurationMs is the time the invocation took, transformation included.
	DurationMs int64 `json:"durationMs"`
	// ErrorCode is the error's code (e.g. upstream_error); empty on success.
	ErrorCode string `json:"errorCode,omitempty"`
	// RequestID is the X-Request-Id of the call that ran it.
	RequestID string `json:"requestId,omitempty"`
	// CreatedAt is when the invocation started (UTC).
	CreatedAt time.Time `json:"createdAt"`
}

// InvocationLog keeps the last Size invocations of each connector.
// Record never waits for the disk: entries are buffered in memory and
// written in batches, one transaction per FlushInterval (or sooner when
// many are waiting), and on Close. At most MaxPending entries wait; past
// that the oldest waiting ones are dropped (and counted in the log).
type InvocationLog struct {
	// Store keeps the log.
	Store store.Store
	// Size is how many entries are kept per connector (default 100).
	Size int
	// FlushInterval is the longest an entry waits (default 1s).
	FlushInterval time.Duration
	// MaxPending bounds the entries waiting in memory (default 10000).
	MaxPending int
	// Events, when set, records action.invoked / action.failed for each
	// entry in the flush's transaction (webhooks deliver these opt-in events
	// only to webhooks that list them).
	Events events.Recorder
	// Logger reports flush failures.
	Logger *slog.Logger

	buf  batch.Buffer[Invocation]
	init sync.Once
}

func (l *InvocationLog) size() int {
	if l.Size > 0 {
		return l.Size
	}
	return 100
}

// buffer is the log's batch.Buffer, configured from its fields at first use.
func (l *InvocationLog) buffer() *batch.Buffer[Invocation] {
	l.init.Do(func() {
		l.buf.Write, l.buf.What = l.write, "invocation log entries"
		l.buf.Interval, l.buf.MaxPending, l.buf.Logger = l.FlushInterval, l.MaxPending, l.Logger
	})
	return &l.buf
}

// Start runs the background flusher until Close.
func (l *InvocationLog) Start() { l.buffer().Start() }

// Record adds an entry; it only appends to memory.
func (l *InvocationLog) Record(inv Invocation) { l.buffer().Add(inv) }

// Flush writes the waiting entries in one transaction and trims each
// connector's log to Size entries.
func (l *InvocationLog) Flush(ctx context.Context) error { return l.buffer().Flush(ctx) }

// write stores one batch of entries (none when its id was claimed: an
// earlier write of it committed) and trims the logs they went to.
func (l *InvocationLog) write(ctx context.Context, id string, items []Invocation) error {
	if len(items) == 0 {
		return nil
	}
	return l.Store.Update(ctx, func(tx store.Tx) error {
		if fresh, err := batch.Claim(tx, id); err != nil || !fresh {
			return err
		}
		touched := map[string]bool{}
		for _, inv := range items {
			if tx.Get(BucketConnectors, inv.Connector) == nil {
				continue // the connector was deleted meanwhile
			}
			seq, err := tx.NextSequence(BucketInvocations)
			if err != nil {
				return err
			}
			if err := store.PutJSON(tx, BucketInvocations, invocationKey(inv.Connector, seq), inv); err != nil {
				return err
			}
			touched[inv.Connector] = true
			if l.Events != nil {
				typ := events.ActionInvoked
				if inv.ErrorCode != "" {
					typ = events.ActionFailed
				}
				if err := l.Events.Record(tx, typ, inv); err != nil {
					return err
				}
			}
		}
		for c := range touched {
			if err := trimLog(tx, c, l.size()); err != nil {
				return err
			}
		}
		return nil
	})
}

// invocationKey sorts a connector's entries newest first.
func invocationKey(connector string, seq uint64) string {
	return fmt.Sprintf("%s/%016x", connector, ^seq)
}

// trimLog deletes a connector's entries beyond the newest keep.
func trimLog(tx store.Tx, connector string, keep int) error {
	var old []string
	n := 0
	if err := tx.Scan(BucketInvocations, connector+"/", "", func(k string, _ []byte) (bool, error) {
		if n++; n > keep {
			old = append(old, k)
		}
		return true, nil
	}); err != nil {
		return err
	}
	for _, k := range old {
		if err := tx.Delete(BucketInvocations, k); err != nil {
			return err
		}
	}
	return nil
}

// List returns a connector's invocations, newest first, after cursor, at
// most limit; it flushes waiting entries first so that the list is
// current. next is "" on the last page.
func (l *InvocationLog) List(ctx context.Context, connector, cursor string, limit int) ([]Invocation, string, error) {
	if err := l.Flush(ctx); err != nil {
		return nil, "", err
	}
	var (
		out  []Invocation
		next string
	)
	err := l.Store.View(ctx, func(tx store.Tx) error {
		if _, err := LoadConnector(tx, connector); err != nil {
			return err
		}
		after := ""
		if cursor != "" {
			after = connector + "/" + cursor
		}
		var err error
		out, next, err = store.Page[Invocation](tx, BucketInvocations, connector+"/", after, limit)
		if next != "" {
			next = next[len(connector)+1:]
		}
		return err
	})
	return out, next, err
}

// DeleteConnectorTx deletes a connector's log inside tx (an
// OnDeleteConnector hook of the Service).
func (l *InvocationLog) DeleteConnectorTx(tx store.Tx, connector string) error {
	return trimLog(tx, connector, 0)
}

// Close stops the flusher and writes what is waiting.
func (l *InvocationLog) Close(ctx context.Context) error { return l.buffer().Close(ctx) }
