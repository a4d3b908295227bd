package postgres

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// stallCommits adds to st's messages table a deferred constraint trigger
// that sleeps 1.5 s at the commit of a transaction inserting a row that
// holds "stall", and a plain trigger that refuses a row holding "refuse".
func stallCommits(t *testing.T, st *Store) {
	t.Helper()
	ctx := context.Background()
	sc := quote(st.opts.Schema)
	for _, q := range []string{
		`CREATE FUNCTION ` + sc + `.stall() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF strpos(NEW.message_data, 'stall') > 0 THEN PERFORM pg_sleep(1.5); END IF;
	RETURN NULL;
END $$`,
		`CREATE CONSTRAINT TRIGGER stall AFTER INSERT ON ` + st.q.messages + `
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ` + sc + `.stall()`,
		`CREATE FUNCTION ` + sc + `.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF strpos(NEW.message_data, 'refuse') > 0 THEN RAISE EXCEPTION 'refused by the test'; END IF;
	RETURN NEW;
END $$`,
		`CREATE TRIGGER refuse BEFORE INSERT ON ` + st.q.messages + ` FOR EACH ROW EXECUTE FUNCTION ` + sc + `.refuse()`,
	} {
		_, err := st.Pool().Exec(ctx, q)
		require.NoError(t, err, q)
	}
}

// oneOf requires the session's rows to be one of the histories given.
func oneOf(t *testing.T, st *Store, id string, histories ...[]string) []string {
	t.Helper()
	got := rawRows(t, st, id)
	for _, h := range histories {
		if slices.Equal(got, h) {
			return got
		}
	}
	t.Fatalf("rows %v are none of %v", got, histories)
	return nil
}

// TestOutcomeUnknown: a deadline that passes while the commit runs (a
// deferred trigger stalls it) is session.ErrOutcomeUnknown, for AddItems,
// ReplaceItems and AppendWithCheckpoint, and the write landed whole or not
// at all (pgx sends a cancel request as it gives up: whether it reaches
// the server before the commit ends is the unknown); a write the server
// refused, or one whose context ended before it was sent, is not unknown,
// and writes nothing.
func TestOutcomeUnknown(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	stallCommits(t, st)
	s, err := st.Session("outcome")
	require.NoError(t, err)
	stall := []session.Item{item(`{"stall":1}`)}
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 300*time.Millisecond) }

	c, cancel := short()
	err = s.AddItems(c, stall)
	cancel()
	require.ErrorIs(t, err, session.ErrOutcomeUnknown, "add items: %v", err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	settle(t, st)
	got := oneOf(t, st, s.id, nil, []string{`{"stall":1}`})
	t.Logf("add items, outcome unknown: %v", got)

	c, cancel = short()
	err = s.ReplaceItems(c, []session.Item{item(`{"stall":2}`)})
	cancel()
	require.ErrorIs(t, err, session.ErrOutcomeUnknown, "replace items: %v", err)
	settle(t, st)
	got = oneOf(t, st, s.id, got, []string{`{"stall":2}`})
	t.Logf("replace items, outcome unknown: %v", got)

	c, cancel = short()
	_, err = s.AppendWithCheckpoint(c, []session.Item{item(`{"stall":3}`)}, "ck", []byte("doc"), 0)
	cancel()
	require.ErrorIs(t, err, session.ErrOutcomeUnknown, "append with checkpoint: %v", err)
	settle(t, st)
	landed := rawRows(t, st, s.id)
	oneOf(t, st, s.id, got, append(slices.Clone(got), `{"stall":3}`))
	_, v, err := s.LoadCheckpoint(ctx, "ck")
	if len(landed) > len(got) {
		require.NoError(t, err)
		require.Equal(t, int64(1), v, "the checkpoint landed with its batch")
	} else {
		require.ErrorIs(t, err, session.ErrNoCheckpoint, "the checkpoint did not land without its batch")
	}
	t.Logf("append with checkpoint, outcome unknown: %v", landed)

	// Refused by the server: known, nothing written.
	before := rawRows(t, st, s.id)
	err = s.AddItems(ctx, []session.Item{item(`{"a":1}`), item(`{"refuse":1}`)})
	require.ErrorContains(t, err, "refused by the test")
	require.False(t, errors.Is(err, session.ErrOutcomeUnknown), "%v", err)
	_, err = s.AppendWithCheckpoint(ctx, []session.Item{item(`{"refuse":2}`)}, "ck", []byte("doc2"), session.AnyVersion)
	require.ErrorContains(t, err, "refused by the test")
	require.False(t, errors.Is(err, session.ErrOutcomeUnknown), "%v", err)
	// A context ended before anything was sent.
	done, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, s.AddItems(done, stall), context.Canceled)
	require.False(t, errors.Is(s.AddItems(done, stall), session.ErrOutcomeUnknown))
	require.Equal(t, before, rawRows(t, st, s.id), "refused writes wrote nothing")
	_, v2, err := s.LoadCheckpoint(ctx, "ck")
	if len(landed) > len(got) {
		require.NoError(t, err)
		require.Equal(t, v, v2, "the refused save wrote nothing")
	} else {
		require.ErrorIs(t, err, session.ErrNoCheckpoint, "the refused save wrote nothing")
	}
}

// TestOutcomeLockWait: a deadline while waiting for the session row's
// lock. AddItems and AppendWithCheckpoint sent their statements with the
// Sync that commits them in one round trip, so the server may go on once
// the lock is free: unknown (here pgx's cancel request reaches the server
// while it waits, and nothing lands, but nothing promised that). Whatever
// landed, the checkpoint landed with its batch or neither did.
func TestOutcomeLockWait(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	s, err := st.Session("lockwait")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, []session.Item{item(`{"n":0}`)}))
	holder := connect(t)
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, st.q.lockSession, s.sid)
	require.NoError(t, err)

	c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = s.AppendWithCheckpoint(c, []session.Item{item(`{"n":1}`)}, "ck", []byte("doc"), 0)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, session.ErrOutcomeUnknown, "%v", err)

	c, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	err = s.AddItems(c, []session.Item{item(`{"n":2}`)})
	cancel()
	require.ErrorIs(t, err, session.ErrOutcomeUnknown, "%v", err)

	require.NoError(t, tx.Commit(ctx))
	settle(t, st)
	got := oneOf(t, st, s.id, []string{`{"n":0}`}, []string{`{"n":0}`, `{"n":1}`},
		[]string{`{"n":0}`, `{"n":2}`}, []string{`{"n":0}`, `{"n":1}`, `{"n":2}`})
	t.Logf("outcome unknown: %v", got)
	_, v, err := s.LoadCheckpoint(ctx, "ck")
	if slices.Contains(got, `{"n":1}`) {
		require.NoError(t, err)
		require.Equal(t, int64(1), v, "the checkpoint landed with its batch")
	} else {
		require.ErrorIs(t, err, session.ErrNoCheckpoint, "the checkpoint did not land without its batch")
	}
}
