package redis

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/internal/pyjson"
	"github.com/agentsessions/sessions/session"
)

// pythonItems are items as a Python caller would hand them to
// RedisSession.add_items, here as JSON text.
var pythonItems = []string{
	`{"role": "user", "content": "What's the weather in Paris?"}`,
	`{"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{\"city\": \"Paris\"}"}`,
	`{"type": "function_call_output", "call_id": "call_1", "output": "18°C, ciel dégagé ☀"}`,
	`{"role": "assistant", "content": [{"type": "output_text", "text": "It is 18 °C 😀"}]}`,
}

// pythonDumps returns json.dumps(item, separators=(",", ":")) as the
// Python SDK's RedisSession._serialize_item writes it (ensure_ascii is
// left at Python's default, True).
func pythonDumps(t *testing.T, raw string) string {
	t.Helper()
	b, err := pyjson.Dumps([]byte(raw), pyjson.Options{EnsureASCII: true, Compact: true})
	require.NoError(t, err)
	return string(b)
}

func uniqueID(t *testing.T) string { return "py-" + uniquePrefix(t)[len("agents:test:"):] }

// pythonAddItems does what RedisSession.add_items does, command for
// command: HSET of the session hash (session_id, created_at, updated_at
// as str(int(time.time()))), RPUSH of the serialized items, HSET of
// updated_at, in one pipeline; then EXPIRE of the three keys when a ttl is
// set.
func pythonAddItems(t *testing.T, c goredis.UniversalClient, prefix, id string, ttl int, items []string) {
	t.Helper()
	ctx := context.Background()
	sessionKey := prefix + ":" + id
	messagesKey := sessionKey + ":messages"
	counterKey := sessionKey + ":counter"
	now := strconv.FormatInt(time.Now().Unix(), 10)
	ser := make([]any, len(items))
	for i, it := range items {
		ser[i] = pythonDumps(t, it)
	}
	_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.HSet(ctx, sessionKey, "session_id", id, "created_at", now, "updated_at", now)
		p.RPush(ctx, messagesKey, ser...)
		p.HSet(ctx, sessionKey, "updated_at", now)
		return nil
	})
	require.NoError(t, err)
	if ttl > 0 {
		_, err = c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, k := range []string{sessionKey, messagesKey, counterKey} {
				p.Expire(ctx, k, time.Duration(ttl)*time.Second)
			}
			return nil
		})
		require.NoError(t, err)
	}
}

// TestPythonLayoutReadsPython: a session written exactly as the Python SDK
// writes it is read, popped and cleared by the adapter.
func TestPythonLayoutReadsPython(t *testing.T) {
	ctx := context.Background()
	c := standaloneClient(t)
	id := uniqueID(t)
	pythonAddItems(t, c, DefaultPythonKeyPrefix, id, 0, pythonItems[:2])
	pythonAddItems(t, c, DefaultPythonKeyPrefix, id, 0, pythonItems[2:])
	require.NoError(t, c.Incr(ctx, DefaultPythonKeyPrefix+":"+id+":counter").Err(), "as _get_next_id would")

	st := newStore(t, c, Options{Layout: LayoutPython}) // the default prefix, as Python's
	s, err := st.Session(id)
	require.NoError(t, err)
	assert.Equal(t, []string{"agents:session:" + id + ":messages", "agents:session:" + id, "agents:session:" + id + ":counter"}, s.Keys())

	want := make([]string, len(pythonItems))
	for i, it := range pythonItems {
		want[i] = pythonDumps(t, it)
	}
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, want, texts(got), "the adapter returns Python's bytes unchanged")
	latest, err := s.LatestItems(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, want[2:], texts(latest))

	it, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, want[3], it.String())
	rest, err := c.LRange(ctx, s.Keys()[0], 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, want[:3], rest, "Python sees the pop")

	// The adapter appends to the Python session; Python's reader gets them.
	require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(pythonItems[3])}))
	rest, err = c.LRange(ctx, s.Keys()[0], 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, append(want[:3:3], pythonItems[3]), rest)

	require.NoError(t, s.Clear(ctx))
	n, err := c.Exists(ctx, s.Keys()...).Result()
	require.NoError(t, err)
	require.Zero(t, n, "clear deletes the hash, the messages and the counter, as Python's clear_session")
}

// TestPythonLayoutWritesPython: what the adapter writes in the Python
// layout is what the Python SDK reads: the same keys, key types and hash
// fields, and the item bytes as given (json.loads reads them).
func TestPythonLayoutWritesPython(t *testing.T) {
	ctx := context.Background()
	c := standaloneClient(t)
	prefix := uniquePrefix(t)
	id := uniqueID(t)
	st := newStore(t, c, Options{Layout: LayoutPython, KeyPrefix: prefix, TTL: time.Minute})
	s, err := st.Session(id)
	require.NoError(t, err)
	items := make([]session.Item, len(pythonItems))
	for i, raw := range pythonItems {
		items[i] = session.MustItem(raw)
	}
	require.NoError(t, s.AddItems(ctx, items[:2]))

	sessionKey, messagesKey, counterKey := prefix+":"+id, prefix+":"+id+":messages", prefix+":"+id+":counter"
	typ, err := c.Type(ctx, sessionKey).Result()
	require.NoError(t, err)
	require.Equal(t, "hash", typ)
	typ, err = c.Type(ctx, messagesKey).Result()
	require.NoError(t, err)
	require.Equal(t, "list", typ)

	meta, err := c.HGetAll(ctx, sessionKey).Result()
	require.NoError(t, err)
	require.Len(t, meta, 3, "session_id, created_at, updated_at: %v", meta)
	require.Equal(t, id, meta["session_id"])
	serverNow, err := c.Time(ctx).Result()
	require.NoError(t, err)
	for _, f := range []string{"created_at", "updated_at"} {
		sec, err := strconv.ParseInt(meta[f], 10, 64)
		require.NoError(t, err, "%s is str(int(time.time())): %q", f, meta[f])
		require.InDelta(t, serverNow.Unix(), sec, 5, f)
	}

	stored, err := c.LRange(ctx, messagesKey, 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, pythonItems[:2], stored, "items are written byte for byte as given")
	for _, raw := range stored {
		// json.loads reads them: they are strict JSON objects, and
		// re-encoding them as Python would succeeds.
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(raw), &v))
		_, err := pyjson.Dumps([]byte(raw), pyjson.Options{EnsureASCII: true, Compact: true})
		require.NoError(t, err)
	}

	for _, k := range []string{sessionKey, messagesKey} {
		d, err := c.PTTL(ctx, k).Result()
		require.NoError(t, err)
		require.True(t, d > 0 && d <= time.Minute, "%s expires with the session: %v", k, d)
	}
	n, err := c.Exists(ctx, counterKey).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the counter is never written (Python's add_items does not use it)")

	// A later write keeps created_at (HSETNX) and sets updated_at.
	require.NoError(t, c.HSet(ctx, sessionKey, "created_at", "1700000000", "updated_at", "1700000000").Err())
	require.NoError(t, s.AddItems(ctx, items[2:]))
	meta, err = c.HGetAll(ctx, sessionKey).Result()
	require.NoError(t, err)
	require.Equal(t, "1700000000", meta["created_at"])
	require.NotEqual(t, "1700000000", meta["updated_at"])
	stored, err = c.LRange(ctx, messagesKey, 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, pythonItems, stored)

	// Python's pop_item is RPOP on the messages list.
	last, err := c.RPop(ctx, messagesKey).Result()
	require.NoError(t, err)
	require.Equal(t, pythonItems[3], last)
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, pythonItems[:3], texts(got))
}

func TestPythonLayoutRefusals(t *testing.T) {
	t.Run("cluster client", func(t *testing.T) {
		_, err := New(clusterClient(t), Options{Layout: LayoutPython})
		require.ErrorIs(t, err, ErrClusterLayout)
		ring := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
		defer ring.Close()
		_, err = New(ring, Options{Layout: LayoutPython})
		require.ErrorIs(t, err, ErrClusterLayout)
	})
	t.Run("ids naming another session's key", func(t *testing.T) {
		st := newStore(t, standaloneClient(t), Options{Layout: LayoutPython})
		for _, id := range []string{"a:messages", "a:counter", ":messages"} {
			_, err := st.Session(id)
			require.True(t, errors.Is(err, session.ErrInvalidSessionID), "%q: %v", id, err)
		}
		for _, id := range []string{"a:message", "messages", "a:counter:x", "a:messages "} {
			_, err := st.Session(id)
			require.NoError(t, err, id)
		}
	})
}
