package runstate_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// countingSession is an SQLite session that counts its reads.
type countingSession struct {
	*sqlite.Session
	reads int
}

func (c *countingSession) Items(ctx context.Context) ([]session.Item, error) {
	c.reads++
	return c.Session.Items(ctx)
}

func (c *countingSession) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	c.reads++
	return c.Session.LatestItems(ctx, n)
}

// TestAtomicTurnReadsNothing: where the checkpoint commits with the
// append (SQLite's AppendWithCheckpoint), a turn whose outputs follow
// their calls in the batch reads nothing from the session: no tail is
// read for digests, and the stored checkpoint holds no pending write.
// Through a session without the capability, the same turns read the tail
// (the digest protocol), which the count confirms it detects.
func TestAtomicTurnReadsNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func(name string) *countingSession {
		st, err := sqlite.OpenFile(ctx, filepath.Join(dir, name+".db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		s, err := st.Session("s")
		if err != nil {
			t.Fatal(err)
		}
		return &countingSession{Session: s}
	}
	atomic := open("atomic")
	r, err := runstate.Open(ctx, atomic, runstate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	atomic.reads = 0
	for i := range 3 {
		if err := r.Turn(ctx, "", turnItems(i)...); err != nil {
			t.Fatal(err)
		}
	}
	if atomic.reads != 0 {
		t.Errorf("atomic turns read the session %d times, want 0", atomic.reads)
	}
	if r.Checkpoint().Pending != nil {
		t.Errorf("pending write left on the checkpoint: %+v", r.Checkpoint().Pending)
	}
	got, err := atomic.Session.Items(ctx)
	if err != nil || len(got) != 60 {
		t.Fatalf("Items: %d, %v; want 60", len(got), err)
	}

	digest := open("digest")
	rd, err := runstate.Open(ctx, latestOnly{digest}, runstate.Options{Store: digest.Session})
	if err != nil {
		t.Fatal(err)
	}
	digest.reads = 0
	if err := rd.Turn(ctx, "", turnItems(0)...); err != nil {
		t.Fatal(err)
	}
	if digest.reads == 0 {
		t.Error("the digest protocol's turn read nothing: the count misses reads")
	}
}
