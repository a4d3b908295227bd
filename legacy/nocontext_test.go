package legacy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/legacy"
	"github.com/agentsessions/sessions/session"
)

// loggedPlain records every call into a PlainSession, and runs hook (if
// set) inside each call, as a slow backend would be mid-call.
type loggedPlain struct {
	legacy.PlainSession
	log  *callLog
	hook func()
}

func (s loggedPlain) during(name string) {
	s.log.add("%s", name)
	if s.hook != nil {
		s.hook()
	}
}
func (s loggedPlain) Items() ([]session.Item, error) {
	s.during("Items")
	return s.PlainSession.Items()
}
func (s loggedPlain) AddItems(items []session.Item) error {
	s.during("AddItems")
	return s.PlainSession.AddItems(items)
}
func (s loggedPlain) PopItem() (session.Item, bool, error) {
	s.during("PopItem")
	return s.PlainSession.PopItem()
}
func (s loggedPlain) Clear() error {
	s.during("Clear")
	return s.PlainSession.Clear()
}

func TestFromPlainTranslation(t *testing.T) {
	three := msgs("p", 3)
	for _, tc := range []struct {
		name    string
		stored  []session.Item
		ctx     context.Context
		call    op
		calls   []string
		want    outcome
		wantErr error
		after   []session.Item // nil: unchanged
	}{
		{name: "Items", stored: three, call: itemsCall, calls: []string{"Items"}, want: outcome{items: texts(three)}},
		{name: "Latest falls back to Items", stored: three, call: func(ctx context.Context, s session.Session) (outcome, error) {
			it, err := session.Latest(ctx, s, 2)
			return outcome{items: textsOrNil(it, err)}, err
		}, calls: []string{"Items"}, want: outcome{items: texts(three[1:])}},
		{name: "AddItems", call: addCall(three[:2]), calls: []string{"AddItems"}, after: three[:2]},
		{name: "an empty batch calls nothing", stored: three[:1], call: addCall(nil)},
		{name: "an invalid batch calls nothing", stored: three[:1], call: addCall([]session.Item{three[1], {}}), wantErr: session.ErrInvalidItem},
		{name: "PopItem", stored: three, call: popCall, calls: []string{"PopItem"},
			want: outcome{items: texts(three[2:]), ok: true}, after: three[:2]},
		{name: "PopItem on empty", call: popCall, calls: []string{"PopItem"}, want: outcome{}},
		{name: "Clear", stored: three, call: clearCall, calls: []string{"Clear"}, after: []session.Item{}},
		{name: "a cancelled Items calls nothing", stored: three, ctx: cancelled(), call: itemsCall, wantErr: context.Canceled},
		{name: "a cancelled AddItems calls nothing", stored: three[:1], ctx: cancelled(), call: addCall(three[1:]), wantErr: context.Canceled},
		{name: "a cancelled PopItem calls nothing", stored: three, ctx: cancelled(), call: popCall, wantErr: context.Canceled},
		{name: "a cancelled Clear calls nothing", stored: three, ctx: cancelled(), call: clearCall, wantErr: context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			mem, err := memory.NewSession("s")
			require.NoError(t, err)
			if len(tc.stored) > 0 {
				require.NoError(t, mem.AddItems(ctx, tc.stored))
			}
			log := &callLog{}
			s := legacy.FromPlain(loggedPlain{PlainSession: legacy.ToPlain(mem), log: log})
			assert.Equal(t, session.Capabilities(0), session.Probe(s), "FromPlain implements no optional capability")
			if tc.ctx != nil {
				ctx = tc.ctx
			}
			got, err := tc.call(ctx, s)
			assert.Equal(t, tc.calls, log.take())
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
			left, err := mem.Items(context.Background())
			require.NoError(t, err)
			assert.Equal(t, append([]string{}, texts(after)...), texts(left))
		})
	}
}

// A cancellation that arrives while the plain session is working cannot
// stop it: the call completes and reports its real outcome; the next call
// sees the cancellation.
func TestFromPlainCancelMidCall(t *testing.T) {
	mem, err := memory.NewSession("s")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	log := &callLog{}
	s := legacy.FromPlain(loggedPlain{PlainSession: legacy.ToPlain(mem), log: log, hook: cancel})
	require.NoError(t, s.AddItems(ctx, msgs("a", 2)), "a started write completes and says so")
	assert.True(t, errors.Is(s.AddItems(ctx, msgs("b", 1)), context.Canceled), "the next call sees the cancellation")
	assert.Equal(t, []string{"AddItems"}, log.take())
	got, err := mem.Items(context.Background())
	require.NoError(t, err)
	assert.Equal(t, texts(msgs("a", 2)), texts(got))
}

func TestFromPlainEmptyID(t *testing.T) {
	log := &callLog{}
	s := legacy.FromPlain(loggedPlain{PlainSession: newPlainStore(nil).session(""), log: log})
	ctx := context.Background()
	for name, err := range map[string]error{
		"AddItems": s.AddItems(ctx, msgs("x", 1)),
		"Items":    func() error { _, err := s.Items(ctx); return err }(),
		"PopItem":  func() error { _, _, err := s.PopItem(ctx); return err }(),
		"Clear":    s.Clear(ctx),
	} {
		assert.True(t, errors.Is(err, session.ErrInvalidSessionID), "%s: %v", name, err)
	}
	assert.Empty(t, log.take())
}

// runContextSession accepts the run context and records what it sees.
type runContextSession struct {
	*memory.Session
	seen *[]any
}

func (s runContextSession) AcceptsRunContext() bool { return true }
func (s runContextSession) Items(ctx context.Context) ([]session.Item, error) {
	rc, _ := session.RunContext(ctx)
	*s.seen = append(*s.seen, rc)
	return s.Session.Items(ctx)
}

// ToPlain calls with context.Background(): never cancelled, no run context.
func TestToPlain(t *testing.T) {
	mem, err := memory.NewSession("s")
	require.NoError(t, err)
	var seen []any
	p := legacy.ToPlain(runContextSession{mem, &seen})
	assert.Equal(t, "s", p.SessionID())
	require.NoError(t, p.AddItems(msgs("a", 3)))
	got, err := p.Items()
	require.NoError(t, err)
	assert.Equal(t, texts(msgs("a", 3)), texts(got))
	assert.Equal(t, []any{nil}, seen, "no run context reaches the session")
	it, ok, err := p.PopItem()
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, msgs("a", 3)[2].String(), it.String())
	require.NoError(t, p.Clear())
	_, ok, err = p.PopItem()
	require.NoError(t, err)
	assert.False(t, ok)
	assert.True(t, errors.Is(p.AddItems([]session.Item{{}}), session.ErrInvalidItem))
}
