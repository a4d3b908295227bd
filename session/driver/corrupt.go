package driver

import (
	"context"
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
// slog.Default() when logger is nil) naming the session and position.
func LogCorrupt(logger *slog.Logger) CorruptHandler {
	return func(ctx context.Context, r CorruptRecord) {
		l := logger
		if l == nil {
			l = slog.Default()
		}
		l.WarnContext(ctx, "session: skipped a corrupt stored record",
			"session_id", r.SessionID, "position", r.Position, "bytes", len(r.Raw), "error", r.Err)
	}
}

// Report calls h, or LogCorrupt(nil) when h is nil.
func (h CorruptHandler) Report(ctx context.Context, r CorruptRecord) {
	if h == nil {
		h = LogCorrupt(nil)
	}
	h(ctx, r)
}
