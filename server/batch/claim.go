package batch

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// A batch id makes a batched write idempotent. A writer that cannot tell
// whether its transaction committed (the connection to the database was
// lost during the commit) writes the same batch again under the same id;
// Claim, called in the writing transaction, records the id and tells the
// second attempt that the first one committed, so that nothing is counted
// twice. Every replica writing to one store may do this at once: ids are
// random and claims live in the store.

// claimBucket and claimPrefix hold the claims: "batch/<time>/<random>",
// sorted by the time the batch was made, valued empty.
const (
	claimBucket = "meta"
	claimPrefix = "batch/"
	claimTime   = "20060102T150405Z"
)

// ClaimTTL is how long a claim is kept: a batch whose commit outcome was
// unknown and that is written again more than ClaimTTL after it was made
// (the store was unreachable all that time) may be counted twice.
const ClaimTTL = time.Hour

// NewID returns a fresh batch id made at now.
func NewID(now time.Time) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format(claimTime) + "/" + hex.EncodeToString(b[:])
}

// Claim records id in tx and reports whether it was new; false means a
// transaction that claimed it committed already, and the batch must not be
// written again. Only the writing transaction may call it.
func Claim(tx store.Tx, id string) (bool, error) {
	if Claimed(tx, id) {
		return false, nil
	}
	return true, tx.Put(claimBucket, claimPrefix+id, []byte{})
}

// Claimed reports whether a committed transaction claimed id.
func Claimed(tx store.Tx, id string) bool {
	return tx.Get(claimBucket, claimPrefix+id) != nil
}

// PruneClaims deletes the claims of batches made more than ClaimTTL
// before now.
func PruneClaims(tx store.Tx, now time.Time) error {
	limit := now.Add(-ClaimTTL).UTC().Format(claimTime)
	var old []string
	if err := tx.Scan(claimBucket, claimPrefix, "", func(k string, _ []byte) (bool, error) {
		t, _, _ := strings.Cut(strings.TrimPrefix(k, claimPrefix), "/")
		if t >= limit {
			return false, nil
		}
		old = append(old, k)
		return true, nil
	}); err != nil {
		return err
	}
	for _, k := range old {
		if err := tx.Delete(claimBucket, k); err != nil {
			return err
		}
	}
	return nil
}
