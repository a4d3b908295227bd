package events_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/schema"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/all"
	"github.com/agentsessions/sessions/integrations/eino/events"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/session"
)

// counting passes every call to the session it wraps and counts what the
// Store reads: whole-history reads (Items) and the items ItemsSince returns.
type counting struct {
	session.Session
	mu        sync.Mutex
	wholeRead int
	sinceRead int // items returned by ItemsSince
	follows   int // ItemsSince calls
}

func (c *counting) Items(ctx context.Context) ([]session.Item, error) {
	c.mu.Lock()
	c.wholeRead++
	c.mu.Unlock()
	return c.Session.Items(ctx)
}

func (c *counting) ItemsSince(ctx context.Context, cursor session.Cursor) ([]session.Item, session.Cursor, error) {
	items, next, err := c.Session.(session.Follower).ItemsSince(ctx, cursor)
	c.mu.Lock()
	c.follows++
	c.sinceRead += len(items)
	c.mu.Unlock()
	return items, next, err
}

func (c *counting) AddItemsOnce(ctx context.Context, opID string, items []session.Item) (bool, error) {
	return c.Session.(session.OnceAppender).AddItemsOnce(ctx, opID, items)
}

func msgEvent(id, text string) *adk.SessionEvent[*schema.Message] {
	return &adk.SessionEvent[*schema.Message]{EventID: id, Kind: adk.SessionEventMessage, Message: schema.UserMessage(text)}
}

// TestReadsOnlyWhatIsNew: every append and every load reads from the
// session only what was appended since the Store's last read: over a
// session of n events, each item is read once, never the whole history,
// on SQLite (an index read) and on every networked backend.
func TestReadsOnlyWhatIsNew(t *testing.T) {
	ctx := context.Background()
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			st, err := adapters.Open(ctx, b.URL(t))
			require.NoError(t, err)
			defer st.Close()
			var c *counting
			store := events.NewFunc[*schema.Message](func(id string) (session.Session, error) {
				s, err := st.Session(id)
				if err != nil {
					return nil, err
				}
				require.Nil(t, c, "the Store opens a session once")
				c = &counting{Session: s}
				return c, nil
			}, events.Options{})
			n := 200
			if b.Slow {
				n = 60 // the Mongo-wire test server scans a collection per query
			}
			for i := range n {
				require.NoError(t, store.AppendEvents(ctx, "s", []*adk.SessionEvent[*schema.Message]{msgEvent(fmt.Sprint("e", i), "hello")}))
				res, err := store.LoadEvents(ctx, "s", &adk.LoadSessionEventsRequest{Reverse: true, Limit: 1})
				require.NoError(t, err)
				require.Equal(t, fmt.Sprint("e", i), res.Events[0].EventID)
			}
			res, err := store.LoadEvents(ctx, "s", nil)
			require.NoError(t, err)
			require.Len(t, res.Events, n)
			t.Logf("%s: %d appends and %d loads read %d items in %d ItemsSince calls and %d whole-history reads",
				b.Name, n, n+1, c.sinceRead, c.follows, c.wholeRead)
			require.Zero(t, c.wholeRead, "whole-history reads")
			require.Equal(t, n, c.sinceRead, "each item read once")
		})
	}
}

// TestFallbackReadsWholeHistory is the control: over a session without
// session.Follower, session.ReadSince reads the whole history on every
// call, which is what the counting above would catch.
func TestFallbackReadsWholeHistory(t *testing.T) {
	ctx := context.Background()
	st, err := adapters.Open(ctx, "memory://")
	require.NoError(t, err)
	defer st.Close()
	var c *counting
	store := events.NewFunc[*schema.Message](func(id string) (session.Session, error) {
		s, err := st.Session(id)
		c = &counting{Session: plainSession{s}}
		return struct{ session.Session }{c}, err // Items counted, no ItemsSince
	}, events.Options{})
	for i := range 5 {
		require.NoError(t, store.AppendEvents(ctx, "s", []*adk.SessionEvent[*schema.Message]{msgEvent(fmt.Sprint("e", i), "x")}))
	}
	require.Equal(t, 5, c.wholeRead, "one whole read per append without a Follower")
}

// TestSharedAcrossStores: two Stores (two processes) over one SQLite file
// see each other's events, refuse each other's ids, and a replay of a batch
// that landed succeeds without writing it twice.
func TestSharedAcrossStores(t *testing.T) {
	ctx := context.Background()
	u := "sqlite://" + t.TempDir() + "/s.db"
	open := func() *events.Store[*schema.Message] {
		st, err := adapters.Open(ctx, u)
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		s, err := events.New[*schema.Message](st, events.Options{Prefix: "p:"})
		require.NoError(t, err)
		return s
	}
	a, b := open(), open()
	batch := []*adk.SessionEvent[*schema.Message]{msgEvent("e1", "one"), msgEvent("e2", "two")}
	require.NoError(t, a.AppendEvents(ctx, "conv", batch))
	_, err := b.LoadEvents(ctx, "conv", nil) // b has read the log
	require.NoError(t, err)

	// A replay of the same batch, by either store: no error, nothing written.
	require.NoError(t, a.AppendEvents(ctx, "conv", []*adk.SessionEvent[*schema.Message]{msgEvent("e1", "one"), msgEvent("e2", "two")}))
	require.NoError(t, b.AppendEvents(ctx, "conv", []*adk.SessionEvent[*schema.Message]{msgEvent("e1", "one"), msgEvent("e2", "two")}))
	// Another event under a stored id, or a batch partly stored: refused.
	require.ErrorIs(t, b.AppendEvents(ctx, "conv", []*adk.SessionEvent[*schema.Message]{msgEvent("e2", "other")}), adk.ErrDuplicateEventID)
	require.ErrorIs(t, b.AppendEvents(ctx, "conv", []*adk.SessionEvent[*schema.Message]{msgEvent("e3", "three"), msgEvent("e1", "one")}), adk.ErrDuplicateEventID)
	require.NoError(t, b.AppendEvents(ctx, "conv", []*adk.SessionEvent[*schema.Message]{msgEvent("e3", "three")}))

	res, err := a.LoadEvents(ctx, "conv", &adk.LoadSessionEventsRequest{After: "e1"})
	require.NoError(t, err)
	require.Equal(t, []string{"e2", "e3"}, ids(res.Events))

	st, err := adapters.Open(ctx, u)
	require.NoError(t, err)
	defer st.Close()
	s, err := st.Session("p:conv")
	require.NoError(t, err)
	items, err := session.All(ctx, s)
	require.NoError(t, err)
	require.Len(t, items, 3, "the session holds each event once")
	for _, it := range items {
		require.Equal(t, events.ItemType, it.Type())
	}
}

func ids(evs []*adk.SessionEvent[*schema.Message]) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.EventID
	}
	return out
}

// TestHistoryRewritten: a pop below what a Store read loses its cursor;
// the Store reads the session again and serves what it holds now.
func TestHistoryRewritten(t *testing.T) {
	ctx := context.Background()
	st, err := adapters.Open(ctx, "sqlite://"+t.TempDir()+"/s.db")
	require.NoError(t, err)
	defer st.Close()
	store, err := events.New[*schema.Message](st, events.Options{})
	require.NoError(t, err)
	require.NoError(t, store.AppendEvents(ctx, "c", []*adk.SessionEvent[*schema.Message]{msgEvent("a", "1"), msgEvent("b", "2")}))
	require.NoError(t, store.AppendEvents(ctx, "c", []*adk.SessionEvent[*schema.Message]{msgEvent("c", "3")}))
	_, err = store.LoadEvents(ctx, "c", nil)
	require.NoError(t, err)

	s, err := st.Session("c")
	require.NoError(t, err)
	for range 2 {
		_, ok, err := session.Pop(ctx, s)
		require.NoError(t, err)
		require.True(t, ok)
	}

	res, err := store.LoadEvents(ctx, "c", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, ids(res.Events))
	_, err = store.LoadEvents(ctx, "c", &adk.LoadSessionEventsRequest{After: "b"})
	require.ErrorIs(t, err, adk.ErrEventIDOutOfRange)

	// "c" led a batch, so its operation id is kept: another event under
	// it is refused, though the event is gone. "b" did not lead one: it
	// is not in the log any more, so it may be appended again.
	err = store.AppendEvents(ctx, "c", []*adk.SessionEvent[*schema.Message]{msgEvent("c", "again")})
	require.ErrorIs(t, err, adk.ErrDuplicateEventID)
	t.Logf("re-append of a popped batch's lead id: %v", err)
	require.NoError(t, store.AppendEvents(ctx, "c", []*adk.SessionEvent[*schema.Message]{msgEvent("b", "again")}))
	res, err = store.LoadEvents(ctx, "c", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, ids(res.Events))
	require.Equal(t, "again", res.Events[1].Message.Content)
}

// TestForeignItem: an item this package did not write fails the read with
// a *CorruptEventError naming its position, not its content; the events
// before it are not lost from the store, and the session keeps the item.
func TestForeignItem(t *testing.T) {
	ctx := context.Background()
	st, err := adapters.Open(ctx, "memory://")
	require.NoError(t, err)
	defer st.Close()
	store, err := events.New[*schema.Message](st, events.Options{})
	require.NoError(t, err)
	require.NoError(t, store.AppendEvents(ctx, "c", []*adk.SessionEvent[*schema.Message]{msgEvent("a", "1")}))
	s, err := st.Session("c")
	require.NoError(t, err)
	require.NoError(t, session.Append(ctx, s, []session.Item{session.MustItem(`{"role":"user","content":"secret-token-123"}`)}))

	_, err = store.LoadEvents(ctx, "c", nil)
	require.ErrorIs(t, err, events.ErrCorruptEvent)
	var ce *events.CorruptEventError
	require.True(t, errors.As(err, &ce))
	require.Equal(t, 1, ce.Index)
	require.Equal(t, "c", ce.SessionID)
	require.NotContains(t, err.Error(), "secret-token-123")
	t.Logf("foreign item: %v", err)
	err = store.AppendEvents(ctx, "c", []*adk.SessionEvent[*schema.Message]{msgEvent("b", "2")})
	require.ErrorIs(t, err, events.ErrCorruptEvent, "no append on a log it cannot read")
	items, err := session.All(ctx, s)
	require.NoError(t, err)
	require.Len(t, items, 2)
}

// lossy wraps a session whose AddItemsOnce commits and then reports
// session.ErrOutcomeUnknown, as a reply lost on the wire does.
type lossy struct {
	session.Session
	mu    sync.Mutex
	lose  int // replies still to lose
	calls int
}

func (l *lossy) ItemsSince(ctx context.Context, c session.Cursor) ([]session.Item, session.Cursor, error) {
	return l.Session.(session.Follower).ItemsSince(ctx, c)
}

func (l *lossy) AddItemsOnce(ctx context.Context, opID string, items []session.Item) (bool, error) {
	ok, err := l.Session.(session.OnceAppender).AddItemsOnce(ctx, opID, items)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if err == nil && l.lose > 0 {
		l.lose--
		return false, fmt.Errorf("reply lost: %w", session.ErrOutcomeUnknown)
	}
	return ok, err
}

// TestLostReplyLandsOnce: an append whose reply is lost after it committed
// is retried under the same operation id and lands once; with retries
// off, the caller gets session.ErrOutcomeUnknown and its own retry (eino's
// persister re-sends the same events) succeeds without a second copy.
func TestLostReplyLandsOnce(t *testing.T) {
	ctx := context.Background()
	for _, retries := range []int{0, -1} {
		t.Run(fmt.Sprint("retries=", retries), func(t *testing.T) {
			st, err := adapters.Open(ctx, "memory://")
			require.NoError(t, err)
			defer st.Close()
			var l *lossy
			store := events.NewFunc[*schema.Message](func(id string) (session.Session, error) {
				s, err := st.Session(id)
				l = &lossy{Session: s, lose: 1}
				return l, err
			}, events.Options{Retries: retries})
			batch := func() []*adk.SessionEvent[*schema.Message] {
				return []*adk.SessionEvent[*schema.Message]{msgEvent("x1", "a"), msgEvent("x2", "b")}
			}
			err = store.AppendEvents(ctx, "c", batch())
			if retries < 0 {
				require.ErrorIs(t, err, session.ErrOutcomeUnknown)
				require.NoError(t, store.AppendEvents(ctx, "c", batch()), "the caller's replay")
			} else {
				require.NoError(t, err)
			}
			res, err := store.LoadEvents(ctx, "c", nil)
			require.NoError(t, err)
			require.Equal(t, []string{"x1", "x2"}, ids(res.Events))
			s, _ := st.Session("c")
			items, err := session.All(ctx, s)
			require.NoError(t, err)
			require.Len(t, items, 2, "landed once")
			t.Logf("retries=%d: %d AddItemsOnce calls, %d items stored", retries, l.calls, len(items))
		})
	}
}

// TestBadInput: what AppendEvents refuses, it refuses before writing.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	st, err := adapters.Open(ctx, "memory://")
	require.NoError(t, err)
	defer st.Close()
	store, err := events.New[*schema.Message](st, events.Options{})
	require.NoError(t, err)
	_, err = events.New[*schema.Message](nil, events.Options{})
	require.Error(t, err)

	for name, batch := range map[string][]*adk.SessionEvent[*schema.Message]{
		"nil event":      {msgEvent("a", "1"), nil},
		"empty id":       {msgEvent("a", "1"), {Kind: adk.SessionEventMessage, Message: schema.UserMessage("x")}},
		"two payloads":   {{EventID: "a", Message: schema.UserMessage("x"), Cancel: &adk.CancelEvent{}}},
		"unknown kind":   {{EventID: "a", Kind: "no-such-kind", Message: schema.UserMessage("x")}},
		"kind mismatch":  {{EventID: "a", Kind: adk.SessionEventCancel, Message: schema.UserMessage("x")}},
		"duplicate pair": {msgEvent("a", "1"), msgEvent("a", "1")},
	} {
		err := store.AppendEvents(ctx, "c", batch)
		require.Error(t, err, name)
		t.Logf("%s: %v", name, err)
	}
	_, err = store.LoadEvents(ctx, "", nil)
	require.ErrorIs(t, err, session.ErrInvalidSessionID)
	s, _ := st.Session("c")
	items, err := session.All(ctx, s)
	require.NoError(t, err)
	require.Empty(t, items, "nothing written")
	require.True(t, strings.HasPrefix(events.OpIDPrefix, "eino."))
}

// TestMaxSessions: a Store keeps at most MaxSessions logs in memory; a
// dropped one is read again, whole, when it is used again.
func TestMaxSessions(t *testing.T) {
	ctx := context.Background()
	st, err := adapters.Open(ctx, "memory://")
	require.NoError(t, err)
	defer st.Close()
	opened := map[string]int{}
	var mu sync.Mutex
	store := events.NewFunc[*schema.Message](func(id string) (session.Session, error) {
		mu.Lock()
		opened[id]++
		mu.Unlock()
		return st.Session(id)
	}, events.Options{MaxSessions: 2})
	for _, id := range []string{"a", "b", "a", "c", "a", "b"} {
		_, err := store.LoadEvents(ctx, id, nil)
		require.NoError(t, err)
	}
	require.Equal(t, map[string]int{"a": 1, "b": 2, "c": 1}, opened)
}

// TestConcurrent: goroutines of one Store, and two Stores over one SQLite
// file (two processes), append to one session and read it at once; each
// event is stored once and every reader sees a prefix of the final log.
func TestConcurrent(t *testing.T) {
	ctx := context.Background()
	u := "sqlite://" + t.TempDir() + "/s.db"
	var stores []*events.Store[*schema.Message]
	for range 2 {
		st, err := adapters.Open(ctx, u)
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		s, err := events.New[*schema.Message](st, events.Options{})
		require.NoError(t, err)
		stores = append(stores, s)
	}
	const writers, each = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, writers*each*2)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[w%2]
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				errs <- s.AppendEvents(ctx, "c", []*adk.SessionEvent[*schema.Message]{msgEvent(id+"a", "x"), msgEvent(id+"b", "y")})
				res, err := s.LoadEvents(ctx, "c", nil)
				if err == nil && !containsID(res.Events, id+"a") {
					err = fmt.Errorf("%s not read back by its writer", id)
				}
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, s := range stores {
		res, err := s.LoadEvents(ctx, "c", nil)
		require.NoError(t, err)
		require.Len(t, res.Events, writers*each*2)
		seen := map[string]bool{}
		for i, e := range res.Events {
			require.False(t, seen[e.EventID], "event %s stored twice", e.EventID)
			seen[e.EventID] = true
			if strings.HasSuffix(e.EventID, "b") {
				require.Equal(t, strings.TrimSuffix(e.EventID, "b")+"a", res.Events[i-1].EventID, "a batch stays together")
			}
		}
	}
}

func containsID(evs []*adk.SessionEvent[*schema.Message], id string) bool {
	for _, e := range evs {
		if e.EventID == id {
			return true
		}
	}
	return false
}
