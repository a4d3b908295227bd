package main

import (
	"context"
	"sync"

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
