package conformance

import (
	"context"
	"sync"

	"github.com/agentsessions/sessions/session/driver"
)

// Collector gathers an adapter's corrupt-record reports per session, for
// harnesses: pass Collector.Handler as the adapter's OnCorrupt, and answer
// CorruptReports with Collector.Reports. The zero value is ready to use.
type Collector struct {
	mu      sync.Mutex
	reports map[string][]driver.CorruptRecord
}

// Handler returns a driver.CorruptHandler that records into c.
func (c *Collector) Handler() driver.CorruptHandler {
	return func(_ context.Context, r driver.CorruptRecord) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.reports == nil {
			c.reports = make(map[string][]driver.CorruptRecord)
		}
		c.reports[r.SessionID] = append(c.reports[r.SessionID], r)
	}
}

// Reports returns the reports recorded for session id.
func (c *Collector) Reports(id string) []driver.CorruptRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]driver.CorruptRecord(nil), c.reports[id]...)
}
