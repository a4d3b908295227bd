package driver

import (
	"context"
	"sync"
)

// CorruptLog gathers a store's corrupt-record reports per session: pass its
// Handler as the store's OnCorrupt, then ask Reports about a session after
// reading it (a tool that prints what it found, a conformance harness). The
// zero value is ready to use; it is safe for concurrent use.
type CorruptLog struct {
	mu      sync.Mutex
	reports map[string][]CorruptRecord
}

// Handler returns a CorruptHandler that records into l.
func (l *CorruptLog) Handler() CorruptHandler {
	return func(_ context.Context, r CorruptRecord) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.reports == nil {
			l.reports = make(map[string][]CorruptRecord)
		}
		l.reports[r.SessionID] = append(l.reports[r.SessionID], r)
	}
}

// Reports returns the reports recorded about session id.
func (l *CorruptLog) Reports(id string) []CorruptRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]CorruptRecord(nil), l.reports[id]...)
}

// Reset forgets the reports about session id, before it is read again.
func (l *CorruptLog) Reset(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.reports, id)
}
