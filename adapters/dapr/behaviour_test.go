package dapr_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	daprc "github.com/dapr/go-sdk/client"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/dapr"
	"github.com/agentsessions/sessions/internal/testkit/faultproxy"
	"github.com/agentsessions/sessions/internal/testkit/lostreply"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// interloper is a StateClient that, before each save of the messages key,
// lets another writer append to it (read, save under its ETag), so that
// the save's ETag is stale: a conflict on every try, for the first
// interlopes tries.
type interloper struct {
	daprc.Client
	other     daprc.Client
	store     string
	key       string
	interlope int
	saves     atomic.Int32
}

func (c *interloper) SaveBulkState(ctx context.Context, store string, items ...*daprc.SetStateItem) error {
	if len(items) == 1 && items[0].Key == c.key && int(c.saves.Add(1)) <= c.interlope {
		it, err := c.other.GetState(ctx, store, c.key, nil)
		if err != nil {
			return err
		}
		v := `["{\"other\":` + fmt.Sprint(c.saves.Load()) + `}"]`
		if len(it.Value) > 2 {
			v = string(it.Value[:len(it.Value)-1]) + `,"{\"other\":` + fmt.Sprint(c.saves.Load()) + `}"]`
		}
		if err := c.other.SaveBulkState(ctx, store, &daprc.SetStateItem{Key: c.key, Value: []byte(v), Etag: &daprc.ETag{Value: it.Etag},
			Options: &daprc.StateOptions{Concurrency: daprc.StateConcurrencyFirstWrite}}); err != nil {
			return err
		}
	}
	return c.Client.SaveBulkState(ctx, store, items...)
}

// TestConflictExhaustion: every try's ETag is stale; after MaxAttempts
// tries, with Python's backoff between them, the append fails with
// ErrConflict and nothing of it was written. One conflict is retried.
func TestConflictExhaustion(t *testing.T) {
	ctx := context.Background()
	d := testservers.Daprd(t)
	c := newClient(t, d.GRPCAddr)
	id := uniqueID(t, "conflict")
	ic := &interloper{Client: c, other: newClient(t, d.GRPCAddr), store: d.StoreName, key: id + ":messages", interlope: 100}
	st := newStore(t, ic, dapr.Options{StoreName: d.StoreName, MaxAttempts: 3})
	s, err := st.Session(id)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Clear(context.Background()) })

	start := time.Now()
	addErr := s.AddItems(ctx, itemsOf(t, `{"mine":1}`))
	elapsed := time.Since(start)
	require.ErrorIs(t, addErr, dapr.ErrConflict)
	require.NotErrorIs(t, addErr, session.ErrOutcomeUnknown, "a conflict is known not to have been written")
	require.EqualValues(t, 3, ic.saves.Load(), "three tries")
	require.GreaterOrEqual(t, elapsed, 150*time.Millisecond, "50 ms, then 100 ms, between the tries")
	items, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{`{"other":1}`, `{"other":2}`, `{"other":3}`}, texts(items), "only the other writer's records")
	t.Logf("3 conflicting tries in %v: %v", elapsed.Round(time.Millisecond), addErr)

	ic.saves.Store(0)
	ic.interlope = 1
	require.NoError(t, s.AddItems(ctx, itemsOf(t, `{"mine":2}`)))
	items, err = s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{`{"other":1}`, `{"other":2}`, `{"other":3}`, `{"other":1}`, `{"mine":2}`}, texts(items))
	require.EqualValues(t, 2, ic.saves.Load())
}

// TestTTL: Options.TTL is the ttlInSeconds of every write; both keys
// expire, and an expired session starts afresh.
func TestTTL(t *testing.T) {
	ctx := context.Background()
	d := testservers.Daprd(t)
	c := newClient(t, d.GRPCAddr)
	st := newStore(t, c, dapr.Options{StoreName: d.StoreName, TTL: 2 * time.Second})
	id := uniqueID(t, "ttl")
	s, err := st.Session(id)
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, itemsOf(t, `{"a":1}`, `{"a":2}`)))

	rdb := goredis.NewClient(mustRedisOptions(t, d.RedisURL))
	defer rdb.Close()
	for _, key := range []string{id + ":messages", id + ":metadata"} {
		ttl, err := rdb.PTTL(ctx, d.AppID+"||"+key).Result()
		require.NoError(t, err)
		require.True(t, ttl > 0 && ttl <= 2*time.Second, "%s expires in %v", key, ttl)
	}
	time.Sleep(3 * time.Second)
	items, err := s.Items(ctx)
	require.NoError(t, err)
	require.Empty(t, items, "the session expired")
	n, err := rdb.Exists(ctx, d.AppID+"||"+id+":messages", d.AppID+"||"+id+":metadata").Result()
	require.NoError(t, err)
	require.Zero(t, n, "both keys expired")
	require.NoError(t, s.AddItems(ctx, itemsOf(t, `{"b":1}`)))
	items, err = s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{`{"b":1}`}, texts(items))
	require.NoError(t, s.Clear(ctx))

	_, err = dapr.New(c, dapr.Options{StoreName: d.StoreName, TTL: 1500 * time.Millisecond})
	require.ErrorIs(t, err, dapr.ErrInvalidOptions, "ttlInSeconds holds whole seconds")
}

// TestLostReply puts a fault proxy between daprd and Redis and loses the
// reply of the store's conditional write (the EVAL of the messages key):
// the write has run. daprd's Redis client then retries the command, whose
// ETag check fails against the write it made itself, and daprd answers a
// conflict. The adapter reports session.ErrOutcomeUnknown and writes the
// batch once; the Python class, which retries a conflict, writes it twice.
func TestLostReply(t *testing.T) {
	ctx := context.Background()
	redisURL := testservers.Redis(t)
	o := mustRedisOptions(t, redisURL)
	proxy, err := faultproxy.Start(o.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { proxy.Close() })
	d := testservers.NewDaprd(t, strings.Replace(redisURL, o.Addr, proxy.Addr(), 1))
	c := newClient(t, d.GRPCAddr)
	st := newStore(t, c, dapr.Options{StoreName: d.StoreName})

	evalOf := func(key string) func([]byte) bool {
		k := []byte(d.AppID + "||" + key)
		return func(req []byte) bool {
			return bytes.Contains(req, []byte("EVAL")) && bytes.Contains(req, k)
		}
	}
	type outcome struct {
		op, who string
		err     error
		kept    int
	}
	var outcomes []outcome
	for _, first := range []bool{true, false} {
		for _, who := range []string{"go", "python"} {
			id := uniqueID(t, "lost-"+who+fmt.Sprint(first))
			s, err := st.Session(id)
			require.NoError(t, err)
			py := &pySession{c: c, store: d.StoreName, id: id, consistency: "eventual"}
			if !first {
				require.NoError(t, s.AddItems(ctx, itemsOf(t, `{"base":1}`)))
			}
			proxy.Once(faultproxy.LoseReply, evalOf(id+":messages"))
			batch := `{"lost":"reply"}`
			if who == "go" {
				err = s.AddItems(ctx, itemsOf(t, batch))
			} else {
				err = py.addItems(t, ctx, []string{batch}, time.Now().Unix())
			}
			items, rerr := s.Items(ctx)
			require.NoError(t, rerr)
			kept := 0
			for _, it := range items {
				if it.String() == batch {
					kept++
				}
			}
			op := "append onto an existing array"
			if first {
				op = "first append (no ETag)"
			}
			outcomes = append(outcomes, outcome{op, who, err, kept})
			t.Logf("%s, %s: error %v; the batch is stored %d time(s)", op, who, err, kept)
			require.NoError(t, s.Clear(ctx))
		}
	}
	// A pop whose reply is lost: the Python class pops a second item.
	for _, who := range []string{"go", "python"} {
		id := uniqueID(t, "lost-pop-"+who)
		s, err := st.Session(id)
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, itemsOf(t, `{"n":1}`, `{"n":2}`)))
		py := &pySession{c: c, store: d.StoreName, id: id, consistency: "eventual"}
		proxy.Once(faultproxy.LoseReply, evalOf(id+":messages"))
		var popped any
		if who == "go" {
			var it session.Item
			var ok bool
			it, ok, err = s.PopItem(ctx)
			if ok {
				popped = it.String()
			}
		} else {
			popped, err = py.popItem(t, ctx)
		}
		items, rerr := s.Items(ctx)
		require.NoError(t, rerr)
		t.Logf("pop, %s: returned %v, error %v; left %v", who, popped, err, texts(items))
		if who == "go" {
			require.ErrorIs(t, err, session.ErrOutcomeUnknown)
			require.Equal(t, []string{`{"n":1}`}, texts(items), "one item popped, not two")
		}
		require.NoError(t, s.Clear(ctx))
	}
	// Replace, conditional replace and clear, Go only.
	for _, op := range []string{"replace", "replace-if", "clear"} {
		id := uniqueID(t, "lost-"+op)
		s, err := st.Session(id)
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, itemsOf(t, `{"n":1}`, `{"n":2}`)))
		version, err := s.HistoryVersion(ctx)
		require.NoError(t, err)
		proxy.Once(faultproxy.LoseReply, evalOf(id+":messages"))
		want := []string{`{"r":1}`}
		switch op {
		case "replace":
			err = s.ReplaceItems(ctx, itemsOf(t, want...))
		case "replace-if":
			err = s.ReplaceItemsIf(ctx, version, itemsOf(t, want...))
		case "clear":
			want = nil
			err = s.Clear(ctx)
		}
		items, rerr := s.Items(ctx)
		require.NoError(t, rerr)
		took := len(items) == len(want) && (want == nil || texts(items)[0] == want[0])
		out := lostreply.Classify(took, true, err)
		t.Logf("%s: error %v; left %v: %v", op, err, texts(items), out)
		require.False(t, out.Bad(), "%s: %v", op, out)
		require.NoError(t, s.Clear(ctx))
	}
	for _, o := range outcomes {
		if o.who != "go" {
			continue
		}
		switch {
		case o.kept == 1:
			require.ErrorIs(t, o.err, session.ErrOutcomeUnknown, "%s: the write took effect and its reply was lost", o.op)
		case o.kept == 0:
			require.Error(t, o.err, "%s: nothing was written, so the call failed", o.op)
		default:
			t.Fatalf("%s: the batch was written %d times", o.op, o.kept)
		}
	}
	if !errors.Is(outcomes[0].err, session.ErrOutcomeUnknown) {
		t.Logf("note: the first lost reply did not surface as unknown: %v", outcomes[0].err)
	}
}

// TestRefusedIDsAndOptions: ids daprd cannot key and options Python
// would not send are refused before anything is sent.
func TestRefusedIDsAndOptions(t *testing.T) {
	d := testservers.Daprd(t)
	c := newClient(t, d.GRPCAddr)
	st := newStore(t, c, dapr.Options{StoreName: d.StoreName})
	for _, id := range []string{"", "a||b", "||", "bad\xffutf8"} {
		_, err := st.Session(id)
		require.ErrorIs(t, err, session.ErrInvalidSessionID, "id %q", id)
	}
	s, err := st.Session("a|b|")
	require.NoError(t, err, "a single '|' is a key like any other")
	require.NoError(t, s.AddItems(context.Background(), itemsOf(t, `{"a":1}`)))
	require.NoError(t, s.Clear(context.Background()))
	for _, o := range []dapr.Options{
		{},
		{StoreName: d.StoreName, Consistency: "linearizable"},
		{StoreName: d.StoreName, TTL: -time.Second},
		{StoreName: d.StoreName, MaxAttempts: -1},
	} {
		_, err := dapr.New(c, o)
		require.ErrorIs(t, err, dapr.ErrInvalidOptions, "%+v", o)
	}
	_, err = dapr.New(nil, dapr.Options{StoreName: d.StoreName})
	require.ErrorIs(t, err, dapr.ErrInvalidOptions)

	// Open dials lazily and owns its connection.
	ost, err := dapr.Open(context.Background(), d.GRPCAddr, dapr.Options{StoreName: d.StoreName})
	require.NoError(t, err)
	os, err := ost.Session(uniqueID(t, "open"))
	require.NoError(t, err)
	require.NoError(t, os.AddItems(context.Background(), itemsOf(t, `{"a":1}`)))
	require.NoError(t, os.Clear(context.Background()))
	require.NoError(t, ost.Close())
	_, err = os.Items(context.Background())
	require.ErrorIs(t, err, session.ErrClosed)
}
