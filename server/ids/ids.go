// Package ids makes the identifiers of stored records: a prefix, then 12
// hex digits of Unix milliseconds and 20 of randomness, so that ids sort by
// creation time (list pages are in id order); and bearer secrets with the
// digests their records are stored under.
package ids

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"sync"
	"time"
)

// HexLen is the length of the part after the prefix.
const HexLen = 32

var (
	mu sync.Mutex
	// last is the most recent id's bytes: 6 of milliseconds, 10 random.
	last [16]byte
)

// New returns prefix + a new id for a record created at now. Within this
// process ids are strictly increasing, also when several are made in the
// same millisecond or the clock steps back: the next id then keeps the
// previous time and adds one to its random part, as monotonic ULIDs do.
func New(prefix string, now time.Time) string {
	var b [16]byte
	ms := uint64(now.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	if _, err := rand.Read(b[6:]); err != nil {
		panic(err)
	}
	mu.Lock()
	if string(b[:6]) <= string(last[:6]) {
		b = last
		increment(b[:])
	}
	last = b
	mu.Unlock()
	return prefix + hex.EncodeToString(b[:])
}

// increment adds one to the big-endian number in b.
func increment(b []byte) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i]++
		if b[i] != 0 {
			return
		}
	}
}

// Secret returns a fresh bearer secret: prefix and 256 random bits,
// base64url-encoded (API keys, client secrets, OAuth states, connect
// session tokens, console cookies).
func Secret(prefix string) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// Digest is the hex SHA-256 of a secret: the key its record is stored
// under, so that the store never holds the secret itself.
func Digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
