package runstate

import (
	"context"

	"github.com/agentsessions/sessions/internal/capwrap"
	"github.com/agentsessions/sessions/session"
)

// WrapSaveBeforeAppend returns s wrapped so that, before every append to it,
// save is called with cp's document as it stands then (MarshalJSON); an
// error from save stops the append. Pass the result to Save, Resume and
// SaveResumedTurn when the checkpoint must survive the process being killed
// at any instant: the pending write and its "before" digests are recorded
// on the checkpoint just before the append starts, so with them on disk a
// kill before, during or after the append leaves a checkpoint Resume can
// reconcile. Without it, a kill after a committed append and before the
// application's own save loses the record, and the batch is written again.
//
// The wrapper keeps s's capabilities; only AddItems persists first (the
// pending write is appended through it; compaction, which Save may run
// after the append, needs no record).
//
// One more condition is the application's: a resume must not start while
// requests of the process that died may still reach the store (its
// connections are still open), or a late write of the dead process can land
// after the resume's read (docs/reliability.md).
func (cp *Checkpoint) WrapSaveBeforeAppend(s session.Session, save func(doc []byte) error) session.Session {
	return capwrap.Compose(persisting{Session: s, persist: func() error {
		doc, err := cp.MarshalJSON()
		if err != nil {
			return err
		}
		return save(doc)
	}}, capwrap.Of(s))
}

type persisting struct {
	session.Session
	persist func() error
}

func (p persisting) AddItems(ctx context.Context, items []session.Item) error {
	if err := p.persist(); err != nil {
		return err
	}
	return p.Session.AddItems(ctx, items)
}

func (p persisting) AcceptsRunContext() bool    { return capwrap.AcceptsRunContext(p.Session) }
func (p persisting) IgnoreIDsForMatching() bool { return capwrap.IgnoresIDs(p.Session) }
