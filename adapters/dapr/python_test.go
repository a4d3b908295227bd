package dapr_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	daprc "github.com/dapr/go-sdk/client"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentsessions/sessions/adapters/dapr"
	"github.com/agentsessions/sessions/internal/pyjson"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// pyLayout holds what CPython computes for the Python class's writes
// (testdata/python_layout.py).
type pyLayout struct {
	SessionID  string   `json:"session_id"`
	BatchA     []string `json:"batch_a"`
	BatchB     []string `json:"batch_b"`
	AfterA     string   `json:"after_a"`
	AfterAB    string   `json:"after_a_b"`
	AfterPop   string   `json:"after_pop"`
	Metadata   string   `json:"metadata_at_1700000000"`
	GoRawItem  string   `json:"go_raw_item"`
	GoRawArray string   `json:"go_raw_array"`
}

func loadLayout(t *testing.T) pyLayout {
	t.Helper()
	data, err := os.ReadFile("testdata/python_layout.json")
	require.NoError(t, err)
	var l pyLayout
	require.NoError(t, json.Unmarshal(data, &l))
	return l
}

// metadataPattern matches the Python metadata value with any timestamps.
func (l pyLayout) metadataPattern() *regexp.Regexp {
	q := regexp.QuoteMeta(l.Metadata)
	q = strings.ReplaceAll(q, "1700000000", `(\d+)`)
	return regexp.MustCompile("^" + q + "$")
}

// pySession stands in for the Python SDK's DaprSession: each method issues
// the state operations the class's method issues, one for one (keys,
// values, ETags, state options, state metadata), through the same gRPC
// API, and computes values as its json.dumps calls do (internal/pyjson is
// CPython's json module, byte for byte; the test also checks the values
// against CPython's in testdata/python_layout.json).
type pySession struct {
	c           daprc.Client
	store, id   string
	ttl         int // seconds; 0 is None
	consistency string
	// conflicts counts saves retried as concurrency conflicts.
	conflicts int
}

func (p *pySession) messagesKey() string { return p.id + ":messages" }
func (p *pySession) metadataKey() string { return p.id + ":metadata" }

// _get_read_metadata
func (p *pySession) readMeta() map[string]string {
	return map[string]string{"consistency": p.consistency}
}

// _get_metadata
func (p *pySession) writeMeta() map[string]string {
	m := map[string]string{}
	if p.ttl > 0 {
		m["ttlInSeconds"] = strconv.Itoa(p.ttl)
	}
	return m
}

// _get_state_options
func (p *pySession) options(firstWrite bool) *daprc.StateOptions {
	o := &daprc.StateOptions{}
	switch p.consistency {
	case "strong":
		o.Consistency = daprc.StateConsistencyStrong
	case "eventual":
		o.Consistency = daprc.StateConsistencyEventual
	}
	if firstWrite {
		o.Concurrency = daprc.StateConcurrencyFirstWrite
	}
	return o
}

// get_state(store_name, key, state_metadata): no consistency field.
func (p *pySession) get(ctx context.Context) (*daprc.StateItem, error) {
	return p.c.GetStateWithConsistency(ctx, p.store, p.messagesKey(), p.readMeta(), daprc.StateConsistencyUndefined)
}

// _decode_messages: lenient (strict=False) or strict.
func pyDecode(data []byte, strict bool) ([]any, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		if strict {
			return nil, fmt.Errorf("ValueError: the stored Dapr session messages are not valid JSON")
		}
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		if strict {
			return nil, fmt.Errorf("ValueError: must be a JSON list")
		}
		return nil, nil
	}
	return list, nil
}

// pyDumpsList is json.dumps(list, separators=(",", ":")).
func pyDumpsList(t testing.TB, list []any) []byte {
	raw, err := json.Marshal(list)
	require.NoError(t, err)
	out, err := pyjson.Dumps(raw, pyjson.Options{EnsureASCII: true, Compact: true})
	require.NoError(t, err)
	return out
}

// _is_concurrency_conflict
func pyIsConflict(err error) bool {
	if st, ok := status.FromError(err); ok && (st.Code() == codes.Aborted || st.Code() == codes.FailedPrecondition) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, m := range []string{"etag mismatch", "etag does not match", "precondition failed", "concurrency conflict",
		"invalid etag", "failed to set key", "user_script"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// _handle_concurrency_conflict's sleep: _calculate_retry_delay.
func pyDelay(attempt int) time.Duration {
	base := 0.05 * float64(int(1)<<max(0, attempt-1))
	d := min(base, 1.0)
	d += rand.Float64() * 0.1 * d
	return time.Duration(d * float64(time.Second))
}

// add_items(items), items already serialized by _serialize_item.
func (p *pySession) addItems(t testing.TB, ctx context.Context, serialized []string, now int64) error {
	if len(serialized) == 0 {
		return nil
	}
	for attempt := 1; ; attempt++ {
		resp, err := p.get(ctx)
		if err != nil {
			return err
		}
		existing, err := pyDecode(resp.Value, true)
		if err != nil {
			return err
		}
		for _, s := range serialized {
			existing = append(existing, s)
		}
		err = p.c.SaveBulkState(ctx, p.store, &daprc.SetStateItem{
			Key:      p.messagesKey(),
			Value:    pyDumpsList(t, existing),
			Etag:     &daprc.ETag{Value: resp.Etag}, // etag=response.etag: "" when absent, never None
			Metadata: p.writeMeta(),
			Options:  p.options(true),
		})
		if err == nil {
			break
		}
		if !pyIsConflict(err) || attempt >= dapr.DefaultMaxAttempts {
			return err
		}
		p.conflicts++
		time.Sleep(pyDelay(attempt))
	}
	meta := fmt.Sprintf(`{"session_id": %s, "created_at": "%d", "updated_at": "%d"}`, pyString(t, p.id), now, now)
	return p.c.SaveBulkState(ctx, p.store, &daprc.SetStateItem{
		Key:      p.metadataKey(),
		Value:    []byte(meta),
		Metadata: p.writeMeta(),
		Options:  p.options(false),
	})
}

// pyString is json.dumps(s) of a str.
func pyString(t testing.TB, s string) string {
	raw, err := json.Marshal(s)
	require.NoError(t, err)
	out, err := pyjson.Dumps(raw, pyjson.Options{EnsureASCII: true})
	require.NoError(t, err)
	return string(out)
}

// get_items(): the items' JSON texts as _deserialize_item reads them
// (json.loads each string element; others as they are).
func (p *pySession) getItems(ctx context.Context) ([]any, error) {
	resp, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	msgs, _ := pyDecode(resp.Value, false)
	var out []any
	for _, m := range msgs {
		if s, ok := m.(string); ok {
			var v any
			if json.Unmarshal([]byte(s), &v) != nil {
				continue
			}
			out = append(out, v)
			continue
		}
		out = append(out, m)
	}
	return out, nil
}

// pop_item(): the popped element as it was stored.
func (p *pySession) popItem(t testing.TB, ctx context.Context) (any, error) {
	for attempt := 1; ; attempt++ {
		resp, err := p.get(ctx)
		if err != nil {
			return nil, err
		}
		msgs, _ := pyDecode(resp.Value, false)
		if len(msgs) == 0 {
			return nil, nil
		}
		last := msgs[len(msgs)-1]
		msgs = msgs[:len(msgs)-1]
		var etag *daprc.ETag // getattr(response, "etag", None) or None
		if resp.Etag != "" {
			etag = &daprc.ETag{Value: resp.Etag}
		}
		err = p.c.SaveBulkState(ctx, p.store, &daprc.SetStateItem{
			Key:      p.messagesKey(),
			Value:    pyDumpsList(t, append([]any{}, msgs...)),
			Etag:     etag,
			Metadata: p.writeMeta(),
			Options:  p.options(true),
		})
		if err == nil {
			return last, nil
		}
		if !pyIsConflict(err) || attempt >= dapr.DefaultMaxAttempts {
			return nil, err
		}
		p.conflicts++
		time.Sleep(pyDelay(attempt))
	}
}

// clear_session()
func (p *pySession) clearSession(ctx context.Context) error {
	if err := p.c.DeleteStateWithETag(ctx, p.store, p.messagesKey(), nil, map[string]string{}, p.options(false)); err != nil {
		return err
	}
	return p.c.DeleteStateWithETag(ctx, p.store, p.metadataKey(), nil, map[string]string{}, p.options(false))
}

// rawValue reads a key's stored value through the state API.
func rawValue(t *testing.T, c daprc.Client, store, key string) []byte {
	t.Helper()
	it, err := c.GetState(context.Background(), store, key, nil)
	require.NoError(t, err)
	return it.Value
}

func itemsOf(t *testing.T, texts ...string) []session.Item {
	t.Helper()
	items, err := session.ParseItems(texts...)
	require.NoError(t, err)
	return items
}

func texts(items []session.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}

func jsonValues(t *testing.T, texts []string) []any {
	t.Helper()
	out := make([]any, len(texts))
	for i, s := range texts {
		require.NoError(t, json.Unmarshal([]byte(s), &out[i]))
	}
	return out
}

// uniqueID gives each test run its own session id, suffixing the layout's.
func uniqueID(t *testing.T, base string) string {
	return base + " " + t.Name() + " " + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// TestPythonReadsGo: Go writes; the stored values are byte for byte
// CPython's for the same items, and the Python class's own reads and pop
// see Go's history.
func TestPythonReadsGo(t *testing.T) {
	ctx := context.Background()
	d := testservers.Daprd(t)
	c := newClient(t, d.GRPCAddr)
	l := loadLayout(t)
	st := newStore(t, c, dapr.Options{StoreName: d.StoreName})
	id := uniqueID(t, l.SessionID)
	s, err := st.Session(id)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Clear(context.Background()) })

	// The layout's values name the layout's id only inside the metadata.
	require.NoError(t, s.AddItems(ctx, itemsOf(t, l.BatchA...)))
	require.Equal(t, l.AfterA, string(rawValue(t, c, d.StoreName, id+":messages")), "messages after the first batch: CPython's bytes")
	require.NoError(t, s.AddItems(ctx, itemsOf(t, l.BatchB...)))
	require.Equal(t, l.AfterAB, string(rawValue(t, c, d.StoreName, id+":messages")), "messages after the second batch")
	wantMeta := strings.Replace(l.Metadata, pyString(t, l.SessionID), pyString(t, id), 1)
	gotMeta := string(rawValue(t, c, d.StoreName, id+":metadata"))
	m := pyLayout{Metadata: wantMeta}.metadataPattern().FindStringSubmatch(gotMeta)
	require.NotNil(t, m, "metadata %s is not json.dumps's %s", gotMeta, wantMeta)
	require.Equal(t, m[1], m[2], "created_at and updated_at are the same time, as Python writes them")

	// daprd keeps the value as given: the Redis hash under "<app id>||<key>".
	rdb := goredis.NewClient(mustRedisOptions(t, d.RedisURL))
	defer rdb.Close()
	stored, err := rdb.HGet(ctx, d.AppID+"||"+id+":messages", "data").Result()
	require.NoError(t, err)
	require.Equal(t, l.AfterAB, stored)

	py := &pySession{c: c, store: d.StoreName, id: id, consistency: "eventual"}
	got, err := py.getItems(ctx)
	require.NoError(t, err)
	require.Equal(t, jsonValues(t, append(append([]string{}, l.BatchA...), l.BatchB...)), got, "Python's get_items reads Go's items")
	popped, err := py.popItem(t, ctx)
	require.NoError(t, err)
	require.Equal(t, l.BatchB[0], popped, "Python's pop_item pops Go's newest item")
	require.Equal(t, l.AfterA, string(rawValue(t, c, d.StoreName, id+":messages")))
	items, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, l.BatchA, texts(items), "Go reads what Python's pop left, byte for byte")

	// An item Go was given with raw UTF-8 keeps its bytes; Python's
	// json.dumps escapes it in the array, and so does Go.
	require.NoError(t, s.Clear(ctx))
	require.NoError(t, s.AddItems(ctx, itemsOf(t, l.GoRawItem)))
	require.Equal(t, l.GoRawArray, string(rawValue(t, c, d.StoreName, id+":messages")))
	got, err = py.getItems(ctx)
	require.NoError(t, err)
	require.Equal(t, jsonValues(t, []string{l.GoRawItem}), got)
	items, err = s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{l.GoRawItem}, texts(items))

	// Python's clear_session leaves nothing Go reads.
	require.NoError(t, py.clearSession(ctx))
	items, err = s.Items(ctx)
	require.NoError(t, err)
	require.Empty(t, items)
}

// TestGoReadsPython: the Python class writes (its exact operations); Go
// reads, pops and clears, and what Go leaves is CPython's bytes.
func TestGoReadsPython(t *testing.T) {
	ctx := context.Background()
	d := testservers.Daprd(t)
	c := newClient(t, d.GRPCAddr)
	l := loadLayout(t)
	id := uniqueID(t, l.SessionID)
	py := &pySession{c: c, store: d.StoreName, id: id, consistency: "strong"}
	t.Cleanup(func() { _ = py.clearSession(context.Background()) })

	require.NoError(t, py.addItems(t, ctx, l.BatchA, 1700000000))
	require.Equal(t, l.AfterA, string(rawValue(t, c, d.StoreName, id+":messages")), "the stand-in writes CPython's bytes")
	require.NoError(t, py.addItems(t, ctx, l.BatchB, 1700000000))
	require.Equal(t, l.AfterAB, string(rawValue(t, c, d.StoreName, id+":messages")))
	require.Equal(t, strings.Replace(l.Metadata, pyString(t, l.SessionID), pyString(t, id), 1),
		string(rawValue(t, c, d.StoreName, id+":metadata")))

	st := newStore(t, c, dapr.Options{StoreName: d.StoreName, Consistency: dapr.ConsistencyStrong})
	s, err := st.Session(id)
	require.NoError(t, err)
	items, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, append(append([]string{}, l.BatchA...), l.BatchB...), texts(items), "Go reads Python's items byte for byte")
	latest, err := s.LatestItems(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, l.BatchB, texts(latest))

	it, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, l.BatchB[0], it.String())
	require.Equal(t, l.AfterA, string(rawValue(t, c, d.StoreName, id+":messages")), "Go's pop leaves what Python's would")

	// Python appends after Go's pop, Go after Python.
	require.NoError(t, py.addItems(t, ctx, l.BatchB, 1700000000))
	require.Equal(t, l.AfterAB, string(rawValue(t, c, d.StoreName, id+":messages")))
	require.NoError(t, s.AddItems(ctx, itemsOf(t, l.GoRawItem)))
	got, err := py.getItems(ctx)
	require.NoError(t, err)
	require.Equal(t, jsonValues(t, append(append(append([]string{}, l.BatchA...), l.BatchB...), l.GoRawItem)), got)

	require.NoError(t, s.Clear(ctx))
	for _, key := range []string{id + ":messages", id + ":metadata"} {
		require.Empty(t, rawValue(t, c, d.StoreName, key), "Go's clear deletes %s, as clear_session", key)
	}
	got, err = py.getItems(ctx)
	require.NoError(t, err)
	require.Empty(t, got)
}

// TestPythonAndGoConcurrent: Python's class (its retries, its five
// tries) and Go's Store write one session at once; nothing is lost or
// interleaved, and each side's failures are only conflict exhaustion.
func TestPythonAndGoConcurrent(t *testing.T) {
	ctx := context.Background()
	d := testservers.Daprd(t)
	id := uniqueID(t, "py-go-concurrent")
	const writers, batches = 3, 15
	st := newStore(t, newClient(t, d.GRPCAddr), dapr.Options{StoreName: d.StoreName})
	s, err := st.Session(id)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Clear(context.Background()) })
	type result struct {
		who       string
		ok        []int
		exhausted int
		conflicts int
		err       error
	}
	results := make(chan result, 2*writers)
	for w := range writers {
		go func() {
			r := result{who: "go" + strconv.Itoa(w)}
			for b := range batches {
				err := s.AddItems(ctx, itemsOf(t, fmt.Sprintf(`{"w":%q,"b":%d,"i":0}`, r.who, b), fmt.Sprintf(`{"w":%q,"b":%d,"i":1}`, r.who, b)))
				switch {
				case err == nil:
					r.ok = append(r.ok, b)
				case errors.Is(err, dapr.ErrConflict):
					r.exhausted++
				default:
					r.err = err
				}
			}
			results <- r
		}()
		go func() {
			py := &pySession{c: newClient(t, d.GRPCAddr), store: d.StoreName, id: id, consistency: "eventual"}
			r := result{who: "py" + strconv.Itoa(w)}
			for b := range batches {
				err := py.addItems(t, ctx, []string{fmt.Sprintf(`{"w":%q,"b":%d,"i":0}`, r.who, b), fmt.Sprintf(`{"w":%q,"b":%d,"i":1}`, r.who, b)}, time.Now().Unix())
				switch {
				case err == nil:
					r.ok = append(r.ok, b)
				case pyIsConflict(err):
					r.exhausted++
				default:
					r.err = err
				}
			}
			r.conflicts = py.conflicts
			results <- r
		}()
	}
	want := map[string][]int{}
	for range 2 * writers {
		r := <-results
		require.NoError(t, r.err, r.who)
		want[r.who] = r.ok
		t.Logf("%s: %d batches written, %d failed after %d tries (conflict retries by the stand-in: %d)", r.who, len(r.ok), r.exhausted, dapr.DefaultMaxAttempts, r.conflicts)
	}
	items, err := s.Items(ctx)
	require.NoError(t, err)
	got := map[string][]int{}
	for i := 0; i < len(items); i += 2 {
		var a, b struct {
			W    string
			B, I int
		}
		require.NoError(t, json.Unmarshal(items[i].Bytes(), &a))
		require.Less(t, i+1, len(items), "a batch was cut")
		require.NoError(t, json.Unmarshal(items[i+1].Bytes(), &b))
		require.Equal(t, [3]any{a.W, a.B, 0}, [3]any{b.W, b.B, a.I}, "batch interleaved at %d", i)
		require.Equal(t, 1, b.I, "batch interleaved at %d", i)
		got[a.W] = append(got[a.W], a.B)
	}
	for who, bs := range want {
		require.Equal(t, bs, got[who], "%s: the batches it was told were written, once each, in order", who)
	}
}

func mustRedisOptions(t *testing.T, url string) *goredis.Options {
	t.Helper()
	o, err := goredis.ParseURL(url)
	require.NoError(t, err)
	return o
}
