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

	mu   sync.Mutex
	cmds []string
}

func (l *commandLog) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.DatabaseName != l.db {
			return
		}
		coll, _ := e.Command.Lookup(e.CommandName).StringValueOK()
		l.mu.Lock()
		l.cmds = append(l.cmds, e.CommandName+" "+coll)
		l.mu.Unlock()
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

// loggedStore is a Store on a fresh database whose commands log records.
func loggedStore(t *testing.T) (*Store, *commandLog) {
	t.Helper()
	log := &commandLog{db: uniqueDB(t)}
	c := newClient(t, log.monitor())
	dropOnCleanup(t, c, log.db)
	st, err := New(c, Options{Database: log.db})
	require.NoError(t, err)
	return st, log
}

// TestRoundTrips counts the commands each operation sends once the Store
// is warm (indexes made): the round-trip budget of the layout.
func TestRoundTrips(t *testing.T) {
	ctx := context.Background()
	st, log := loggedStore(t)
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
		updSess   = "update agent_sessions"
		deleteOld = "delete agent_messages"
	)
	// An append: reserve, insert (hidden), commit. A pop: read, read,
	// commit, apply.
	appendCmds := []string{reserve, insert, updSess}
	tests := []struct {
		name string
		op   func(t *testing.T)
		want []string
	}{
		{"append 20 items", func(t *testing.T) {
			require.NoError(t, s.AddItems(ctx, numbered("x", 20)))
		}, appendCmds},
		{"append to a new session", func(t *testing.T) {
			require.NoError(t, mustSession(t, st, "rt-new").AddItems(ctx, numbered("n", 3)))
		}, appendCmds},
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
		}, []string{readSess, readMsgs, updSess, updateMsg}},
		{"pop a session never written", func(t *testing.T) {
			_, ok, err := mustSession(t, st, "rt-none").PopItem(ctx)
			require.NoError(t, err)
			require.False(t, ok)
		}, []string{readSess}},
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

	t.Run("reads read the session document first", func(t *testing.T) {
		log.take()
		_, err := s.LatestItems(ctx, 50)
		require.NoError(t, err)
		_, _, err = s.PopItem(ctx)
		require.NoError(t, err)
		got := log.take()
		require.Equal(t, []string{readSess, readMsgs}, got[:2], "latest: the messages after the session document")
		require.Equal(t, []string{readSess, readMsgs}, got[2:4], "pop: likewise")
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
		{"append", func() error { return s.AddItems(ctx, numbered("b", 2)) }, 3},
		{"touch", func() error { return s.Touch(ctx) }, 1},
		{"expires in", func() error { _, _, err := s.ExpiresIn(ctx); return err }, 1},
		{"latest", func() error { _, err := s.LatestItems(ctx, 3); return err }, 2},
		{"pop", func() error { _, _, err := s.PopItem(ctx); return err }, 4},
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
			"update agent_sessions", "update agent_messages", "update agent_sessions"}, log.take())
		require.NoError(t, s.AddItems(ctx, numbered("d", 1)))
		require.Len(t, log.take(), 3)
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
