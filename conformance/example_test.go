package conformance_test

import (
	"context"
	"fmt"
	"time"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/memory" // registers memory://
	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// storeHarness is a Harness over stores opened from a URL, with the two
// optional hooks: raw writes and corrupt reports for the corrupt-record
// clause (driver.RawAppender, conformance.CorruptReporter), TTL sessions
// (conformance.TTLHarness) and a closed store (conformance.Closer).
type storeHarness struct {
	url     string
	store   adapters.Store
	corrupt *driver.CorruptLog
}

func (h storeHarness) Name() string { return h.url }
func (h storeHarness) Open(_ context.Context, id string) (session.Session, error) {
	return h.store.Session(id)
}
func (h storeHarness) OpenPeer(ctx context.Context, id string) (session.Session, error) {
	return h.Open(ctx, id) // memory:// lives in this process: no second client
}
func (h storeHarness) Declared() session.Capabilities { return h.store.Declared() }

func (h storeHarness) AppendRaw(ctx context.Context, id string, raw []byte) error {
	return h.store.(driver.RawAppender).AppendRaw(ctx, id, raw)
}
func (h storeHarness) CorruptReports(id string) []driver.CorruptRecord {
	return h.corrupt.Reports(id)
}

func (h storeHarness) OpenTTL(ctx context.Context, id string, ttl time.Duration) (session.Session, error) {
	st, err := adapters.Open(ctx, h.url+"?ttl="+ttl.String())
	if err != nil {
		return nil, err
	}
	return st.Session(id)
}

// OpenClosed opens a store of its own from the URL and closes it
// (conformance.Closer).
func (h storeHarness) OpenClosed(ctx context.Context, id string) (session.Session, error) {
	st, err := adapters.Open(ctx, h.url)
	if err != nil {
		return nil, err
	}
	s, err := st.Session(id)
	if err != nil {
		return nil, err
	}
	return s, st.Close()
}

func (h storeHarness) Advance(d time.Duration) { time.Sleep(d) }
func (h storeHarness) MinTTL() time.Duration   { return 20 * time.Millisecond }

// Check grades a store part by part. An adapter's own test calls
// conformance.Run(t, h, conformance.Options{}) instead, which runs the same
// clauses as subtests.
func Example() {
	ctx := context.Background()
	corrupt := &driver.CorruptLog{}
	st, err := adapters.OpenWith(ctx, "memory://", adapters.Options{OnCorrupt: corrupt.Handler()})
	if err != nil {
		panic(err)
	}
	defer st.Close()

	rep := conformance.Check(ctx, storeHarness{"memory://", st, corrupt}, conformance.Options{})
	for _, p := range rep.Parts {
		fmt.Printf("%s: %s, %d passed, %d failed, %d skipped of %d\n", p.Name, p.Level, p.Passed, p.Failed, p.Skipped, p.Total)
	}
	fmt.Println("level", rep.Level)
	// Output:
	// contract: FULL, 41 passed, 0 failed, 1 skipped of 42
	// contract (capabilities hidden): BASE, 20 passed, 0 failed, 22 skipped of 42
	// held-write: FULL, 144 passed, 0 failed, 0 skipped of 144
	// level FULL
}
