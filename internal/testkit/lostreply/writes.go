package lostreply

import (
	"context"
	"fmt"

	"github.com/agentsessions/sessions/session"
)

// Base is what a write's session holds before the write (with a
// checkpoint "c" at version 1: SetupBase), and Batch what the writes add
// or replace it with.
var (
	Base  = []session.Item{session.MustItem(`{"n":1}`), session.MustItem(`{"n":2}`)}
	Batch = []session.Item{session.MustItem(`{"new":1}`), session.MustItem(`{"new":2}`)}
)

// SetupBase gives s the Base items and the checkpoint "c" at version 1
// (s must implement session.CheckpointStore).
func SetupBase(ctx context.Context, s session.Session) error {
	if err := s.AddItems(ctx, Base); err != nil {
		return err
	}
	_, err := s.(session.CheckpointStore).SaveCheckpoint(ctx, "c", []byte(`{"v":1}`), 0)
	return err
}

// NoSetup leaves the session as it is: one that does not exist yet.
func NoSetup(context.Context, session.Session) error { return nil }

// Write is one write of a session under a lost reply, as every adapter
// has it: Setup prepares the session (SetupBase, or NoSetup), then Do
// runs the write on it (version is its HistoryVersion before the write).
type Write struct {
	Name  string
	Setup func(ctx context.Context, s session.Session) error
	Do    func(ctx context.Context, s session.Session, version string) error
}

// writes are the session writes an adapter's test can run; the first
// nCommon run on every adapter.
var writes = []Write{
	{Name: "AddItems", Do: func(ctx context.Context, s session.Session, _ string) error { return s.AddItems(ctx, Batch) }},
	{Name: "AddItems(new session)", Setup: NoSetup,
		Do: func(ctx context.Context, s session.Session, _ string) error { return s.AddItems(ctx, Batch) }},
	{Name: "AddItemsOnce", Do: func(ctx context.Context, s session.Session, _ string) error {
		_, err := s.(session.OnceAppender).AddItemsOnce(ctx, "op-1", Batch)
		return err
	}},
	{Name: "PopItem", Do: PopItem},
	{Name: "Clear", Do: func(ctx context.Context, s session.Session, _ string) error { return s.Clear(ctx) }},
	{Name: "ReplaceItems", Do: func(ctx context.Context, s session.Session, _ string) error {
		return s.(session.Replacer).ReplaceItems(ctx, Batch)
	}},
	{Name: "ReplaceItemsIf", Do: func(ctx context.Context, s session.Session, v string) error {
		return s.(session.VersionedReplacer).ReplaceItemsIf(ctx, v, Batch)
	}},
	{Name: "SaveCheckpoint", Do: saveCheckpoint(1)},
	{Name: "DeleteCheckpoint", Do: deleteCheckpoint(1)},
	// Not on every adapter:
	{Name: "SaveCheckpoint(AnyVersion)", Do: saveCheckpoint(session.AnyVersion)},
	{Name: "AppendWithCheckpoint", Do: func(ctx context.Context, s session.Session, _ string) error {
		_, err := s.(session.CheckpointCommitter).AppendWithCheckpoint(ctx, Batch, "c", []byte(`{"v":2}`), 1)
		return err
	}},
	{Name: "DeleteCheckpoint(AnyVersion)", Do: deleteCheckpoint(session.AnyVersion)},
}

const nCommon = 9

// PopItem pops s's newest item.
func PopItem(ctx context.Context, s session.Session, _ string) error {
	_, _, err := s.PopItem(ctx)
	return err
}

func saveCheckpoint(version int64) func(context.Context, session.Session, string) error {
	return func(ctx context.Context, s session.Session, _ string) error {
		_, err := s.(session.CheckpointStore).SaveCheckpoint(ctx, "c", []byte(`{"v":2}`), version)
		return err
	}
}

func deleteCheckpoint(version int64) func(context.Context, session.Session, string) error {
	return func(ctx context.Context, s session.Session, _ string) error {
		return s.(session.CheckpointStore).DeleteCheckpoint(ctx, "c", version)
	}
}

// Writes returns the writes every adapter runs (AddItems, AddItems(new
// session), AddItemsOnce, PopItem, Clear, ReplaceItems, ReplaceItemsIf,
// SaveCheckpoint, DeleteCheckpoint), then the extra ones named
// ("SaveCheckpoint(AnyVersion)", "AppendWithCheckpoint",
// "DeleteCheckpoint(AnyVersion)"). It panics on a name it does not know.
func Writes(extra ...string) []Write {
	out := append([]Write(nil), writes[:nCommon]...)
	for _, name := range extra {
		i := 0
		for i < len(writes) && writes[i].Name != name {
			i++
		}
		if i == len(writes) {
			panic(fmt.Sprintf("lostreply: no write %q", name))
		}
		out = append(out, writes[i])
	}
	for i := range out {
		if out[i].Setup == nil {
			out[i].Setup = SetupBase
		}
	}
	return out
}

// On adapts do to an adapter's test, which calls a write with its store
// and the session's id: the result opens the session with open (a method
// expression such as (*Store).Session) and runs do on it.
func On[St any, S session.Session](open func(St, string) (S, error), do func(ctx context.Context, s session.Session, version string) error) func(ctx context.Context, st St, id, version string) error {
	return func(ctx context.Context, st St, id, version string) error {
		s, err := open(st, id)
		if err != nil {
			return err
		}
		return do(ctx, s, version)
	}
}
