package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance"
)

// dumpKeys returns DUMP and PTTL of every key, "" for a missing one: the
// exact bytes (type, value and encoding) Redis holds.
func dumpKeys(t *testing.T, c goredis.UniversalClient, keys []string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, k := range keys {
		d, err := c.Dump(ctx, k).Result()
		if errors.Is(err, goredis.Nil) {
			out[k] = ""
			continue
		}
		require.NoError(t, err)
		out[k] = d
	}
	return out
}

// TestLayoutsNeverMeet is issue 10.5's attack, at both layouts' default
// prefixes in one database: a native session "victim", then Python-layout
// sessions whose ids name the victim's keys under a shared prefix
// ("{victim}:meta", "{victim}:items", ...), written, popped and cleared
// both by this adapter's Python layout and by the Python SDK's own
// commands (which refuse no id). The victim's keys stay byte for byte
// what they were, and it reads its items back.
func TestLayoutsNeverMeet(t *testing.T) {
	ctx := context.Background()
	c := standaloneClient(t)
	native := newStore(t, c, Options{}) // the defaults, as an operator would have them
	python := newStore(t, c, Options{Layout: LayoutPython})
	victimID := "victim-" + uniquePrefix(t)[len("agents:test:"):]
	victim, err := native.Session(victimID)
	require.NoError(t, err)
	t.Cleanup(func() { _ = victim.Clear(ctx) })
	items := conformance.Numbered("v", 3)
	require.NoError(t, victim.AddItems(ctx, items))
	before := dumpKeys(t, c, victim.Keys())
	for k, v := range before {
		require.NotEmpty(t, v, "%s exists", k)
	}

	tag := "{" + escapeID(victimID) + "}"
	attack := []string{tag + ":meta", tag + ":items", tag, tag + ":", victimID,
		// what the ids would have to be to reach the native keys under the
		// new default from the Python default prefix
		strings.TrimPrefix(victim.Keys()[0], DefaultPythonKeyPrefix+":"),
		strings.TrimPrefix(victim.Keys()[1], DefaultPythonKeyPrefix+":"),
	}
	for _, id := range attack {
		// this adapter's Python layout
		ps, err := python.Session(id)
		require.NoError(t, err, id)
		for _, k := range ps.Keys() {
			require.NotContains(t, victim.Keys(), k, "id %q names a native key", id)
		}
		require.NoError(t, ps.AddItems(ctx, conformance.Numbered("attack", 2)), id)
		_, _, err = ps.PopItem(ctx)
		require.NoError(t, err, id)
		require.NoError(t, ps.ReplaceItems(ctx, conformance.Numbered("attack", 1)), id)
		require.NoError(t, ps.Clear(ctx), id)

		// the Python SDK's own add_items, pop_item and clear_session
		pythonAddItems(t, c, DefaultPythonKeyPrefix, id, 60, []string{`{"a":1}`})
		require.NoError(t, c.RPop(ctx, DefaultPythonKeyPrefix+":"+id+":messages").Err(), id)
		pythonClear(t, c, DefaultPythonKeyPrefix, id)
	}
	require.Equal(t, before, dumpKeys(t, c, victim.Keys()), "the native session's keys are byte for byte unchanged")
	got, err := victim.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts(items), texts(got))
}

// TestDefaultKeySpacesDisjoint: for every hostile id, no native key under
// the native default starts with the Python default prefix followed by
// ':', so no Python-layout id (any string) can produce it, and no Python
// key under the Python default is a native key under the native default.
func TestDefaultKeySpacesDisjoint(t *testing.T) {
	require.False(t, prefixesOverlap(DefaultKeyPrefix, DefaultPythonKeyPrefix))
	for _, id := range hostileIDs {
		for _, k := range sessionKeys(DefaultKeyPrefix, id) {
			require.False(t, strings.HasPrefix(k, DefaultPythonKeyPrefix+":"), k)
		}
		// The Python SDK's keys for id, refused or not by this adapter.
		base := DefaultPythonKeyPrefix + ":" + id
		for _, k := range []string{base, base + ":messages", base + ":counter", base + ":checkpoints"} {
			_, _, ok := ParseKey(DefaultKeyPrefix, k)
			require.False(t, ok, k)
			require.False(t, strings.HasPrefix(k, DefaultKeyPrefix+":"), k)
		}
	}
	for _, tc := range []struct {
		native, python string
		overlap        bool
	}{
		{"agents:session", "agents:session", true},
		{"agents:session:x", "agents:session", true},
		{"agents:sessions", "agents:session", false},
		{"agents:native", "agents", true},
		{"agents:native", "agents:native:x", false},
		{"agents:native", "agents:native:", false},
		{"a", "a:", false},
	} {
		require.Equal(t, tc.overlap, prefixesOverlap(tc.native, tc.python), "%+v", tc)
	}
}

// TestMovePrefix moves native sessions written under an old prefix to a
// new one, bytes and expiries kept; sessions it cannot move safely stay
// where they are and are named in the error.
func TestMovePrefix(t *testing.T) {
	for name, mk := range bothClients {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := mk(t)
			from, to := uniquePrefix(t)+":old", uniquePrefix(t)+":new"
			old := newStore(t, c, Options{KeyPrefix: from})
			ids := []string{"a", "{b}", "c:d", "ünï"}
			want := map[string][]string{}
			dumps := map[string]map[string]string{}
			for i, id := range ids {
				s, err := old.Session(id)
				require.NoError(t, err)
				items := conformance.Numbered(id, i+1)
				require.NoError(t, s.AddItems(ctx, items))
				want[id] = texts(items)
				d := dumpKeys(t, c, s.Keys())
				dumps[id] = map[string]string{"items": d[s.Keys()[0]], "meta": d[s.Keys()[1]]}
			}
			require.NoError(t, c.PExpire(ctx, nativeKeys(from, "a")[0], time.Hour).Err())
			require.NoError(t, c.PExpire(ctx, nativeKeys(from, "a")[1], time.Hour).Err())
			// A Python-layout session whose hash sits where a native items key
			// would be, and a session whose destination exists already.
			wrongType := nativeKeys(from, "py")[0]
			require.NoError(t, c.HSet(ctx, wrongType, "session_id", "{py}:items").Err())
			blocked, err := old.Session("blocked")
			require.NoError(t, err)
			require.NoError(t, blocked.AddItems(ctx, conformance.Numbered("b", 1)))
			require.NoError(t, c.Set(ctx, nativeKeys(to, "blocked")[1], "there", 0).Err())

			moved, err := MovePrefix(ctx, c, from, to)
			require.Equal(t, len(ids), moved)
			require.ErrorIs(t, err, ErrMoveConflict)
			require.Contains(t, err.Error(), `"py"`)
			require.Contains(t, err.Error(), `"blocked"`)

			st := newStore(t, c, Options{KeyPrefix: to})
			for _, id := range ids {
				s, err := st.Session(id)
				require.NoError(t, err)
				got, err := s.Items(ctx)
				require.NoError(t, err)
				require.Equal(t, want[id], texts(got), id)
				d := dumpKeys(t, c, s.Keys())
				require.Equal(t, dumps[id], map[string]string{"items": d[s.Keys()[0]], "meta": d[s.Keys()[1]]}, "%s: bytes kept", id)
				n, err := c.Exists(ctx, nativeKeys(from, id)...).Result()
				require.NoError(t, err)
				require.Zero(t, n, "%s: nothing left under the old prefix", id)
			}
			pt, err := c.PTTL(ctx, nativeKeys(to, "a")[0]).Result()
			require.NoError(t, err)
			require.Greater(t, pt, 59*time.Minute, "the expiry moves with the keys")
			typ, err := c.Type(ctx, wrongType).Result()
			require.NoError(t, err)
			require.Equal(t, "hash", typ, "the foreign key is left where it was")
			got, err := blocked.Items(ctx)
			require.NoError(t, err)
			require.Len(t, got, 1, "the blocked session stays under the old prefix")

			moved, err = MovePrefix(ctx, c, from, to)
			require.Zero(t, moved, "a rerun finds nothing more to move")
			require.ErrorIs(t, err, ErrMoveConflict)

			_, err = MovePrefix(ctx, c, from, DefaultPythonKeyPrefix)
			require.ErrorIs(t, err, ErrPrefixOverlap)
			_, err = MovePrefix(ctx, c, from, from)
			require.ErrorIs(t, err, ErrInvalidOptions)
		})
	}
}

// pythonClear does what RedisSession.clear_session does: one DEL of the
// session hash, the messages list and the counter.
func pythonClear(t *testing.T, c goredis.UniversalClient, prefix, id string) {
	t.Helper()
	base := prefix + ":" + id
	require.NoError(t, c.Del(context.Background(), base, base+":messages", base+":counter").Err())
}
