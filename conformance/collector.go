package conformance

import (
	"context"
	"sync"

	"github.com/agentsessions/sessions/session"
)

// Collector gathers corrupt-record reports per session, for harnesses that
// implement RawWriter: pass Collector.Handler as the adapter's OnCorrupt.
type Collector struct {
	mu      sync.Mutex
	reports map[string][]session.CorruptRecord
}

// Handler returns a session.CorruptHandler that records into c.
func (c *Collector) Handler() session.CorruptHandler {
	return func(_ context.Context, r session.CorruptRecord) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.reports == nil {
			c.reports = make(map[string][]session.CorruptRecord)
		}
		c.reports[r.SessionID] = append(c.reports[r.SessionID], r)
	}
}

// Reports returns the reports recorded for session id.
func (c *Collector) Reports(id string) []session.CorruptRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]session.CorruptRecord(nil), c.reports[id]...)
}
