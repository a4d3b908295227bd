package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/agentsessions/sessions/session/driver"
)

// corruptReports gathers a store's corrupt-record reports per session, for
// the commands that print them and for check's corrupt-record clause.
type corruptReports struct {
	mu      sync.Mutex
	reports map[string][]driver.CorruptRecord
}

// Handler returns the driver.CorruptHandler to open the store with.
func (c *corruptReports) Handler() driver.CorruptHandler {
	return func(_ context.Context, r driver.CorruptRecord) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.reports == nil {
			c.reports = make(map[string][]driver.CorruptRecord)
		}
		c.reports[r.SessionID] = append(c.reports[r.SessionID], r)
	}
}

// Reports returns the reports made about session id.
func (c *corruptReports) Reports(id string) []driver.CorruptRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]driver.CorruptRecord(nil), c.reports[id]...)
}

// Reset forgets the reports about session id, before it is read again.
func (c *corruptReports) Reset(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.reports, id)
}

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
