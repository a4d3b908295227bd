package legacy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/legacy"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// callLog records the calls a shim makes on the session it wraps.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
}

func (l *callLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.calls
	l.calls = nil
	return out
}

// loggedLimit records every call into a LimitSession.
type loggedLimit struct {
	legacy.LimitSession[json.RawMessage]
	log *callLog
}

func (s loggedLimit) GetItems(ctx context.Context, limit int) ([]json.RawMessage, error) {
	s.log.add("GetItems(%d)", limit)
	return s.LimitSession.GetItems(ctx, limit)
}
func (s loggedLimit) AddItems(ctx context.Context, items []json.RawMessage) error {
	s.log.add("AddItems(%d)", len(items))
	return s.LimitSession.AddItems(ctx, items)
}
func (s loggedLimit) PopItem(ctx context.Context) (*json.RawMessage, error) {
	s.log.add("PopItem")
	return s.LimitSession.PopItem(ctx)
}
func (s loggedLimit) ClearSession(ctx context.Context) error {
	s.log.add("ClearSession")
	return s.LimitSession.ClearSession(ctx)
}

// loggedCore records every call into a session.Session (core methods
// only: it has no LatestReader).
type loggedCore struct {
	s   session.Session
	log *callLog
}

func (s loggedCore) SessionID() string { return s.s.SessionID() }
func (s loggedCore) Items(ctx context.Context) ([]session.Item, error) {
	s.log.add("Items")
	return s.s.Items(ctx)
}
func (s loggedCore) AddItems(ctx context.Context, items []session.Item) error {
	s.log.add("AddItems(%d)", len(items))
	return s.s.AddItems(ctx, items)
}
func (s loggedCore) PopItem(ctx context.Context) (session.Item, bool, error) {
	s.log.add("PopItem")
	return s.s.PopItem(ctx)
}
func (s loggedCore) Clear(ctx context.Context) error {
	s.log.add("Clear")
	return s.s.Clear(ctx)
}

// loggedLatest adds a logged LatestItems.
type loggedLatest struct{ loggedCore }

func (s loggedLatest) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	s.log.add("LatestItems(%d)", n)
	return s.s.(session.LatestReader).LatestItems(ctx, n)
}

func msgs(tag string, n int) []session.Item { return conformance.Numbered(tag, n) }

func texts(items []session.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}

func rawTexts(items []json.RawMessage) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = string(it)
	}
	return out
}

func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// outcome is what one call returned, as text.
type outcome struct {
	items []string
	ok    bool
}

type op func(ctx context.Context, s session.Session) (outcome, error)

func itemsCall(ctx context.Context, s session.Session) (outcome, error) {
	it, err := s.Items(ctx)
	return outcome{items: textsOrNil(it, err)}, err
}

func latestCall(n int) op {
	return func(ctx context.Context, s session.Session) (outcome, error) {
		it, err := s.(session.LatestReader).LatestItems(ctx, n)
		return outcome{items: textsOrNil(it, err)}, err
	}
}

func addCall(items []session.Item) op {
	return func(ctx context.Context, s session.Session) (outcome, error) {
		return outcome{}, s.AddItems(ctx, items)
	}
}

func popCall(ctx context.Context, s session.Session) (outcome, error) {
	it, ok, err := s.PopItem(ctx)
	if !ok {
		return outcome{ok: false}, err
	}
	return outcome{items: []string{it.String()}, ok: true}, err
}

func clearCall(ctx context.Context, s session.Session) (outcome, error) {
	return outcome{}, s.Clear(ctx)
}

func textsOrNil(items []session.Item, err error) []string {
	if err != nil {
		return nil
	}
	return texts(items)
}

// TestFromLimitSessionTranslation is the golden table of what each call on
// FromLimitSession's result does to the wrapped nlpodyssey-shaped session.
func TestFromLimitSessionTranslation(t *testing.T) {
	five := msgs("m", 5)
	for _, tc := range []struct {
		name    string
		stored  []string // raw records in the wrapped session
		ctx     context.Context
		call    op
		calls   []string // calls the wrapped session receives
		want    outcome
		wantErr error
		after   []string // records left in the wrapped session; nil: unchanged
		reports int      // corrupt-record reports
	}{
		{name: "Items reads everything with limit 0", stored: texts(five), call: itemsCall,
			calls: []string{"GetItems(0)"}, want: outcome{items: texts(five)}},
		{name: "Items of an empty session is empty, not nil", call: itemsCall,
			calls: []string{"GetItems(0)"}, want: outcome{items: []string{}}},
		{name: "LatestItems(3) is GetItems(3)", stored: texts(five), call: latestCall(3),
			calls: []string{"GetItems(3)"}, want: outcome{items: texts(five[2:])}},
		{name: "LatestItems(n) above the count is GetItems(n)", stored: texts(five), call: latestCall(10),
			calls: []string{"GetItems(10)"}, want: outcome{items: texts(five)}},
		{name: "LatestItems(0) calls nothing and is empty (their 0 means all)", stored: texts(five), call: latestCall(0),
			want: outcome{items: []string{}}},
		{name: "LatestItems(-1) calls nothing and is ErrInvalidLimit (their -1 means all)", stored: texts(five), call: latestCall(-1),
			wantErr: session.ErrInvalidLimit},
		{name: "LatestItems doubles its window past corrupt records", stored: append(texts(five), "garbage", `[1]`), call: latestCall(2),
			calls: []string{"GetItems(2)", "GetItems(4)"}, want: outcome{items: texts(five[3:])}, reports: 2},
		{name: "LatestItems stops once a read comes back short", stored: []string{`"x"`, five[0].String()}, call: latestCall(2),
			calls: []string{"GetItems(2)", "GetItems(4)"}, want: outcome{items: texts(five[:1])}, reports: 1},
		{name: "Items skips and reports corrupt records", stored: []string{five[0].String(), "garbage", five[1].String()}, call: itemsCall,
			calls: []string{"GetItems(0)"}, want: outcome{items: texts(five[:2])}, reports: 1},
		{name: "AddItems passes the batch in one call", call: addCall(five[:2]),
			calls: []string{"AddItems(2)"}, after: texts(five[:2])},
		{name: "an empty batch calls nothing", stored: texts(five[:1]), call: addCall(nil)},
		{name: "an invalid batch calls nothing", stored: texts(five[:1]), call: addCall([]session.Item{five[1], {}}),
			wantErr: session.ErrInvalidItem},
		{name: "PopItem on an empty session reads and pops nothing", call: popCall,
			calls: []string{"GetItems(1)"}, want: outcome{ok: false}},
		{name: "PopItem reads the newest, then pops it", stored: texts(five[:2]), call: popCall,
			calls: []string{"GetItems(1)", "PopItem"}, want: outcome{items: texts(five[1:2]), ok: true}, after: texts(five[:1])},
		{name: "PopItem keeps a corrupt newest record and fails", stored: append(texts(five[:2]), "garbage"), call: popCall,
			calls: []string{"GetItems(1)"}, wantErr: session.ErrCorruptRecord, after: append(texts(five[:2]), "garbage"), reports: 1},
		{name: "Clear is ClearSession", stored: texts(five), call: clearCall,
			calls: []string{"ClearSession"}, after: []string{}},
		{name: "a cancelled Items calls nothing", stored: texts(five), ctx: cancelled(), call: itemsCall, wantErr: context.Canceled},
		{name: "a cancelled LatestItems calls nothing", stored: texts(five), ctx: cancelled(), call: latestCall(1), wantErr: context.Canceled},
		{name: "a cancelled AddItems calls nothing", stored: texts(five[:1]), ctx: cancelled(), call: addCall(five[1:2]), wantErr: context.Canceled},
		{name: "a cancelled PopItem calls nothing", stored: texts(five), ctx: cancelled(), call: popCall, wantErr: context.Canceled},
		{name: "a cancelled Clear calls nothing", stored: texts(five), ctx: cancelled(), call: clearCall, wantErr: context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newLimitStore()
			for _, r := range tc.stored {
				st.appendRaw("s", []byte(r))
			}
			log := &callLog{}
			var coll driver.CorruptLog
			s := legacy.FromLimitSessionWith[json.RawMessage](loggedLimit{st.session("s"), log},
				legacy.LimitOptions[json.RawMessage]{OnCorrupt: coll.Handler()})
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			got, err := tc.call(ctx, s)
			assert.Equal(t, tc.calls, log.take(), "calls on the wrapped session")
			if tc.wantErr != nil {
				require.Error(t, err)
				require.True(t, errors.Is(err, tc.wantErr), "want %v, got %v", tc.wantErr, err)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
			}
			after := tc.after
			if after == nil {
				after = tc.stored
			}
			left, err := st.session("s").GetItems(context.Background(), 0)
			require.NoError(t, err)
			assert.Equal(t, append([]string{}, after...), rawTexts(left), "records left")
			reports := coll.Reports("s")
			assert.Len(t, reports, tc.reports)
			for _, r := range reports {
				assert.NotEmpty(t, r.Position)
				assert.NotEmpty(t, r.Raw, "a report keeps the record's bytes")
				assert.Error(t, r.Err)
			}
		})
	}
}

// TestToLimitSessionTranslation is the golden table of what each call on
// ToLimitSession's result does to the wrapped session.Session, with and
// without LatestReader.
func TestToLimitSessionTranslation(t *testing.T) {
	five := msgs("m", 5)
	type limitOp func(ctx context.Context, s legacy.LimitSession[json.RawMessage]) (outcome, error)
	get := func(limit int) limitOp {
		return func(ctx context.Context, s legacy.LimitSession[json.RawMessage]) (outcome, error) {
			items, err := s.GetItems(ctx, limit)
			return outcome{items: rawTexts(items)}, err
		}
	}
	pop := func(ctx context.Context, s legacy.LimitSession[json.RawMessage]) (outcome, error) {
		p, err := s.PopItem(ctx)
		if p == nil {
			return outcome{}, err
		}
		return outcome{items: []string{string(*p)}, ok: true}, err
	}
	add := func(items ...string) limitOp {
		return func(ctx context.Context, s legacy.LimitSession[json.RawMessage]) (outcome, error) {
			raw := make([]json.RawMessage, len(items))
			for i, it := range items {
				raw[i] = json.RawMessage(it)
			}
			return outcome{}, s.AddItems(ctx, raw)
		}
	}
	clear := func(ctx context.Context, s legacy.LimitSession[json.RawMessage]) (outcome, error) {
		return outcome{}, s.ClearSession(ctx)
	}
	for _, tc := range []struct {
		name    string
		latest  bool // the wrapped session implements LatestReader
		stored  []session.Item
		call    limitOp
		calls   []string
		want    outcome
		wantErr error
		after   []session.Item // nil: unchanged
	}{
		{name: "GetItems(0) is Items (their 0 means all)", latest: true, stored: five, call: get(0),
			calls: []string{"Items"}, want: outcome{items: texts(five)}},
		{name: "GetItems(-1) is Items (their negative means all)", latest: true, stored: five, call: get(-1),
			calls: []string{"Items"}, want: outcome{items: texts(five)}},
		{name: "GetItems(3) is LatestItems(3)", latest: true, stored: five, call: get(3),
			calls: []string{"LatestItems(3)"}, want: outcome{items: texts(five[2:])}},
		{name: "GetItems(9) is LatestItems(9)", latest: true, stored: five, call: get(9),
			calls: []string{"LatestItems(9)"}, want: outcome{items: texts(five)}},
		{name: "GetItems(3) without LatestReader reads all and keeps the newest 3", stored: five, call: get(3),
			calls: []string{"Items"}, want: outcome{items: texts(five[2:])}},
		{name: "GetItems(0) without LatestReader is Items", stored: five, call: get(0),
			calls: []string{"Items"}, want: outcome{items: texts(five)}},
		{name: "AddItems is one AddItems", latest: true, call: add(five[0].String(), five[1].String()),
			calls: []string{"AddItems(2)"}, after: five[:2]},
		{name: "AddItems of a non-object writes nothing", latest: true, stored: five[:1], call: add(five[1].String(), `[1]`),
			wantErr: session.ErrInvalidItem},
		{name: "PopItem on empty is nil", latest: true, call: pop,
			calls: []string{"PopItem"}, want: outcome{}},
		{name: "PopItem returns the newest", latest: true, stored: five[:3], call: pop,
			calls: []string{"PopItem"}, want: outcome{items: texts(five[2:3]), ok: true}, after: five[:2]},
		{name: "ClearSession is Clear", latest: true, stored: five, call: clear,
			calls: []string{"Clear"}, after: []session.Item{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, err := memory.NewSession("s")
			require.NoError(t, err)
			ctx := context.Background()
			if len(tc.stored) > 0 {
				require.NoError(t, mem.AddItems(ctx, tc.stored))
			}
			log := &callLog{}
			var wrapped session.Session = loggedCore{mem, log}
			if tc.latest {
				wrapped = loggedLatest{loggedCore{mem, log}}
			}
			s := legacy.ToLimitSession[json.RawMessage](wrapped, nil)
			assert.Equal(t, "s", s.SessionID(ctx))
			got, err := tc.call(ctx, s)
			assert.Equal(t, tc.calls, log.take(), "calls on the wrapped session")
			if tc.wantErr != nil {
				require.True(t, errors.Is(err, tc.wantErr), "want %v, got %v", tc.wantErr, err)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
			}
			after := tc.after
			if after == nil {
				after = tc.stored
			}
			left, err := mem.Items(ctx)
			require.NoError(t, err)
			assert.Equal(t, append([]string{}, texts(after)...), texts(left))
		})
	}
}

// A codec over a Go struct: items it cannot decode are skipped and
// reported, and a limit counts decodable items only.
func TestToLimitSessionUndecodable(t *testing.T) {
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	ctx := context.Background()
	mem, err := memory.NewSession("s")
	require.NoError(t, err)
	items, err := session.ParseItems(
		`{"role":"user","content":"a"}`,
		`{"role":"user","content":"b"}`,
		`{"role":1}`,
		`{"role":"assistant","content":"c"}`,
		`{"content":["not","a","string"]}`,
	)
	require.NoError(t, err)
	require.NoError(t, mem.AddItems(ctx, items))
	var coll driver.CorruptLog
	s := legacy.ToLimitSessionWith[msg](mem, legacy.LimitOptions[msg]{OnCorrupt: coll.Handler()})

	got, err := s.GetItems(ctx, 2)
	require.NoError(t, err)
	assert.Equal(t, []msg{{"user", "b"}, {"assistant", "c"}}, got, "the limit counts decodable items")
	all, err := s.GetItems(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, []msg{{"user", "a"}, {"user", "b"}, {"assistant", "c"}}, all)
	require.NotEmpty(t, coll.Reports("s"), "undecodable items are reported")

	p, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.NotNil(t, p)
	assert.Equal(t, msg{"assistant", "c"}, *p, "a pop drops the undecodable newest item and pops on")

	require.NoError(t, s.AddItems(ctx, []msg{{"user", "d"}}))
	last, err := session.Latest(ctx, mem, 1)
	require.NoError(t, err)
	assert.Equal(t, `{"role":"user","content":"d"}`, last[0].String(), "a struct is re-encoded by encoding/json")
}

func TestJSONCodec(t *testing.T) {
	raw := legacy.JSONCodec[json.RawMessage]{}
	for _, in := range []string{
		`{ "z" : 1 ,  "a" : [ 1 , 2 ] }`,
		` {"html":"<a href='x'>&amp;</a>"} `,
		`{"n":1.0,"big":12345678901234567890,"dup":1,"dup":2}`,
	} {
		it, err := raw.Encode(json.RawMessage(in))
		require.NoError(t, err)
		assert.Equal(t, in, it.String(), "json.RawMessage keeps its bytes: no compaction, no HTML escaping")
		back, err := raw.Decode(it)
		require.NoError(t, err)
		assert.Equal(t, in, string(back))
	}
	for _, bad := range []json.RawMessage{nil, json.RawMessage(`[1]`), json.RawMessage(`garbage`), json.RawMessage(`"s"`)} {
		_, err := raw.Encode(bad)
		assert.True(t, errors.Is(err, session.ErrInvalidItem), "%q: %v", bad, err)
	}

	item := legacy.JSONCodec[session.Item]{}
	src := session.MustItem(`{ "a" : 1 }`)
	it, err := item.Encode(src)
	require.NoError(t, err)
	assert.True(t, src.Equal(it))
	back, err := item.Decode(it)
	require.NoError(t, err)
	assert.True(t, src.Equal(back))
	_, err = item.Encode(session.Item{})
	assert.True(t, errors.Is(err, session.ErrInvalidItem))

	type msg struct {
		Role string `json:"role"`
	}
	st := legacy.JSONCodec[msg]{}
	it, err = st.Encode(msg{"user"})
	require.NoError(t, err)
	assert.Equal(t, `{"role":"user"}`, it.String())
	m, err := st.Decode(session.MustItem(`{ "role" : "x", "extra": 1 }`))
	require.NoError(t, err)
	assert.Equal(t, msg{"x"}, m)
	_, err = st.Decode(session.Item{})
	assert.Error(t, err)

	_, err = legacy.JSONCodec[[]int]{}.Encode([]int{1})
	assert.True(t, errors.Is(err, session.ErrInvalidItem), "an array is not an item")
}

// The two directions compose to the identity on items.
func TestLimitRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := newLimitStore()
	nl := st.session("s")
	ours := legacy.FromLimitSession[json.RawMessage](nl, nil)
	back := legacy.ToLimitSession[json.RawMessage](ours, nil)
	require.NoError(t, back.AddItems(ctx, []json.RawMessage{json.RawMessage(`{ "a" : 1 }`), json.RawMessage(`{"b":2}`)}))
	got, err := nl.GetItems(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{`{ "a" : 1 }`, `{"b":2}`}, rawTexts(got))
	got, err = back.GetItems(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, []string{`{"b":2}`}, rawTexts(got))
	assert.Equal(t, "s", back.SessionID(ctx))
	assert.Equal(t, "s", ours.SessionID())
	assert.Equal(t, session.Caps(session.CapLatest), session.Probe(ours))
}

// An empty id is refused at every call, before the wrapped session is
// touched.
func TestLimitEmptyID(t *testing.T) {
	ctx := context.Background()
	log := &callLog{}
	s := legacy.FromLimitSession[json.RawMessage](loggedLimit{newLimitStore().session(""), log}, nil)
	for name, err := range map[string]error{
		"AddItems": s.AddItems(ctx, msgs("x", 1)),
		"Items":    func() error { _, err := s.Items(ctx); return err }(),
		"Latest":   func() error { _, err := session.Latest(ctx, s, 1); return err }(),
		"PopItem":  func() error { _, _, err := s.PopItem(ctx); return err }(),
		"Clear":    s.Clear(ctx),
	} {
		assert.True(t, errors.Is(err, session.ErrInvalidSessionID), "%s: %v", name, err)
	}
	assert.Empty(t, log.take())
}
