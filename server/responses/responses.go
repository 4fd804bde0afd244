// Package responses keeps the responses of /openai/v1/responses that were
// created with store: true, for GET and DELETE /responses/{id} and for
// previous_response_id, each owned by the credential that created it and
// kept for a retention period.
//
// Put never touches the disk: it adds the response to an in-memory pending
// set. A background loop writes the pending responses to the store (bucket
// "responses") in one transaction per interval (sooner when many wait), and
// Close writes what is left. Get reads the pending set first, so that a
// response can be continued or retrieved on this replica at once; other
// replicas see it after the next flush. A failed flush keeps its responses
// in memory for the next attempt (which writes the same blocks under the
// same keys).
//
// Expired responses are never answered, and once per SweepEvery a flush
// deletes them from the store (on one replica at a time, the holder of the
// "responses/sweep" lease).
package responses

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	fastjson "github.com/goccy/go-json"
	"github.com/klauspost/compress/s2"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/ids"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/lease"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// Bucket is the store bucket holding the responses. A flush writes them in
// blocks of up to blockSize, each block three kinds of entries:
//
//   - "b/<first id>": the block, its responses' JSON one after the other,
//     compressed (S2's block format: a response object is mostly member
//     names and ids, which compress several times over);
//   - "i/<window>/<first id>": where the block's responses whose ids fall
//     in window are in the uncompressed block, a line "<id> <offset>
//     <length>" each. A window is an id's prefix and the first 11 of the
//     12 hex digits of its milliseconds (server/ids): 16 ms of ids, so
//     that a block of responses made close together takes one or two
//     entries, and a lookup by id scans the few entries of its window;
//   - "r/<id>" instead, for an id not made by server/ids: its location,
//     "<first id> <offset> <length>";
//   - "x/<expiry>/<first id>": the block's ids, one per line, under the
//     latest expiry among them, so that the sweep finds blocks by expiry.
//
// One value for many responses is one write for all of them (a key per
// response costs a tree search and a page entry each), and compressing it
// makes it several times smaller on disk and cheaper to write. Earlier
// versions wrote each response's JSON, or its location, under "r/<id>",
// and an empty "x/<expiry>/<id>"; all are still read and swept.
const Bucket = "responses"

const (
	blockPrefix  = "b/"
	indexPrefix  = "i/"
	recordPrefix = "r/"
	expiryPrefix = "x/"
	expiryLayout = "20060102T150405Z"
)

// blockSize bounds the responses of one block: large enough that a block
// is one write for many, small enough that deleting one response (which
// rewrites its block without it) stays cheap.
const blockSize = 64

// DefaultRetention is how long a stored response is kept, as on OpenAI.
const DefaultRetention = 30 * 24 * time.Hour

// DefaultFlushInterval is the longest a response waits before it is written.
const DefaultFlushInterval = time.Second

// SweepEvery is how often expired responses are deleted from the store.
const SweepEvery = time.Hour

// sweepBatch bounds the responses one sweep deletes (it stops at the
// first expiry entry past it), so that its transaction stays small; the
// next flush continues.
const sweepBatch = 1000

// kickSize is how many pending responses make the flusher write at once:
// large enough that a busy replica commits only a few times a second (a
// commit's fixed cost, its tree paths and disk syncs, is most of a small
// one's).
const kickSize = 1024

// DefaultMaxPending bounds the responses waiting in memory.
const DefaultMaxPending = 10000

// sweepLease names the lease of the sweep.
const sweepLease = "responses/sweep"

// Stored is one kept response. Input, Output and Response are the wire
// format's JSON, opaque here.
type Stored struct {
	ID string `json:"id"`
	// Owner is the id of the credential that created the response.
	Owner     string    `json:"owner"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Input is the conversation the response answered, as input items: the
	// earlier turns of previous_response_id and the request's input.
	Input json.RawMessage `json:"input"`
	// Response is the response object as answered (its output items are
	// the conversation's next turn).
	Response json.RawMessage `json:"response"`
}

// Options configure a Keeper.
type Options struct {
	// Retention is how long a response is kept; DefaultRetention when 0.
	Retention time.Duration
	// FlushInterval; DefaultFlushInterval when 0.
	FlushInterval time.Duration
	// MaxPending bounds the responses waiting in memory; past it the
	// oldest are dropped, and the drop logged (DefaultMaxPending when 0).
	MaxPending int
	// Leases, when set, make the sweep run on one replica at a time.
	Leases *lease.Manager
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Logger reports failed flushes and drops; slog.Default when nil.
	Logger *slog.Logger
}

// Keeper keeps stored responses: in memory until flushed, then in the store.
type Keeper struct {
	st         store.Store
	retention  time.Duration
	interval   time.Duration
	maxPending int
	leases     *lease.Manager
	now        func() time.Time
	log        *slog.Logger

	mu sync.Mutex
	// pending are the responses not yet handed to a flush, in order;
	// unsent those of flushes that failed. Both guarded by mu, unsent
	// changed only under flushMu.
	pending []*Stored
	unsent  []*Stored
	dropped int

	flushMu   sync.Mutex   // one flush (or delete) at a time
	lastSweep time.Time    // guarded by flushMu
	buffers   flushBuffers // guarded by flushMu

	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// New starts a Keeper writing to st.
func New(st store.Store, o Options) *Keeper {
	k := &Keeper{st: st, retention: o.Retention, interval: o.FlushInterval, maxPending: o.MaxPending, leases: o.Leases, now: o.Now, log: o.Logger,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if k.retention <= 0 {
		k.retention = DefaultRetention
	}
	if k.interval <= 0 {
		k.interval = DefaultFlushInterval
	}
	if k.maxPending <= 0 {
		k.maxPending = DefaultMaxPending
	}
	if k.now == nil {
		k.now = time.Now
	}
	if k.log == nil {
		k.log = slog.Default()
	}
	go k.loop()
	return k
}

// Retention is how long a response is kept.
func (k *Keeper) Retention() time.Duration { return k.retention }

func (k *Keeper) loop() {
	defer close(k.done)
	t := time.NewTicker(k.interval)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
		case <-k.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), k.interval+10*time.Second)
		if err := k.Flush(ctx); err != nil {
			k.log.Error("stored responses flush failed; kept in memory for the next attempt", "error", err.Error())
		}
		cancel()
	}
}

// Put keeps s (its CreatedAt and ExpiresAt are set from the clock and the
// retention when zero). It never blocks on I/O.
func (k *Keeper) Put(s *Stored) {
	if s.CreatedAt.IsZero() {
		s.CreatedAt = k.now().UTC()
	}
	if s.ExpiresAt.IsZero() {
		s.ExpiresAt = s.CreatedAt.Add(k.retention)
	}
	k.mu.Lock()
	if n := len(k.pending) + len(k.unsent) - k.maxPending + 1; n > 0 {
		k.dropOldest(n)
	}
	k.pending = append(k.pending, s)
	full := len(k.pending) >= kickSize
	k.mu.Unlock()
	if full {
		select {
		case k.kick <- struct{}{}:
		default:
		}
	}
}

// dropOldest drops the n oldest waiting responses; k.mu held.
func (k *Keeper) dropOldest(n int) {
	k.dropped += n
	m := min(n, len(k.unsent))
	k.unsent = append(k.unsent[:0:0], k.unsent[m:]...)
	n -= m
	k.pending = append(k.pending[:0:0], k.pending[n:]...)
}

// waiting returns the response id waiting in memory, or nil; k.mu held.
func (k *Keeper) waiting(id string) *Stored {
	for _, list := range [][]*Stored{k.pending, k.unsent} {
		for i := len(list) - 1; i >= 0; i-- {
			if list[i].ID == id {
				return list[i]
			}
		}
	}
	return nil
}

// Get returns the response id owned by owner: errs.NotFound when there is
// none, it expired, or another credential created it (which is not told
// apart, so that ids cannot be probed).
func (k *Keeper) Get(ctx context.Context, owner, id string) (*Stored, error) {
	now := k.now()
	k.mu.Lock()
	s := k.waiting(id)
	k.mu.Unlock()
	if s == nil {
		// Not waiting: written by a flush that committed, or never kept.
		var rec []byte
		err := k.st.View(ctx, func(tx store.Tx) error {
			_, _, b, err := recordTx(tx, id)
			rec = bytes.Clone(b)
			return err
		})
		if err != nil {
			return nil, err
		}
		if rec == nil {
			return nil, notFound(id)
		}
		var out Stored
		if err := fastjson.Unmarshal(rec, &out); err != nil {
			return nil, errs.Wrap(errs.Internal, err, fmt.Sprintf("stored response %s", id))
		}
		s = &out
	}
	if s.Owner != owner || !now.Before(s.ExpiresAt) {
		return nil, notFound(id)
	}
	return s, nil
}

func notFound(id string) error {
	return errs.E(errs.NotFound, "no response with id %q: it was never stored (store: false), expired, was deleted, or belongs to another credential", id)
}

// Delete deletes the response id owned by owner (errs.NotFound as Get).
func (k *Keeper) Delete(ctx context.Context, owner, id string) error {
	if _, err := k.Get(ctx, owner, id); err != nil {
		return err
	}
	// Under flushMu no flush holds the response: it is either waiting
	// (then it never reaches the store) or stored.
	k.flushMu.Lock()
	defer k.flushMu.Unlock()
	k.mu.Lock()
	remove := func(list []*Stored) []*Stored {
		out := list[:0:0]
		for _, s := range list {
			if s.ID != id {
				out = append(out, s)
			}
		}
		return out
	}
	k.pending, k.unsent = remove(k.pending), remove(k.unsent)
	k.mu.Unlock()
	return k.st.Update(ctx, func(tx store.Tx) error {
		// The block's expiry entry stays: the sweep skips ids already gone.
		loc, block, rec, err := recordTx(tx, id)
		if err != nil || rec == nil {
			return err
		}
		if loc.block != "" {
			// Blank the response in its block, so that no copy of it is
			// kept: block is recordTx's decoded copy, rec a part of it.
			clear(rec)
			if err := tx.Put(Bucket, blockPrefix+loc.block, s2.Encode(nil, block)); err != nil {
				return err
			}
		}
		if !strings.HasPrefix(loc.key, indexPrefix) {
			return tx.Delete(Bucket, loc.key)
		}
		lines := withoutLine(tx.Get(Bucket, loc.key), id)
		if len(lines) == 0 {
			return tx.Delete(Bucket, loc.key)
		}
		return tx.Put(Bucket, loc.key, lines)
	})
}

// location is where a response is stored: in a block, or (written by an
// earlier version) whole under its "r/" key, block empty.
type location struct {
	key    string // the entry that holds it: "i/<window>/<block>" or "r/<id>"
	block  string
	off, n int
}

// window is the index window of id (see Bucket), "" for an id not made by
// server/ids.
func window(id string) string {
	n := len(id) - ids.HexLen
	if n < 0 {
		return ""
	}
	for i := n; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return ""
		}
	}
	return id[:n+11]
}

// findLine returns the offset and length on id's line of an index entry.
func findLine(lines []byte, id string) (off, n int, ok bool) {
	head := []byte(id + " ")
	for line := range bytes.Lines(lines) {
		if !bytes.HasPrefix(line, head) {
			continue
		}
		// The same shape as a location, the id first.
		l, err := parseLocation(string(bytes.TrimSuffix(line, []byte{'\n'})))
		return l.off, l.n, err == nil
	}
	return 0, 0, false
}

// withoutLine returns a copy of the index entry lines without id's line.
func withoutLine(lines []byte, id string) []byte {
	head := []byte(id + " ")
	out := make([]byte, 0, len(lines))
	for line := range bytes.Lines(lines) {
		if bytes.HasPrefix(line, head) {
			continue
		}
		out = append(out, line...)
	}
	return bytes.TrimSuffix(out, []byte{'\n'})
}

// appendTo appends the location as stored: "<block> <offset> <length>".
func (l location) appendTo(b []byte) []byte { return appendLine(b, l.block, l.off, l.n) }

// parseLocation reads a stored location.
func parseLocation(v string) (location, error) {
	block, rest, ok1 := strings.Cut(v, " ")
	off, n, ok2 := strings.Cut(rest, " ")
	l := location{block: block}
	var err1, err2 error
	l.off, err1 = strconv.Atoi(off)
	l.n, err2 = strconv.Atoi(n)
	if !ok1 || !ok2 || block == "" || err1 != nil || err2 != nil {
		return l, fmt.Errorf("location %q is not \"<block> <offset> <length>\"", v)
	}
	return l, nil
}

// recordTx returns the JSON of the response id (rec, nil when there is
// none) and where it is: its block, decoded (a fresh copy), of which rec is
// a part. A response of an earlier version has no block, and its rec is
// the stored value itself, valid only inside tx.
func recordTx(tx store.Tx, id string) (loc location, block, rec []byte, err error) {
	l, v, err := locate(tx, id)
	if err != nil || v == nil {
		return l, nil, nil, err
	}
	if l.block == "" {
		return l, nil, v, nil
	}
	block, err = s2.Decode(nil, tx.Get(Bucket, blockPrefix+l.block))
	if err != nil {
		return l, nil, nil, errs.Wrap(errs.Internal, err, fmt.Sprintf("stored response %s: block %s", id, l.block))
	}
	if l.off < 0 || l.n <= 0 || l.off+l.n > len(block) {
		return l, nil, nil, errs.E(errs.Internal, "stored response %s: location %q is outside its block of %d bytes", id, v, len(block))
	}
	return l, block, block[l.off : l.off+l.n], nil
}

// locate finds where the response id is: in its window's index entries,
// or under "r/<id>" (an id not made by server/ids, or a response of an
// earlier version). v is the entry's value (nil when there is none); for
// a response stored whole, l.block is empty and v is its JSON, valid only
// inside tx.
func locate(tx store.Tx, id string) (l location, v []byte, err error) {
	if w := window(id); w != "" {
		prefix := indexPrefix + w + "/"
		err := tx.Scan(Bucket, prefix, "", func(key string, value []byte) (bool, error) {
			off, n, ok := findLine(value, id)
			if ok {
				l, v = location{key: key, block: strings.TrimPrefix(key, prefix), off: off, n: n}, value
			}
			return !ok, nil
		})
		if err != nil || v != nil {
			return l, v, err
		}
	}
	key := recordPrefix + id
	v = tx.Get(Bucket, key)
	switch {
	case v == nil:
		return location{}, nil, nil
	case v[0] == '{':
		return location{key: key}, v, nil
	}
	if l, err = parseLocation(string(v)); err != nil {
		return l, nil, errs.Wrap(errs.Internal, err, fmt.Sprintf("stored response %s", id))
	}
	l.key = key
	return l, v, nil
}

// appendTo appends s as JSON (what Get reads back) to b, its raw members
// copied as they are: they are the wire format's own encoding, valid and
// compact, so that a flush does not scan them again.
func (s *Stored) appendTo(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, s.ID)
	b = append(b, `,"owner":`...)
	b = appendString(b, s.Owner)
	b = append(b, `,"createdAt":"`...)
	b = s.CreatedAt.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","expiresAt":"`...)
	b = s.ExpiresAt.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","input":`...)
	b = appendRaw(b, s.Input)
	b = append(b, `,"response":`...)
	b = appendRaw(b, s.Response)
	return append(b, '}')
}

// encodedSize bounds the length of s.appendTo(nil): the members' names and
// punctuation, two timestamps, the raw members, and the strings each
// escaped at worst to six bytes a byte (\u00XX).
func encodedSize(s *Stored) int {
	return 128 + 2*len(time.RFC3339Nano) + 6*(len(s.ID)+len(s.Owner)) + len(s.Input) + len(s.Response)
}

// appendString appends v as a JSON string. Ids and owners are plain
// ASCII, copied as they are; anything else goes through the encoder.
func appendString(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			q, _ := fastjson.Marshal(v)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, v...)
	return append(b, '"')
}

func appendRaw(b []byte, v json.RawMessage) []byte {
	if len(v) == 0 {
		return append(b, "null"...)
	}
	return append(b, v...)
}

// expiryEntry is the sweep's entry for a block: its key (the latest
// expiry and the first id) and the ids, one per line.
func expiryEntry(batch []*Stored) (string, []byte) {
	last := batch[0].ExpiresAt
	n := 0
	for _, s := range batch {
		if s.ExpiresAt.After(last) {
			last = s.ExpiresAt
		}
		n += len(s.ID) + 1
	}
	ids := make([]byte, 0, n)
	for i, s := range batch {
		if i > 0 {
			ids = append(ids, '\n')
		}
		ids = append(ids, s.ID...)
	}
	return expiryPrefix + last.UTC().Format(expiryLayout) + "/" + batch[0].ID, ids
}

// block is up to blockSize responses as a flush writes them.
type block struct {
	id      string  // the first response's id
	packed  []byte  // the responses' JSON, compressed
	index   []entry // where each response is: "i/..." entries, or "r/<id>"
	expiry  string  // the key of the block's expiry entry
	idLines []byte  // its value
}

// entry is a key and its value.
type entry struct {
	key   string
	value []byte
}

// flushBuffers are a flush's working memory, kept for the next one
// (flushes take turns): a busy replica would otherwise allocate, and the
// runtime return to the system, about a megabyte a flush.
type flushBuffers struct {
	data   []byte // one block's JSON, before it is compressed
	packed []byte // the flush's compressed blocks, one after the other
	locs   []byte // the flush's index values, one after the other
}

// makeBlocks encodes responses into blocks, in buf's memory: they are valid
// until the next call.
func makeBlocks(responses []*Stored, buf *flushBuffers) []*block {
	packed, locs := 0, 0
	for chunk := range slices.Chunk(responses, blockSize) {
		size := 0
		for _, s := range chunk {
			size += encodedSize(s)
			locs += len(s.ID) + len(chunk[0].ID) + 2*20 + 3 // a line, or a location
		}
		packed += s2.MaxEncodedLen(size)
	}
	// The arenas never grow below: the blocks keep slices of them.
	if cap(buf.packed) < packed {
		buf.packed = make([]byte, 0, packed)
	}
	if cap(buf.locs) < locs {
		buf.locs = make([]byte, 0, locs)
	}
	buf.packed, buf.locs = buf.packed[:0], buf.locs[:0]
	var out []*block
	for chunk := range slices.Chunk(responses, blockSize) {
		b := &block{id: chunk[0].ID}
		data := buf.data[:0]
		// Index lines are written window by window: the responses of each
		// window together (usually all of them: they are in put order,
		// which is nearly id order).
		var (
			spans [blockSize]struct{ off, n int }
			wins  [blockSize]string
			done  [blockSize]bool
		)
		for i, s := range chunk {
			off := len(data)
			data = s.appendTo(data)
			spans[i].off, spans[i].n = off, len(data)-off
			if wins[i] = window(s.ID); wins[i] == "" {
				start := len(buf.locs)
				buf.locs = location{block: b.id, off: off, n: spans[i].n}.appendTo(buf.locs)
				b.index = append(b.index, entry{recordPrefix + s.ID, buf.locs[start:len(buf.locs):len(buf.locs)]})
				done[i] = true
			}
		}
		for i := range chunk {
			if done[i] {
				continue
			}
			start := len(buf.locs)
			for j := i; j < len(chunk); j++ {
				if !done[j] && wins[j] == wins[i] {
					if len(buf.locs) > start {
						buf.locs = append(buf.locs, '\n')
					}
					buf.locs = appendLine(buf.locs, chunk[j].ID, spans[j].off, spans[j].n)
					done[j] = true
				}
			}
			b.index = append(b.index, entry{indexPrefix + wins[i] + "/" + b.id, buf.locs[start:len(buf.locs):len(buf.locs)]})
		}
		buf.data = data
		start := len(buf.packed)
		b.packed = s2.Encode(buf.packed[start:start+s2.MaxEncodedLen(len(data))], data)
		buf.packed = buf.packed[:start+len(b.packed)]
		b.expiry, b.idLines = expiryEntry(chunk)
		out = append(out, b)
	}
	return out
}

// appendLine appends "<name> <offset> <length>": an index line (name the
// response's id) or a location (name its block).
func appendLine(b []byte, name string, off, n int) []byte {
	b = append(b, name...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(off), 10)
	b = append(b, ' ')
	return strconv.AppendInt(b, int64(n), 10)
}

// putTx writes the block, where its responses are, and its expiry entry.
func (b *block) putTx(tx store.Tx) error {
	if err := tx.Put(Bucket, blockPrefix+b.id, b.packed); err != nil {
		return err
	}
	for _, e := range b.index {
		if err := tx.Put(Bucket, e.key, e.value); err != nil {
			return err
		}
	}
	return tx.Put(Bucket, b.expiry, b.idLines)
}

// entryIDs are the ids an expiry entry lists.
func entryIDs(key string, value []byte) []string {
	if len(value) == 0 {
		_, id, _ := strings.Cut(strings.TrimPrefix(key, expiryPrefix), "/")
		return []string{id}
	}
	return strings.Split(string(value), "\n")
}

// Flush writes the waiting responses in one transaction and, once per
// SweepEvery, deletes expired ones. On failure the responses wait for the
// next flush.
func (k *Keeper) Flush(ctx context.Context) error {
	k.flushMu.Lock()
	defer k.flushMu.Unlock()
	k.mu.Lock()
	k.unsent = append(k.unsent, k.pending...)
	k.pending = nil
	batch, dropped := k.unsent, k.dropped
	k.dropped = 0
	k.mu.Unlock()
	if dropped > 0 {
		k.log.Warn("stored responses dropped: too many waiting to be written", "dropped", dropped)
	}
	now := k.now().UTC()
	sweep := now.Sub(k.lastSweep) >= SweepEvery
	// What expired while it waited is never answered: it is not written.
	expired := func(s *Stored) bool { return !now.Before(s.ExpiresAt) }
	live := batch
	if slices.ContainsFunc(batch, expired) {
		live = slices.DeleteFunc(slices.Clone(batch), expired)
	}
	if len(live) == 0 && !sweep {
		k.mu.Lock()
		k.unsent = nil
		k.mu.Unlock()
		return nil
	}
	finished := false
	blocks := makeBlocks(live, &k.buffers)
	err := k.st.Update(ctx, func(tx store.Tx) error {
		for _, b := range blocks {
			if err := b.putTx(tx); err != nil {
				return err
			}
		}
		if !sweep {
			return nil
		}
		if k.leases != nil {
			held, err := k.leases.AcquireTx(tx, sweepLease, 2*SweepEvery)
			if err != nil || !held {
				finished = err == nil // another replica sweeps
				return err
			}
		}
		var err error
		finished, err = sweepTx(tx, now)
		return err
	})
	if err != nil {
		return err
	}
	k.mu.Lock()
	// Only this flush adds to unsent (Delete and a drop only remove), so
	// what is left of it is written.
	k.unsent = nil
	k.mu.Unlock()
	if sweep && finished {
		k.lastSweep = now
	}
	return nil
}

// sweepTx deletes the blocks of expiry entries due at now, with their
// responses' locations, entry by entry until about sweepBatch responses,
// and reports whether none is left.
func sweepTx(tx store.Tx, now time.Time) (bool, error) {
	limit := now.Format(expiryLayout)
	type expiring struct {
		key string
		ids []string
	}
	var (
		due  []expiring
		n    int
		more bool
	)
	err := tx.Scan(Bucket, expiryPrefix, "", func(key string, value []byte) (bool, error) {
		at, _, _ := strings.Cut(strings.TrimPrefix(key, expiryPrefix), "/")
		if at > limit {
			return false, nil
		}
		if n >= sweepBatch {
			more = true
			return false, nil
		}
		ids := entryIDs(key, value)
		due = append(due, expiring{key, ids})
		n += len(ids)
		return true, nil
	})
	if err != nil {
		return false, err
	}
	for _, e := range due {
		_, first, _ := strings.Cut(strings.TrimPrefix(e.key, expiryPrefix), "/")
		windows := map[string]bool{}
		for _, id := range e.ids {
			// Its location: under "r/<id>", or in the block's entry of its
			// window (an earlier version wrote "r/<id>" for every id).
			if err := tx.Delete(Bucket, recordPrefix+id); err != nil {
				return false, fmt.Errorf("sweep response %s: %w", id, err)
			}
			if w := window(id); w != "" && !windows[w] {
				windows[w] = true
				if err := tx.Delete(Bucket, indexPrefix+w+"/"+first); err != nil {
					return false, fmt.Errorf("sweep response %s: %w", id, err)
				}
			}
		}
		// The block (none for an entry of an earlier version's response).
		if err := tx.Delete(Bucket, blockPrefix+first); err != nil {
			return false, err
		}
		if err := tx.Delete(Bucket, e.key); err != nil {
			return false, err
		}
	}
	return !more, nil
}

// Close stops the flush loop and writes what is left.
func (k *Keeper) Close(ctx context.Context) error {
	k.stopOnce.Do(func() { close(k.stop) })
	select {
	case <-k.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return k.Flush(ctx)
}
