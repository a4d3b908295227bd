package mongo

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/event"
)

// commandLog records the commands a client sends to one database, through
// the driver's CommandMonitor.
type commandLog struct {
	db string

	mu      sync.Mutex
	cmds    []string
	barrier *barrier
}

func (l *commandLog) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.DatabaseName != l.db {
			return
		}
		coll, _ := e.Command.Lookup(e.CommandName).StringValueOK()
		l.mu.Lock()
		l.cmds = append(l.cmds, e.CommandName+" "+coll)
		b := l.barrier
		l.mu.Unlock()
		if b != nil && e.CommandName == "find" {
			b.arrive()
		}
	}}
}

// take returns the commands recorded since the last take.
func (l *commandLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.cmds
	l.cmds = nil
	return out
}

// setBarrier makes every find command wait, in the monitor's Started hook
// (before it is sent), until n finds have started. A client that sent its
// finds one after the other would wait for the first's reply before
// starting the second, so the first would never be released: the barrier
// then times out and says so. Passing it proves the commands were in
// flight at the same time, without measuring any time.
func (l *commandLog) setBarrier(b *barrier) {
	l.mu.Lock()
	l.barrier = b
	l.mu.Unlock()
}

type barrier struct {
	n       int
	mu      sync.Mutex
	arrived int
	all     chan struct{}
	timeout bool
}

func newBarrier(n int) *barrier { return &barrier{n: n, all: make(chan struct{})} }

func (b *barrier) arrive() {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
	case <-time.After(10 * time.Second):
		b.mu.Lock()
		b.timeout = true
		b.mu.Unlock()
	}
}

func (b *barrier) timedOut() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.timeout
}

// TestRoundTrips counts the commands each operation sends once the Store
// is warm (indexes made): the round-trip budget of the layout.
func TestRoundTrips(t *testing.T) {
	ctx := context.Background()
	log := &commandLog{db: uniqueDB(t)}
	c := newClient(t, log.monitor())
	dropOnCleanup(t, c, log.db)
	st, err := New(c, Options{Database: log.db})
	require.NoError(t, err)
	s := mustSession(t, st, "rt")
	for b := range 50 {
		require.NoError(t, s.AddItems(ctx, numbered(fmt.Sprintf("b%d", b), 20)))
	}
	log.take()

	const (
		reserve   = "findAndModify agent_sessions"
		insert    = "insert agent_messages"
		readSess  = "find agent_sessions"
		readMsgs  = "find agent_messages"
		updateMsg = "update agent_messages"
		deleteOld = "delete agent_messages"
	)
	tests := []struct {
		name string
		op   func(t *testing.T)
		want []string
	}{
		{"append 20 items", func(t *testing.T) {
			require.NoError(t, s.AddItems(ctx, numbered("x", 20)))
		}, []string{reserve, insert}},
		{"append to a new session", func(t *testing.T) {
			require.NoError(t, mustSession(t, st, "rt-new").AddItems(ctx, numbered("n", 3)))
		}, []string{reserve, insert}},
		{"latest 50 of 1k", func(t *testing.T) {
			got, err := s.LatestItems(ctx, 50)
			require.NoError(t, err)
			require.Len(t, got, 50)
		}, []string{readSess, readMsgs}},
		{"latest 1", func(t *testing.T) {
			got, err := s.LatestItems(ctx, 1)
			require.NoError(t, err)
			require.Len(t, got, 1)
		}, []string{readSess, readMsgs}},
		{"all items", func(t *testing.T) {
			got, err := s.Items(ctx)
			require.NoError(t, err)
			require.Len(t, got, 1020)
		}, []string{readSess, readMsgs}},
		{"pop", func(t *testing.T) {
			_, ok, err := s.PopItem(ctx)
			require.NoError(t, err)
			require.True(t, ok)
		}, []string{readSess, readMsgs, updateMsg}},
		{"pop a session never written", func(t *testing.T) {
			_, ok, err := mustSession(t, st, "rt-none").PopItem(ctx)
			require.NoError(t, err)
			require.False(t, ok)
		}, []string{readSess, readMsgs}},
		{"clear", func(t *testing.T) {
			require.NoError(t, mustSession(t, st, "rt-new").Clear(ctx))
		}, []string{reserve, insert, deleteOld}},
		{"clear a session never written", func(t *testing.T) {
			require.NoError(t, mustSession(t, st, "rt-none").Clear(ctx))
		}, []string{reserve}},
		{"pop an emptied session", func(t *testing.T) {
			_, ok, err := mustSession(t, st, "rt-new").PopItem(ctx)
			require.NoError(t, err)
			require.False(t, ok)
		}, []string{readSess, readMsgs, readSess}},
		{"replace", func(t *testing.T) {
			require.NoError(t, mustSession(t, st, "rt-new").ReplaceItems(ctx, numbered("r", 4)))
		}, []string{reserve, insert, reserve, insert, deleteOld}},
		{"latest after a replace", func(t *testing.T) {
			got, err := mustSession(t, st, "rt-new").LatestItems(ctx, 2)
			require.NoError(t, err)
			require.Equal(t, texts(numbered("r", 4)[2:]), texts(got))
		}, []string{readSess, readMsgs}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log.take()
			tc.op(t)
			require.ElementsMatch(t, tc.want, log.take())
		})
	}

	t.Run("pop sends its two reads at once", func(t *testing.T) {
		b := newBarrier(2)
		log.setBarrier(b)
		defer log.setBarrier(nil)
		_, ok, err := s.PopItem(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.False(t, b.timedOut(), "the session and message reads must be in flight together (one round trip)")
	})

	t.Run("latest sends its two reads at once", func(t *testing.T) {
		b := newBarrier(2)
		log.setBarrier(b)
		defer log.setBarrier(nil)
		got, err := s.LatestItems(ctx, 50)
		require.NoError(t, err)
		require.Len(t, got, 50)
		require.False(t, b.timedOut(), "the session and message reads must be in flight together (one round trip)")
	})
}

// TestRoundTripsTTL counts the commands of the expiry calls.
func TestRoundTripsTTL(t *testing.T) {
	ctx := context.Background()
	log := &commandLog{db: uniqueDB(t)}
	c := newClient(t, log.monitor())
	dropOnCleanup(t, c, log.db)
	clock := newFakeClock()
	st, err := New(c, Options{Database: log.db, TTL: time.Hour, Now: clock.Now})
	require.NoError(t, err)
	s := mustSession(t, st, "ttl")
	require.NoError(t, s.AddItems(ctx, numbered("a", 2)))
	log.take()
	for _, tc := range []struct {
		name string
		op   func() error
		want int
	}{
		{"append", func() error { return s.AddItems(ctx, numbered("b", 2)) }, 2},
		{"touch", func() error { return s.Touch(ctx) }, 1},
		{"expires in", func() error { _, _, err := s.ExpiresIn(ctx); return err }, 1},
		{"latest", func() error { _, err := s.LatestItems(ctx, 3); return err }, 2},
		{"pop", func() error { _, _, err := s.PopItem(ctx); return err }, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log.take()
			require.NoError(t, tc.op())
			require.Len(t, log.take(), tc.want)
		})
	}
	t.Run("message expiry moves at most once per slack/2", func(t *testing.T) {
		clock.Advance(31 * time.Minute) // past slack/2 (slack is an hour)
		log.take()
		require.NoError(t, s.AddItems(ctx, numbered("c", 1)))
		require.Equal(t, []string{"findAndModify agent_sessions", "insert agent_messages",
			"update agent_messages", "update agent_sessions"}, log.take())
		require.NoError(t, s.AddItems(ctx, numbered("d", 1)))
		require.Len(t, log.take(), 2)
	})
}

// TestAllocationsFollowTheResult: a latest-n read allocates in proportion
// to the items it returns (its window), not to the history.
func TestAllocationsFollowTheResult(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	s := mustSession(t, st, "allocs")
	allocs := map[int]float64{}
	for round := range 3 {
		for b := range 50 {
			require.NoError(t, s.AddItems(ctx, numbered(fmt.Sprint(round, "-", b), 20)))
		}
		allocs[round] = testing.AllocsPerRun(5, func() {
			if _, err := s.LatestItems(ctx, 50); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Logf("latest-50 allocations at 1k, 2k, 3k items: %v, %v, %v", allocs[0], allocs[1], allocs[2])
	require.InDelta(t, allocs[0], allocs[2], allocs[0]*0.1, "tripling the history must not change a latest-50 read's allocations")
}
