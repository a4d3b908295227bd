package mongo

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// TestVersionedReplace: a version read, an append beside it, and the
// replace from that version fails with ErrHistoryChanged, writing nothing;
// from a fresh version it succeeds. Every kind of write moves the version.
func TestVersionedReplace(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	s := mustSession(t, st, "v")
	other := mustSession(t, st, "v")
	caps := session.Probe(s)
	require.True(t, caps.Has(session.CapVersionedReplace), "Probe reports versioned replace: %v", caps)

	v0, err := s.HistoryVersion(ctx)
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, numbered("a", 3)))
	v1, err := s.HistoryVersion(ctx)
	require.NoError(t, err)
	require.NotEqual(t, v0, v1, "an append changes the version")

	require.NoError(t, other.AddItems(ctx, numbered("b", 1)), "an append beside the rewrite")
	err = s.ReplaceItemsIf(ctx, v1, numbered("r", 1))
	require.ErrorIs(t, err, session.ErrHistoryChanged)
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, append(texts(numbered("a", 3)), texts(numbered("b", 1))...), texts(got), "nothing lost, nothing written")

	seen := map[string]bool{v0: true, v1: true}
	next := func(what string) string {
		v, err := s.HistoryVersion(ctx)
		require.NoError(t, err)
		require.False(t, seen[v], "%s gives a version never seen before", what)
		seen[v] = true
		return v
	}
	v2 := next("the append beside it")
	_, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	v3 := next("a pop")
	require.NotEqual(t, v2, v3)
	require.NoError(t, s.ReplaceItemsIf(ctx, v3, numbered("r", 2)))
	got, err = s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts(numbered("r", 2)), texts(got))
	v4 := next("a replace")
	require.NoError(t, s.Clear(ctx))
	next("a clear")
	require.ErrorIs(t, s.ReplaceItemsIf(ctx, v4, nil), session.ErrHistoryChanged, "a conditional clear from a stale version")
	require.ErrorIs(t, s.ReplaceItemsIf(ctx, "garbage", numbered("x", 1)), session.ErrHistoryChanged)

	fresh := mustSession(t, st, "never-written")
	vf, err := fresh.HistoryVersion(ctx)
	require.NoError(t, err)
	require.NoError(t, fresh.ReplaceItemsIf(ctx, vf, numbered("f", 1)), "a replace of a session never written")
	got, err = fresh.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts(numbered("f", 1)), texts(got))
}

// TestVersionedReplaceBesideAppends races ReplaceItemsIf against
// concurrent appends: each replace either fails with ErrHistoryChanged
// or wins, and an append begun after a winning replace returned is never
// lost.
func TestVersionedReplaceBesideAppends(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	s := mustSession(t, st, "race")
	require.NoError(t, s.AddItems(ctx, numbered("seed", 2)))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	type ack struct {
		item  string
		began time.Time
	}
	var appended []ack
	var mu sync.Mutex
	wg.Go(func() {
		w := mustSession(t, st, "race")
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			items := numbered(fmt.Sprintf("ap%d", i), 1)
			began := time.Now()
			if err := w.AddItems(ctx, items); err != nil {
				t.Errorf("append: %v", err)
				return
			}
			mu.Lock()
			appended = append(appended, ack{texts(items)[0], began})
			mu.Unlock()
			time.Sleep(40 * time.Millisecond) // leave the replaces a chance to win

		}
	})
	wins, losses := 0, 0
	var lastWin time.Time
	for range 10 {
		v, err := s.HistoryVersion(ctx)
		require.NoError(t, err)
		before, err := s.Items(ctx)
		require.NoError(t, err)
		err = s.ReplaceItemsIf(ctx, v, before[max(0, len(before)-2):])
		if err != nil {
			require.ErrorIs(t, err, session.ErrHistoryChanged)
			losses++
			continue
		}
		wins++
		lastWin = time.Now()
	}
	close(stop)
	wg.Wait()
	t.Logf("%d conditional replaces won, %d lost to concurrent appends", wins, losses)
	// Every item whose append began after the last winning replace
	// returned is still there: a replace never loses a later append.
	got, err := s.Items(ctx)
	require.NoError(t, err)
	have := map[string]bool{}
	for _, x := range texts(got) {
		have[x] = true
	}
	for _, a := range appended {
		if a.began.After(lastWin) {
			require.True(t, have[a.item], "append %s after the last replace lost", a.item)
		}
	}
}
