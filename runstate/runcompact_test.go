package runstate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/internal/capwrap"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runCompactor is a compaction-aware session over a memory session, with
// its checkpoints, that compacts for real (the user messages, then one
// compaction item) and checks, at every compaction, that nothing of the
// run stands open in the stored checkpoint.
type runCompactor struct {
	session.Session
	t        *testing.T
	store    session.CheckpointStore
	log      []string
	deferred string
	fail     error
	n        int
}

func (c *runCompactor) AcceptsRunContext() bool    { return false }
func (c *runCompactor) IgnoreIDsForMatching() bool { return false }

func (c *runCompactor) RunCompaction(ctx context.Context, args session.CompactionArgs) error {
	c.log = append(c.log, fmt.Sprintf("ran:%s:force=%v", args.ResponseID, args.Force))
	if c.fail != nil {
		return c.fail
	}
	doc, _, err := c.store.LoadCheckpoint(ctx, runstate.DefaultName)
	require.NoError(c.t, err)
	cp, err := runstate.Load(doc)
	require.NoError(c.t, err)
	assert.Nil(c.t, cp.Pending, "a compaction ran while a write was pending")
	assert.False(c.t, cp.HasHeld(), "a compaction ran while a batch was held")
	assert.Empty(c.t, cp.Claims(), "a compaction ran while a call was claimed")
	items, err := session.All(ctx, c.Session)
	require.NoError(c.t, err)
	var out []session.Item
	for _, it := range items {
		if it.Role() == "user" || it.Type() == "compaction" {
			out = append(out, it)
		}
	}
	c.n++
	out = append(out, session.MustItem(fmt.Sprintf(`{"type":"compaction","id":"cmp_%d","encrypted_content":"x"}`, c.n)))
	c.deferred = ""
	return session.Replace(ctx, c.Session, out)
}

func (c *runCompactor) DeferCompaction(_ context.Context, responseID string, _ *bool) error {
	c.log = append(c.log, "deferred:"+responseID)
	c.deferred = responseID
	return nil
}

func (c *runCompactor) DeferredCompaction() (string, bool) { return c.deferred, c.deferred != "" }

// newRunCompactor returns the compactor over a new memory session, with
// the atomic commit (atomic) or without it (the digest protocol).
func newRunCompactor(t *testing.T, atomic bool) (session.Session, *runCompactor) {
	mem, err := memory.New(memory.Options{}).Session("conv")
	require.NoError(t, err)
	c := &runCompactor{Session: mem, t: t, store: mem}
	p := capwrap.Of(mem)
	p.Compaction, p.Deferrer = c.RunCompaction, c
	if !atomic {
		p.Commit = nil
	}
	return capwrap.Compose(c, p), c
}

// The Run compacts as the Python runner does, after its saves and never
// inside one: after a turn with a response id; deferred (and forced at the
// next turn) when the turn carries local tool outputs, when it ends
// awaiting approval, or when a held batch settles; never while a write is
// pending, a batch held or a call claimed; never cutting a call from its
// output.
func TestRunCompactsAfterItsSaves(t *testing.T) {
	for _, atomic := range []bool{true, false} {
		t.Run(map[bool]string{true: "atomic", false: "digests"}[atomic], func(t *testing.T) {
			ctx := context.Background()
			s, c := newRunCompactor(t, atomic)
			open := func(opts runstate.Options) *runstate.Run {
				r, err := runstate.Open(ctx, s, opts)
				require.NoError(t, err)
				return r
			}
			r := open(runstate.Options{})
			require.NoError(t, r.Input(ctx, userMsg("one")))
			require.NoError(t, r.Turn(ctx, "resp_1", reasoningItem("rs_1"), assistantMsg("a")))
			assert.Equal(t, runstate.CompactionRan, r.Compaction().Kind)
			require.NoError(t, r.Turn(ctx, "resp_2", fnCall("c1"), fnOutput("c1", "done")))
			assert.Equal(t, runstate.CompactionDeferred, r.Compaction().Kind)
			require.NoError(t, r.Turn(ctx, "resp_3", assistantMsg("b")))
			assert.True(t, r.Compaction().Force)

			// Gate off: the interrupted turn is saved, its call awaits.
			require.NoError(t, r.Input(ctx, userMsg("two")))
			require.NoError(t, r.Interrupt(ctx, "resp_4", items(fnCall("c2")), "c2"))
			r = open(runstate.Options{}) // a restart
			require.NoError(t, r.Claim(ctx, "c2"))
			require.NoError(t, r.Output(ctx, fnOutput("c2", "done")))
			require.NoError(t, r.Settle(ctx))
			require.NoError(t, r.Turn(ctx, "resp_5", assistantMsg("c")))

			// Gate on: the turn rides the checkpoint until it settles with
			// the final output.
			gated := runstate.Options{OutputGuardrails: true, ToolUse: runstate.ToolUseStopOnFirstTool}
			r = open(gated)
			require.NoError(t, r.Input(ctx, userMsg("three")))
			require.NoError(t, r.Interrupt(ctx, "resp_6", items(fnCall("c3")), "c3"))
			r = open(gated)
			require.NoError(t, r.Output(ctx, fnOutput("c3", "done")))
			require.NoError(t, r.Finish(ctx, "resp_7", assistantMsg("d")))

			assert.Equal(t, []string{
				"ran:resp_1:force=false",
				"deferred:resp_2",
				"ran:resp_3:force=true",
				"deferred:resp_4",
				"ran:resp_5:force=true",
				"deferred:resp_7",
			}, c.log)
			got, err := session.All(ctx, s)
			require.NoError(t, err)
			assert.Empty(t, history.Diagnose(got), "%v", got)
			assert.Equal(t, 3, count(got, "compaction"))
		})
	}
}

// A failed compaction fails the Turn with ErrCompaction, the turn saved;
// the Turn repeated writes nothing, and the next turn forces one.
func TestRunCompactionFailureKeepsTheTurn(t *testing.T) {
	ctx := context.Background()
	s, c := newRunCompactor(t, true)
	r, err := runstate.Open(ctx, s, runstate.Options{})
	require.NoError(t, err)
	require.NoError(t, r.Input(ctx, userMsg("one")))
	c.fail = errors.New("compact: 500")
	err = r.Turn(ctx, "resp_1", assistantMsg("a"))
	require.ErrorIs(t, err, runstate.ErrCompaction)
	require.NoError(t, r.Turn(ctx, "resp_1", assistantMsg("a")), "the repeated turn")
	got, err := session.All(ctx, s)
	require.NoError(t, err)
	assert.Equal(t, 2, len(got), "the turn landed once: %v", got)
	c.fail = nil
	require.NoError(t, r.Turn(ctx, "resp_2", assistantMsg("b")))
	assert.Equal(t, []string{"ran:resp_1:force=false", "ran:resp_2:force=false"}, c.log)
}

func userMsg(text string) session.Item {
	return session.MustItem(`{"role":"user","content":"` + text + `"}`)
}

func assistantMsg(text string) session.Item {
	return session.MustItem(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"` + text + `"}]}`)
}

func reasoningItem(id string) session.Item {
	return session.MustItem(`{"type":"reasoning","id":"` + id + `","summary":[]}`)
}

func count(items []session.Item, typ string) int {
	n := 0
	for _, it := range items {
		if strings.EqualFold(it.Type(), typ) {
			n++
		}
	}
	return n
}
