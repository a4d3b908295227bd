package session

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// The cursors ReadSince returns for a session that is not a Follower:
// "h1:<items read>:<digest of them>".
const fallbackPrefix = "h1:"

func fallbackCursor(items []Item) Cursor {
	return Cursor(fallbackPrefix + strconv.Itoa(len(items)) + ":" + fallbackSum(items))
}

func fallbackSum(items []Item) string {
	h := sha256.New()
	var n [8]byte
	for _, it := range items {
		b := it.bytesOf()
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func parseFallbackCursor(c Cursor) (int, string, error) {
	if c == "" {
		return 0, fallbackSum(nil), nil
	}
	rest, ok := strings.CutPrefix(string(c), fallbackPrefix)
	count, sum, ok2 := strings.Cut(rest, ":")
	n, err := strconv.Atoi(count)
	// Only the spelling fallbackCursor writes: no sign or leading zero, a
	// digest of 32 lower-case hex digits.
	if !ok || !ok2 || err != nil || n < 0 || count != strconv.Itoa(n) || len(sum) != 32 || strings.Trim(sum, "0123456789abcdef") != "" {
		return 0, "", fmt.Errorf("%w: %q is not a cursor ReadSince returned", ErrInvalidCursor, string(c))
	}
	return n, sum, nil
}
