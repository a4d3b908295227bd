package main

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/agentsessions/sessions/session/driver"
)

// corruptJSON is a corrupt record as the -json outputs and repair's backup
// write it: the raw bytes exactly, in base64 always and as text too when
// they are valid UTF-8 (never with U+FFFD in place of a byte).
type corruptJSON struct {
	SessionID string `json:"session_id"`
	Position  string `json:"position"`
	Bytes     int    `json:"bytes"`
	RawBase64 string `json:"raw_base64"`
	RawText   string `json:"raw_text,omitempty"`
	Error     string `json:"error"`
}

func toCorruptJSON(r driver.CorruptRecord) corruptJSON {
	c := corruptJSON{SessionID: r.SessionID, Position: r.Position, Bytes: len(r.Raw),
		RawBase64: base64.StdEncoding.EncodeToString(r.Raw), Error: fmt.Sprint(r.Err)}
	if utf8.Valid(r.Raw) {
		c.RawText = string(r.Raw)
	}
	return c
}

func toCorruptJSONs(rs []driver.CorruptRecord) []corruptJSON {
	out := make([]corruptJSON, len(rs))
	for i, r := range rs {
		out[i] = toCorruptJSON(r)
	}
	return out
}

// quoteRaw writes raw bytes for a terminal: a Go-quoted string, which is
// exact (an invalid byte is \xNN, never U+FFFD) and escapes every control
// character, cut to width characters (0: whole).
func quoteRaw(raw []byte, width int) string {
	q := strconv.Quote(string(raw))
	if width > 0 && len(q) > width {
		return q[:width] + "… (whole: -json)"
	}
	return q
}
