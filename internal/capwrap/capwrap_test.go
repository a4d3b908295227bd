package capwrap

import (
	"context"
	"testing"
	"time"

	"github.com/agentsessions/sessions/session"
)

type core struct {
	session.Session
	aware, ignores bool
}

func (c core) AcceptsRunContext() bool    { return c.aware }
func (c core) IgnoreIDsForMatching() bool { return c.ignores }

type fullDeferrer struct{ session.Session }

func (fullDeferrer) TTL() time.Duration                                          { return time.Minute }
func (fullDeferrer) ExpiresIn(context.Context) (time.Duration, bool, error)      { return 0, false, nil }
func (fullDeferrer) Touch(context.Context) error                                 { return nil }
func (fullDeferrer) RunCompaction(context.Context, session.CompactionArgs) error { return nil }
func (fullDeferrer) DeferCompaction(context.Context, string, *bool) error        { return nil }
func (fullDeferrer) DeferredCompaction() (string, bool)                          { return "", false }
func (fullDeferrer) LoadCheckpoint(context.Context, string) ([]byte, int64, error) {
	return nil, 0, session.ErrNoCheckpoint
}
func (fullDeferrer) SaveCheckpoint(context.Context, string, []byte, int64) (int64, error) {
	return 1, nil
}
func (fullDeferrer) DeleteCheckpoint(context.Context, string, int64) error        { return nil }
func (fullDeferrer) ListCheckpoints(context.Context) ([]string, error)            { return nil, nil }
func (fullDeferrer) HistoryVersion(context.Context) (string, error)               { return "", nil }
func (fullDeferrer) ReplaceItemsIf(context.Context, string, []session.Item) error { return nil }
func (fullDeferrer) AppendWithCheckpoint(context.Context, []session.Item, string, []byte, int64) (int64, error) {
	return 1, nil
}

// TestComposeKeepsExactlyTheParts checks every combination: the composed
// value probes as having exactly the parts given, and the two run-time
// answers are the core's.
func TestComposeKeepsExactlyTheParts(t *testing.T) {
	full := fullDeferrer{}
	latest := func(context.Context, int) ([]session.Item, error) { return nil, nil }
	replace := func(context.Context, []session.Item) error { return nil }
	follow := func(context.Context, session.Cursor) ([]session.Item, session.Cursor, error) { return nil, "", nil }
	once := func(context.Context, string, []session.Item) (bool, error) { return true, nil }
	for m := 0; m < 1024; m++ {
		if m&16 != 0 && m&8 == 0 || m&64 != 0 && m&32 == 0 || m&128 != 0 && m&2 == 0 {
			continue
		}
		var p Parts
		want := session.Capabilities(0)
		if m&1 != 0 {
			p.Latest, want = latest, want|session.Caps(session.CapLatest)
		}
		if m&2 != 0 {
			p.Replace, want = replace, want|session.Caps(session.CapReplace)
		}
		if m&4 != 0 {
			p.Expirer, want = full, want|session.Caps(session.CapTTL)
		}
		if m&8 != 0 {
			p.Compaction, want = full.RunCompaction, want|session.Caps(session.CapCompaction)
		}
		if m&16 != 0 {
			p.Deferrer, want = full, want|session.Caps(session.CapCompactionDeferral)
		}
		if m&32 != 0 {
			p.Checkpoints, want = full, want|session.Caps(session.CapCheckpoints)
		}
		if m&64 != 0 {
			p.Commit, want = full.AppendWithCheckpoint, want|session.Caps(session.CapCheckpointCommit)
		}
		if m&128 != 0 {
			p.Versioned, want = full, want|session.Caps(session.CapVersionedReplace)
		}
		if m&256 != 0 {
			p.Follow, want = follow, want|session.Caps(session.CapFollow)
		}
		if m&512 != 0 {
			p.Once, want = once, want|session.Caps(session.CapAppendOnce)
		}
		for _, c := range []core{{}, {aware: true, ignores: true}} {
			w := want
			if c.aware {
				w |= session.Caps(session.CapRunContext, session.CapIgnoresIDs)
			}
			if got := session.Probe(Compose(c, p)); got != w {
				t.Errorf("mask %d, core %+v: probe %s, want %s", m, c, got, w)
			}
		}
	}
}
