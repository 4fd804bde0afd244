package webhooks

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Id prefixes.
const (
	eventPrefix    = "evt_"
	deliveryPrefix = "dlv_"
	webhookPrefix  = "wh_"
	// idHexLen is the length of the hex part of event and delivery ids:
	// 12 digits of Unix milliseconds, 16 of the store sequence, 8 random.
	idHexLen = 36
)

// newEventHex returns the hex part of an event id: time-sortable, unique
// within the store by its sequence number, and across stores by chance.
func newEventHex(now time.Time, seq uint64) string {
	var b [18]byte
	ms := uint64(now.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	binary.BigEndian.PutUint64(b[6:14], seq)
	if _, err := rand.Read(b[14:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// idHex returns the hex part of an id with the given prefix, or false when
// id is not one.
func idHex(id, prefix string) (string, bool) {
	h, ok := strings.CutPrefix(id, prefix)
	if !ok || len(h) != idHexLen {
		return "", false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", false
		}
	}
	return h, true
}

// timeOf returns the creation time embedded in a (valid) id hex part.
func timeOf(h string) time.Time {
	ms, _ := strconv.ParseInt(h[:12], 16, 64)
	return time.UnixMilli(ms).UTC()
}

// seqOf returns the store sequence embedded in a (valid) id hex part.
func seqOf(h string) string { return h[12:28] }

// invert maps each hex digit d to f-d, so that ascending key order of the
// result is descending order of h (newest first).
func invert(h string) string {
	b := []byte(h)
	for i, c := range b {
		var v byte
		if c <= '9' {
			v = c - '0'
		} else {
			v = c - 'a' + 10
		}
		b[i] = "0123456789abcdef"[15-v]
	}
	return string(b)
}
