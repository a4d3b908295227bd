package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// scanPrefix returns every key under prefix, sorted, on every primary.
func scanPrefix(t *testing.T, c goredis.UniversalClient, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	scan := func(c goredis.UniversalClient) error {
		it := c.Scan(ctx, 0, globEscape(prefix)+":*", 1000).Iterator()
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		return it.Err()
	}
	if cc, ok := c.(*goredis.ClusterClient); ok {
		var mu sync.Mutex // ForEachMaster runs on every primary at once
		require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return scan(m)
		}))
	} else {
		require.NoError(t, scan(c))
	}
	slices.Sort(keys)
	return keys
}

// withoutVictim returns the keys that do not name the session "victim".
func withoutVictim(keys []string) []string {
	var out []string
	for _, k := range keys {
		if !strings.Contains(k, "victim") {
			out = append(out, k)
		}
	}
	return out
}

// TestRemoveSessionLeavesNoKey pops items from a session in every way
// that writes a pop record (the pop script, the second script for a
// record the server is not sure of, a retry with a token, RecoverPop's
// fence), with and without lost replies, clears it (which keeps the
// records), pops again, and removes it: a SCAN of the test's prefix then
// finds no key of the session, and every key of another session as it
// was. On a standalone server and a cluster (native layout) and on a
// standalone server in the Python layout, with and without a TTL.
func TestRemoveSessionLeavesNoKey(t *testing.T) {
	ctx := context.Background()
	for _, dep := range []string{"standalone", "cluster"} {
		t.Run(dep, func(t *testing.T) {
			d := newLostDeployment(t, dep)
			for _, layout := range []Layout{LayoutNative, LayoutPython} {
				if layout == LayoutPython && d.sharded {
					continue // refused on a cluster
				}
				for _, ttl := range []time.Duration{0, time.Hour} {
					lname := map[Layout]string{LayoutNative: "native", LayoutPython: "python"}[layout]
					t.Run(fmt.Sprintf("%s/ttl=%v", lname, ttl), func(t *testing.T) {
						opts := Options{KeyPrefix: uniquePrefix(t), Layout: layout, TTL: ttl}
						st := newStore(t, d.proxied, opts)
						direct := newStore(t, d.direct, opts)
						require.NoError(t, direct.LoadScripts(ctx)) // the lost reply is the script's own
						removeSessionLeavesNoKey(t, d, st, direct)
					})
				}
			}
		})
	}
}

func removeSessionLeavesNoKey(t *testing.T, d *lostDeployment, st, direct *Store) {
	ctx := context.Background()
	prefix := st.opts.KeyPrefix
	s, err := st.Session("victim")
	require.NoError(t, err)
	other, err := st.Session("bystander")
	require.NoError(t, err)

	items := make([]session.Item, 8)
	for i := range items {
		items[i] = session.MustItem(fmt.Sprintf(`{"n":%d}`, i))
	}
	require.NoError(t, s.AddItems(ctx, items))
	require.NoError(t, other.AddItems(ctx, items[:3]))
	_, ok, err := other.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)

	// lose loses the reply of the first request that runs one of
	// scripts on the session, runs call, and returns its error.
	lose := func(call func() error, scripts ...*script) error {
		n0 := d.arm(scriptMatch(scripts...)(s))
		err := call()
		require.Equal(t, int64(1), d.disarm()-n0, "one reply lost")
		require.ErrorIs(t, err, session.ErrOutcomeUnknown)
		return err
	}
	popLost := func(scripts ...*script) {
		var popErr error
		_ = lose(func() error { _, _, popErr = s.PopItem(ctx); return popErr }, scripts...)
		var pe *PopUnknownError
		require.ErrorAs(t, popErr, &pe)
		_, ok, err := s.RecoverPop(ctx, pe.Token)
		require.NoError(t, err)
		require.True(t, ok, "the lost pop removed an item")
	}

	// Plain pops, and a retry with a token.
	for range 2 {
		_, ok, err := s.PopItem(ctx)
		require.NoError(t, err)
		require.True(t, ok)
	}
	tok := NewPopToken()
	for range 2 {
		_, ok, err := s.PopItemWithToken(ctx, tok)
		require.NoError(t, err)
		require.True(t, ok)
	}
	// A lost reply of the pop script, and of the second script.
	popLost(popScript, nativePopScript)
	require.NoError(t, s.AddItems(ctx, []session.Item{lostUnsure}))
	popLost(popIfScript, nativePopIfScript)
	// RecoverPop's fence, once with its reply lost.
	_, ok, err = s.RecoverPop(ctx, NewPopToken())
	require.NoError(t, err)
	require.False(t, ok)
	_ = lose(func() error { _, _, err := s.RecoverPop(ctx, NewPopToken()); return err }, recoverPopScript)

	// Clear keeps the records and their index: a pop lost before it can
	// still be recovered.
	before := scanPrefix(t, d.direct, prefix)
	var records []string
	for _, k := range before {
		if strings.Contains(k, "victim") && strings.Contains(k, popRecordPart) {
			records = append(records, k)
		}
	}
	require.Len(t, records, 7, "two pops, a token's, two lost pops, a fence and a lost fence: %v", records)
	require.Contains(t, before, s.pops)
	require.NoError(t, s.Clear(ctx))
	for _, k := range append(records, s.pops) {
		require.Contains(t, scanPrefix(t, d.direct, prefix), k, "Clear keeps the pop records and their index")
	}
	it, ok, err := s.PopItemWithToken(ctx, tok)
	require.NoError(t, err)
	require.True(t, ok, "the token's record survives Clear")
	require.Equal(t, items[5].String(), it.String())

	// Pop again after the Clear, then remove the session, its reply lost
	// once (it ran), then again.
	require.NoError(t, s.AddItems(ctx, items[:2]))
	_, ok, err = s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	before = scanPrefix(t, d.direct, prefix)
	keep := withoutVictim(before)
	require.NotEmpty(t, keep, "the bystander's keys")
	require.Greater(t, len(before), len(keep))
	dumps := func(keys []string) map[string]string {
		out := map[string]string{}
		for _, k := range keys {
			v, err := d.direct.Dump(ctx, k).Result()
			require.NoError(t, err, k)
			out[k] = v
		}
		return out
	}
	kept := dumps(keep)
	n0 := d.arm(func(req []byte) bool { // the MULTI/DEL/EXEC
		return strings.Contains(string(req), "victim") && strings.Contains(string(req), "\r\nexec\r\n")
	})
	err = st.RemoveSession(ctx, "victim")
	require.Equal(t, int64(1), d.disarm()-n0)
	require.ErrorIs(t, err, session.ErrOutcomeUnknown)
	require.Equal(t, keep, scanPrefix(t, d.direct, prefix), "RemoveSession leaves no key of the session")
	require.NoError(t, st.RemoveSession(ctx, "victim"))
	require.Equal(t, keep, scanPrefix(t, d.direct, prefix))
	require.Equal(t, kept, dumps(keep), "the other session's keys are as they were")

	// The other session's record is still there, and goes with it.
	require.NoError(t, direct.RemoveSession(ctx, "bystander"))
	require.Empty(t, scanPrefix(t, d.direct, prefix), "RemoveSession leaves no key of the session")
}

// TestPopIndex: each pop indexes its record, scored with its expiry, and
// drops the entries already expired; the index expires no sooner than
// its records; RemoveSession deletes only the index's members that are
// the session's pop record keys, and an index of another type goes like
// any key.
func TestPopIndex(t *testing.T) {
	ctx := context.Background()
	for name, mk := range bothClients {
		t.Run(name, func(t *testing.T) {
			c := mk(t)
			layouts := []Layout{LayoutNative, LayoutPython}
			if name == "cluster" {
				layouts = layouts[:1]
			}
			for _, layout := range layouts {
				st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), Layout: layout})
				s, err := st.Session("idx")
				require.NoError(t, err)
				require.NoError(t, s.AddItems(ctx, lostBase))

				// A stale entry (expired long ago), and a member that is no
				// record key of the session, in the session's slot.
				stale := s.popRecordKey(NewPopToken())
				foreign := s.pops + ":not-a-record"
				require.NoError(t, c.ZAdd(ctx, s.pops, goredis.Z{Score: 1, Member: stale}).Err())
				require.NoError(t, c.Set(ctx, foreign, "keep", 0).Err())
				t.Cleanup(func() { c.Del(context.Background(), foreign) })

				tok := NewPopToken()
				_, ok, err := s.PopItemWithToken(ctx, tok)
				require.NoError(t, err)
				require.True(t, ok)
				members, err := c.ZRange(ctx, s.pops, 0, -1).Result()
				require.NoError(t, err)
				require.Equal(t, []string{s.popRecordKey(tok)}, members, "the pop indexed its record and dropped the stale entry")
				idxTTL, err := c.PTTL(ctx, s.pops).Result()
				require.NoError(t, err)
				recTTL, err := c.PTTL(ctx, s.popRecordKey(tok)).Result()
				require.NoError(t, err)
				require.Positive(t, recTTL)
				require.GreaterOrEqual(t, idxTTL, recTTL, "the index outlives its record")
				require.LessOrEqual(t, idxTTL, PopRecordTTL)

				require.NoError(t, c.ZAdd(ctx, s.pops, goredis.Z{Score: 1e15, Member: foreign}).Err())
				require.NoError(t, st.RemoveSession(ctx, "idx"))
				n, err := c.Exists(ctx, append(s.all, s.pops, s.popRecordKey(tok))...).Result()
				require.NoError(t, err)
				require.Zero(t, n)
				v, err := c.Get(ctx, foreign).Result()
				require.NoError(t, err, "a member that is no record key of the session is left alone")
				require.Equal(t, "keep", v)

				// An index of another type: a pop fails with nothing
				// written (a plain error), RemoveSession deletes it.
				require.NoError(t, s.AddItems(ctx, lostBase))
				require.NoError(t, c.Set(ctx, s.pops, "x", 0).Err())
				_, ok, err = s.PopItem(ctx)
				require.Error(t, err)
				require.False(t, ok)
				require.False(t, errors.Is(err, session.ErrOutcomeUnknown), "the server refused: nothing was written")
				got, err := s.Items(ctx)
				require.NoError(t, err)
				require.Len(t, got, len(lostBase), "nothing popped")
				require.NoError(t, st.RemoveSession(ctx, "idx"))
				n, err = c.Exists(ctx, append(s.all, s.pops)...).Result()
				require.NoError(t, err)
				require.Zero(t, n)
			}
		})
	}
}
