package driver

import (
	"context"
	"encoding/base64"
	"log/slog"
)

// CorruptRecord describes a stored record that is not a JSON object. Reads
// skip such records (they never hide valid items) and report each one.
type CorruptRecord struct {
	SessionID string // the session the record belongs to
	Position  string // where it is stored, in the backend's terms (row id, list index, seq)
	Raw       []byte // the stored bytes, so nothing is lost by reporting
	Err       error  // why it could not be decoded
}

// CorruptHandler receives corrupt-record reports. It must be safe for
// concurrent use.
type CorruptHandler func(ctx context.Context, r CorruptRecord)

// LogCorrupt returns a CorruptHandler that logs a warning on logger (or
// slog.Default() when logger is nil) naming the session and position, and
// holding the record's bytes exactly, in base64 (raw_base64): the record
// stays in the store, and the log says what it holds.
func LogCorrupt(logger *slog.Logger) CorruptHandler {
	return func(ctx context.Context, r CorruptRecord) {
		l := logger
		if l == nil {
			l = slog.Default()
		}
		l.WarnContext(ctx, "session: unreadable stored record left in the store, not returned by reads",
			"session_id", r.SessionID, "position", r.Position, "bytes", len(r.Raw),
			"raw_base64", base64.StdEncoding.EncodeToString(r.Raw), "error", r.Err)
	}
}

// Report calls h, or LogCorrupt(nil) when h is nil.
func (h CorruptHandler) Report(ctx context.Context, r CorruptRecord) {
	if h == nil {
		h = LogCorrupt(nil)
	}
	h(ctx, r)
}
