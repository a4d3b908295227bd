package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
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

// pySession issues, command for command, what the Python SDK's
// RedisSession (agents.extensions.memory.redis_session) issues through
// redis-py, on the same keys:
//
//	add_items:     if no items, nothing; else pipeline() (redis-py's default
//	               transaction=True: MULTI/EXEC) of HSET session_key session_id
//	               created_at updated_at (str(int(time.time()))), RPUSH
//	               messages_key of the json.dumps(item, separators=(",", ":"))
//	               strings, HSET session_key updated_at; then, with a ttl,
//	               another MULTI/EXEC pipeline of EXPIRE session_key,
//	               messages_key, counter_key ttl
//	get_items:     LRANGE messages_key 0 -1, or LRANGE -limit -1 (limit <= 0:
//	               nothing sent, []); records json.loads refuses are skipped
//	pop_item:      RPOP messages_key; a record json.loads refuses is gone and
//	               None is returned
//	clear_session: DEL session_key messages_key counter_key
type pySession struct {
	t                       *testing.T
	c                       goredis.UniversalClient
	id                      string
	sessionKey, messagesKey string
	counterKey              string
	ttl                     int // seconds; 0 is None
}

func newPySession(t *testing.T, c goredis.UniversalClient, prefix, id string, ttl int) *pySession {
	base := prefix + ":" + id
	return &pySession{t: t, c: c, id: id, sessionKey: base, messagesKey: base + ":messages", counterKey: base + ":counter", ttl: ttl}
}

// addItems is add_items; items are JSON texts, serialised as Python does.
// It returns what it stored.
func (p *pySession) addItems(items []string) []string {
	p.t.Helper()
	if len(items) == 0 {
		return nil
	}
	ctx := context.Background()
	now := strconv.FormatInt(time.Now().Unix(), 10)
	ser := make([]any, len(items))
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = pythonDumps(p.t, it)
		ser[i] = out[i]
	}
	_, err := p.c.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
		pipe.HSet(ctx, p.sessionKey, "session_id", p.id, "created_at", now, "updated_at", now)
		pipe.RPush(ctx, p.messagesKey, ser...)
		pipe.HSet(ctx, p.sessionKey, "updated_at", now)
		return nil
	})
	require.NoError(p.t, err, "Python's add_items pipeline")
	if p.ttl > 0 {
		_, err = p.c.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
			for _, k := range []string{p.sessionKey, p.messagesKey, p.counterKey} {
				pipe.Expire(ctx, k, time.Duration(p.ttl)*time.Second)
			}
			return nil
		})
		require.NoError(p.t, err, "Python's _set_ttl_if_configured pipeline")
	}
	return out
}

// pyLoads reports whether json.loads reads raw (after the UTF-8 decode
// Python does first).
func pyLoads(raw string) bool {
	_, err := pyjson.Dumps([]byte(raw), pyjson.Options{})
	return err == nil
}

// getItems is get_items(limit); limit < 0 stands for None. It returns the
// raw records json.loads reads, in order.
func (p *pySession) getItems(limit int) []string {
	p.t.Helper()
	ctx := context.Background()
	var raws []string
	var err error
	switch {
	case limit < 0:
		raws, err = p.c.LRange(ctx, p.messagesKey, 0, -1).Result()
	case limit == 0:
		return []string{}
	default:
		raws, err = p.c.LRange(ctx, p.messagesKey, int64(-limit), -1).Result()
	}
	require.NoError(p.t, err)
	out := []string{}
	for _, r := range raws {
		if pyLoads(r) {
			out = append(out, r)
		}
	}
	return out
}

// popItem is pop_item: the raw record it returned, ok false for None.
func (p *pySession) popItem() (string, bool) {
	p.t.Helper()
	raw, err := p.c.RPop(context.Background(), p.messagesKey).Result()
	if errors.Is(err, goredis.Nil) {
		return "", false
	}
	require.NoError(p.t, err)
	if !pyLoads(raw) {
		return "", false
	}
	return raw, true
}

// clearSession is clear_session.
func (p *pySession) clearSession() {
	p.t.Helper()
	require.NoError(p.t, p.c.Del(context.Background(), p.sessionKey, p.messagesKey, p.counterKey).Err())
}

// pythonAddItems is add_items on a fresh pySession.
func pythonAddItems(t *testing.T, c goredis.UniversalClient, prefix, id string, ttl int, items []string) {
	t.Helper()
	newPySession(t, c, prefix, id, ttl).addItems(items)
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
		for _, id := range []string{"a:messages", "a:counter", ":messages", "a:checkpoints:messages", "a:checkpoints:messages:counter"} {
			_, err := st.Session(id)
			require.True(t, errors.Is(err, session.ErrInvalidSessionID), "%q: %v", id, err)
		}
		for _, id := range []string{"a:message", "messages", "a:counter:x", "a:messages ", "a:checkpoints", ":checkpoints", "a:checkpoints:x", "a:checkpoints:messages:x"} {
			_, err := st.Session(id)
			require.NoError(t, err, id)
		}
	})
}

// interleaveOp is one step of TestPythonInterleaving: what Go or Python
// does to the session, applied to the model of the stored records.
type interleaveOp struct {
	name string
	do   func(env *interleaveEnv, step int)
}

type interleaveEnv struct {
	t     *testing.T
	ctx   context.Context
	goS   *Session
	py    *pySession
	model []string // the stored records, oldest first, byte for byte
}

// interleaveItem returns the JSON text of item k of a step: ordinary
// messages, non-ASCII text, and a tool result holding NaN and the
// infinities, which Python's json.dumps writes by default.
func interleaveItem(side string, step, k int) string {
	switch k % 3 {
	case 0:
		return fmt.Sprintf(`{"role": "user", "content": "%s step %d item %d"}`, side, step, k)
	case 1:
		return fmt.Sprintf(`{"type": "function_call_output", "call_id": "c%d", "output": "18°C ☀ %s %d"}`, step, side, k)
	default:
		return fmt.Sprintf(`{"role": "tool", "step": %d, "k": %d, "score": NaN, "range": [-Infinity, Infinity]}`, step, k)
	}
}

func goBatch(step, n int) ([]session.Item, []string) {
	items := make([]session.Item, n)
	raws := make([]string, n)
	for k := range items {
		raws[k] = interleaveItem("go", step, k)
		items[k] = session.MustItem(raws[k])
	}
	return items, raws
}

func pyBatch(step, n int) []string {
	out := make([]string, n)
	for k := range out {
		out[k] = interleaveItem("py", step, k)
	}
	return out
}

var interleaveOps = []interleaveOp{
	{"go-add-1", func(e *interleaveEnv, step int) {
		items, raws := goBatch(step, 1)
		require.NoError(e.t, e.goS.AddItems(e.ctx, items))
		e.model = append(e.model, raws...)
	}},
	{"go-add-n", func(e *interleaveEnv, step int) {
		items, raws := goBatch(step, 3)
		require.NoError(e.t, e.goS.AddItems(e.ctx, items))
		e.model = append(e.model, raws...)
	}},
	{"go-pop", func(e *interleaveEnv, step int) {
		it, ok, err := e.goS.PopItem(e.ctx)
		require.NoError(e.t, err)
		require.Equal(e.t, len(e.model) > 0, ok)
		if ok {
			require.Equal(e.t, e.model[len(e.model)-1], it.String())
			e.model = e.model[:len(e.model)-1]
		}
	}},
	{"go-clear", func(e *interleaveEnv, step int) {
		require.NoError(e.t, e.goS.Clear(e.ctx))
		e.model = nil
	}},
	{"go-replace", func(e *interleaveEnv, step int) {
		items, raws := goBatch(step, 2)
		require.NoError(e.t, e.goS.ReplaceItems(e.ctx, items))
		e.model = raws
	}},
	{"py-add-1", func(e *interleaveEnv, step int) {
		e.model = append(e.model, e.py.addItems(pyBatch(step, 1))...)
	}},
	{"py-add-n", func(e *interleaveEnv, step int) {
		e.model = append(e.model, e.py.addItems(pyBatch(step, 3))...)
	}},
	{"py-pop", func(e *interleaveEnv, step int) {
		raw, ok := e.py.popItem()
		require.Equal(e.t, len(e.model) > 0, ok)
		if ok {
			require.Equal(e.t, e.model[len(e.model)-1], raw)
			e.model = e.model[:len(e.model)-1]
		}
	}},
	{"py-clear", func(e *interleaveEnv, step int) {
		e.py.clearSession()
		e.model = nil
	}},
}

// check asserts that Go and Python read the model, whole and latest-2,
// that json.loads reads every record, and that the keys are what both
// sides expect: the hash with Python's fields while items exist, and with a
// ttl an expiry on every key that exists.
func (e *interleaveEnv) check(trace string) {
	t := e.t
	t.Helper()
	want := append([]string{}, e.model...)
	got, err := e.goS.Items(e.ctx)
	require.NoError(t, err, trace)
	require.Equal(t, want, texts(got), "%s: Go reads", trace)
	require.Equal(t, want, e.py.getItems(-1), "%s: Python reads", trace)
	tail := want[max(len(want)-2, 0):]
	latest, err := e.goS.LatestItems(e.ctx, 2)
	require.NoError(t, err, trace)
	require.Equal(t, tail, texts(latest), "%s: Go latest 2", trace)
	require.Equal(t, tail, e.py.getItems(2), "%s: Python get_items(limit=2)", trace)
	if len(want) > 0 {
		meta, err := e.py.c.HGetAll(e.ctx, e.py.sessionKey).Result()
		require.NoError(t, err)
		require.Equal(t, e.py.id, meta["session_id"], trace)
		for _, f := range []string{"created_at", "updated_at"} {
			_, err := strconv.ParseInt(meta[f], 10, 64)
			require.NoError(t, err, "%s: %s is Unix seconds: %q", trace, f, meta[f])
		}
	}
	if e.py.ttl > 0 {
		for _, k := range []string{e.py.sessionKey, e.py.messagesKey, e.py.counterKey} {
			d, err := e.py.c.PTTL(e.ctx, k).Result()
			require.NoError(t, err)
			require.True(t, d == -2*time.Nanosecond || d > 0, "%s: %s exists without an expiry (%v)", trace, k, d)
		}
	}
}

// TestPythonInterleaving is issue 9's "Show" for Redis: Python
// RedisSession's exact commands (pySession) interleaved with Go's AddItems,
// PopItem, Clear and ReplaceItems on the Python layout, in every order of
// three steps (and every order of two with a ttl on both sides), with
// 1-item and n-item batches. After every step both sides read the same
// items in the same order, and no write fails. Then Python and Go writers
// run concurrently on one session: every batch lands whole and contiguous,
// and both sides read the same history.
func TestPythonInterleaving(t *testing.T) {
	c := standaloneClient(t)
	ctx := context.Background()
	run := func(t *testing.T, depth int, ttl int) int {
		prefix := uniquePrefix(t)
		st := newStore(t, c, Options{Layout: LayoutPython, KeyPrefix: prefix, TTL: time.Duration(ttl) * time.Second})
		n := 1
		for range depth {
			n *= len(interleaveOps)
		}
		for seq := range n {
			id := fmt.Sprintf("s%d", seq)
			goS, err := st.Session(id)
			require.NoError(t, err)
			e := &interleaveEnv{t: t, ctx: ctx, goS: goS, py: newPySession(t, c, prefix, id, ttl)}
			trace := ""
			for step, x := 0, seq; step < depth; step, x = step+1, x/len(interleaveOps) {
				op := interleaveOps[x%len(interleaveOps)]
				trace += op.name + " "
				op.do(e, step)
				e.check(trace)
			}
			e.py.clearSession()
		}
		return n
	}
	t.Run("every order of 3 steps", func(t *testing.T) {
		t.Logf("%d sequences", run(t, 3, 0))
	})
	t.Run("every order of 2 steps with a ttl", func(t *testing.T) {
		t.Logf("%d sequences", run(t, 2, 60))
	})
	t.Run("concurrent writers of both languages", func(t *testing.T) {
		prefix := uniquePrefix(t)
		st := newStore(t, c, Options{Layout: LayoutPython, KeyPrefix: prefix})
		goS, err := st.Session("both")
		require.NoError(t, err)
		const writers, batches, size = 3, 20, 3
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for b := range batches {
					items := make([]session.Item, size)
					for k := range items {
						items[k] = session.MustItem(fmt.Sprintf(`{"go":%d,"b":%d,"k":%d}`, w, b, k))
					}
					if err := goS.AddItems(ctx, items); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				py := newPySession(t, c, prefix, "both", 0)
				for b := range batches {
					items := make([]string, size)
					for k := range items {
						items[k] = fmt.Sprintf(`{"py": %d, "b": %d, "k": %d}`, w, b, k)
					}
					py.addItems(items)
				}
			}()
		}
		wg.Wait()
		py := newPySession(t, c, prefix, "both", 0)
		all := py.getItems(-1)
		got, err := goS.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, all, texts(got), "both sides read the same history")
		require.Len(t, all, 2*writers*batches*size)
		seen := map[string]bool{}
		for i := 0; i < len(all); i += size {
			var first map[string]int
			require.NoError(t, json.Unmarshal([]byte(all[i]), &first))
			require.Equal(t, 0, first["k"], "record %d starts a batch", i)
			for k := 1; k < size; k++ {
				var m map[string]int
				require.NoError(t, json.Unmarshal([]byte(all[i+k]), &m))
				require.Equal(t, k, m["k"], "batch at %d is contiguous", i)
				require.Equal(t, first["b"], m["b"])
				require.Equal(t, first["go"], m["go"])
				require.Equal(t, first["py"], m["py"])
			}
			key := all[i]
			require.False(t, seen[key], "batch stored twice")
			seen[key] = true
		}
		require.Len(t, seen, 2*writers*batches)
	})
}
