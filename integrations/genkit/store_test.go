package genkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/firebase/genkit/go/ai"
	aix "github.com/firebase/genkit/go/ai/exp"
	"github.com/firebase/genkit/go/ai/exp/localstore"
	"github.com/firebase/genkit/go/core/status"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	genkitstore "github.com/agentsessions/sessions/integrations/genkit"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/session"
)

type note struct {
	Text string `json:"text"`
}

var t0 = time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)

func row(sessionID string, createdAt time.Time, st aix.SnapshotStatus, text string) *aix.SessionSnapshot[note] {
	return &aix.SessionSnapshot[note]{
		SessionID: sessionID,
		Status:    st,
		CreatedAt: createdAt,
		UpdatedAt: createdAt,
		State: &aix.SessionState[note]{
			Custom:   note{Text: text},
			Messages: []*ai.Message{ai.NewUserTextMessage(text)},
		},
	}
}

// contract runs the same operations on any exp.SessionStore and returns
// what it observed, one line each, with generated ids masked.
func contract(t *testing.T, st aix.SessionStore[note]) []string {
	ctx := context.Background()
	var seen []string
	generated := "\x00" // masked in what is seen, once known
	see := func(format string, args ...any) {
		seen = append(seen, strings.ReplaceAll(fmt.Sprintf(format, args...), generated, "<generated>"))
	}
	show := func(s *aix.SessionSnapshot[note]) string {
		if s == nil {
			return "nil"
		}
		b, err := json.Marshal(s)
		require.NoError(t, err)
		return string(b)
	}
	put := func(id string, fn func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error)) {
		got, err := st.SaveSnapshot(ctx, id, fn)
		see("save %q: %s, error %v", id, show(got), err != nil)
	}
	latest := func(sessionID string) {
		got, err := st.GetLatestSnapshot(ctx, sessionID)
		if got != nil {
			see("latest %q: %s %s", sessionID, got.SnapshotID, show(got))
		} else {
			see("latest %q: nil, error %v", sessionID, err != nil)
		}
	}
	get := func(id string) {
		got, err := st.GetSnapshot(ctx, id)
		require.NoError(t, err)
		see("get %q: %s", id, show(got))
	}

	get("missing")
	latest("s1")
	latest("")

	// A generated id.
	gen, err := st.SaveSnapshot(ctx, "", func(existing *aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
		see("fn(generated) got %s", show(existing))
		return row("s1", t0, "", "first"), nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, gen.SnapshotID)
	generated = gen.SnapshotID
	see("generated: status %q, session %q", gen.Status, gen.SessionID)
	again, err := st.GetSnapshot(ctx, gen.SnapshotID)
	require.NoError(t, err)
	see("generated read back: %s", show(again))
	latest("s1")

	// A pending row, then its rewrite: the session id is kept, an empty
	// status is completed.
	put("a", func(existing *aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
		see("fn(a) got %s", show(existing))
		return row("s1", t0.Add(time.Second), aix.SnapshotStatusPending, "second"), nil
	})
	latest("s1")
	put("a", func(existing *aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
		see("fn(a) got %s", show(existing))
		next := *existing
		next.SessionID = "other"
		next.Status = ""
		next.UpdatedAt = t0.Add(5 * time.Second)
		next.State = &aix.SessionState[note]{Custom: note{Text: "second, final"}}
		return &next, nil
	})
	get("a")
	latest("other")

	// Declining and failing write nothing; a row needs a session.
	put("b", func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) { return nil, nil })
	get("b")
	boom := errors.New("boom")
	_, err = st.SaveSnapshot(ctx, "b", func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) { return nil, boom })
	see("fn error is the caller's: %v", errors.Is(err, boom))
	get("b")
	_, err = st.SaveSnapshot(ctx, "c", func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
		return row("", t0, "", "orphan"), nil
	})
	see("no session id: %v", errors.Is(err, aix.ErrSessionIDRequired))
	get("c")

	// Latest is the greatest CreatedAt, ties to the greater id, whatever
	// the order of the saves and whatever the status.
	put("d", func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
		return row("s1", t0.Add(time.Second), aix.SnapshotStatusFailed, "tie, greater id"), nil
	})
	latest("s1")
	put("0", func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
		return row("s1", t0.Add(time.Second), "", "tie, smaller id"), nil
	})
	put("early", func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
		return row("s1", t0.Add(-time.Hour), "", "saved last, created first"), nil
	})
	latest("s1")
	put("s2-row", func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
		return row("s2", t0.Add(time.Hour), "", "another session"), nil
	})
	latest("s1")
	latest("s2")

	// What a caller gets is its own: changing it changes nothing stored.
	got, err := st.GetSnapshot(ctx, "d")
	require.NoError(t, err)
	got.State.Custom.Text = "scribbled"
	get("d")
	return seen
}

// TestContractAgainstInMemory: the same operations on genkit's in-memory
// store and on ours, on every backend, observe the same.
func TestContractAgainstInMemory(t *testing.T) {
	ref := contract(t, localstore.NewInMemorySessionStore[note]())
	require.Len(t, ref, 29)
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			be := newBackend(t, b)
			st, closeFn := be.open(t)
			defer closeFn()
			got := contract(t, newStore[note](t, st, genkitstore.Options{}))
			require.Equal(t, ref, got)
		})
	}
	for _, line := range ref {
		t.Log(line)
	}
}

// TestLayout: where the documents are, and that what is beside them is
// left alone.
func TestLayout(t *testing.T) {
	ctx := context.Background()
	st, err := adapters.Open(ctx, "memory://")
	require.NoError(t, err)
	defer st.Close()
	s := newStore[note](t, st, genkitstore.Options{SessionPrefix: "c/", SnapshotPrefix: "snap/"})
	require.Equal(t, "snap/x", s.SnapshotSessionID("x"))
	require.Equal(t, "c/s1", s.IndexSessionID("s1"))

	conv, err := st.Session("c/s1")
	require.NoError(t, err)
	hist, err := session.ParseItems(`{"role":"user","content":"hi"}`)
	require.NoError(t, err)
	require.NoError(t, conv.AddItems(ctx, hist))
	_, err = conv.(session.CheckpointStore).SaveCheckpoint(ctx, "runstate", []byte(`{"other":true}`), 0)
	require.NoError(t, err)

	_, err = s.SaveSnapshot(ctx, "x", func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
		return row("s1", t0, "", "hello"), nil
	})
	require.NoError(t, err)

	rowSession, err := st.Session("snap/x")
	require.NoError(t, err)
	doc, version, err := rowSession.(session.CheckpointStore).LoadCheckpoint(ctx, genkitstore.SnapshotName)
	require.NoError(t, err)
	require.Equal(t, int64(1), version)
	var stored aix.SessionSnapshot[note]
	require.NoError(t, json.Unmarshal(doc, &stored), "the row is genkit's JSON")
	require.Equal(t, "x", stored.SnapshotID)
	require.Equal(t, "hello", stored.State.Custom.Text)

	names, err := conv.(session.CheckpointStore).ListCheckpoints(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{genkitstore.IndexName, "runstate"}, names)
	idx, _, err := conv.(session.CheckpointStore).LoadCheckpoint(ctx, genkitstore.IndexName)
	require.NoError(t, err)
	require.JSONEq(t, `{"v":1,"snapshots":[{"id":"x","createdAt":"2026-12-06T03:00:00Z"}]}`, string(idx))
	items, err := conv.Items(ctx)
	require.NoError(t, err)
	require.Len(t, items, 1, "history untouched")

	// A rewrite that keeps CreatedAt does not write the index.
	_, err = s.SaveSnapshot(ctx, "x", func(e *aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
		e.Status = aix.SnapshotStatusAborted
		return e, nil
	})
	require.NoError(t, err)
	_, v, err := conv.(session.CheckpointStore).LoadCheckpoint(ctx, genkitstore.IndexName)
	require.NoError(t, err)
	require.Equal(t, int64(1), v, "the index is written once per new row")
}

// TestIncompleteSaveAndCorruptDocuments: an index entry whose row is
// missing is passed over; a corrupt row or index is a clear error that
// quotes nothing of the document and changes nothing.
func TestIncompleteSaveAndCorruptDocuments(t *testing.T) {
	ctx := context.Background()
	st, err := adapters.Open(ctx, "memory://")
	require.NoError(t, err)
	defer st.Close()
	s := newStore[note](t, st, genkitstore.Options{})
	for i, id := range []string{"old", "new"} {
		_, err := s.SaveSnapshot(ctx, id, func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
			return row("s1", t0.Add(time.Duration(i)*time.Second), "", id), nil
		})
		require.NoError(t, err)
	}
	checkpoints := func(id string) session.CheckpointStore {
		ss, err := st.Session(id)
		require.NoError(t, err)
		return ss.(session.CheckpointStore)
	}

	// A save that listed its row and died before writing it.
	newRow := checkpoints(s.SnapshotSessionID("new"))
	doc, version, err := newRow.LoadCheckpoint(ctx, genkitstore.SnapshotName)
	require.NoError(t, err)
	require.NoError(t, newRow.DeleteCheckpoint(ctx, genkitstore.SnapshotName, version))
	got, err := s.GetLatestSnapshot(ctx, "s1")
	require.NoError(t, err)
	require.Equal(t, "old", got.SnapshotID, "an entry without a row is passed over")

	// A corrupt row: an error; the document stays; others stay readable.
	secret := `{"snapshotId":"new","state":{"custom":{"text":"sk-SECRET-123"}` // truncated
	_, err = newRow.SaveCheckpoint(ctx, genkitstore.SnapshotName, []byte(secret), 0)
	require.NoError(t, err)
	for _, read := range []func() error{
		func() error { _, err := s.GetSnapshot(ctx, "new"); return err },
		func() error { _, err := s.GetLatestSnapshot(ctx, "s1"); return err },
		func() error {
			_, err := s.SaveSnapshot(ctx, "new", func(e *aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) { return e, nil })
			return err
		},
	} {
		err := read()
		require.ErrorIs(t, err, genkitstore.ErrCorruptSnapshot)
		require.ErrorIs(t, err, status.ErrDataLoss)
		require.NotContains(t, err.Error(), "SECRET")
		t.Logf("corrupt row: %v", err)
	}
	stored, _, err := newRow.LoadCheckpoint(ctx, genkitstore.SnapshotName)
	require.NoError(t, err)
	require.Equal(t, secret, string(stored), "the corrupt row is left as it was")
	old, err := s.GetSnapshot(ctx, "old")
	require.NoError(t, err)
	require.Equal(t, "old", old.State.Custom.Text)

	// A row stored under another snapshot's id.
	_, err = newRow.SaveCheckpoint(ctx, genkitstore.SnapshotName, []byte(strings.Replace(string(doc), `"snapshotId":"new"`, `"snapshotId":"old"`, 1)), 1)
	require.NoError(t, err)
	_, err = s.GetSnapshot(ctx, "new")
	require.ErrorIs(t, err, genkitstore.ErrCorruptSnapshot)

	// A corrupt index.
	idx := checkpoints(s.IndexSessionID("s1"))
	_, v, err := idx.LoadCheckpoint(ctx, genkitstore.IndexName)
	require.NoError(t, err)
	_, err = idx.SaveCheckpoint(ctx, genkitstore.IndexName, []byte(`{"v":1,"snapshots":[{"id":"a"},{"id":"a"}]}`), v)
	require.NoError(t, err)
	_, err = s.GetLatestSnapshot(ctx, "s1")
	require.ErrorIs(t, err, genkitstore.ErrCorruptSnapshot)
	_, err = s.SaveSnapshot(ctx, "third", func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
		return row("s1", t0.Add(time.Hour), "", "third"), nil
	})
	require.ErrorIs(t, err, genkitstore.ErrCorruptSnapshot, "a save does not overwrite a corrupt index")
	third, err := s.GetSnapshot(ctx, "third")
	require.NoError(t, err)
	require.Nil(t, third, "nor writes a row the index cannot list")
}

// TestInvalidIDs: ids JSON cannot keep are refused before anything is
// written.
func TestInvalidIDs(t *testing.T) {
	ctx := context.Background()
	st, err := adapters.Open(ctx, "memory://")
	require.NoError(t, err)
	defer st.Close()
	s := newStore[note](t, st, genkitstore.Options{})
	_, err = s.SaveSnapshot(ctx, "x\xff", func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
		return row("s1", t0, "", "x"), nil
	})
	require.ErrorIs(t, err, status.ErrInvalidArgument)
	_, err = s.SaveSnapshot(ctx, "x", func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
		return row("s\xff", t0, "", "x"), nil
	})
	require.ErrorIs(t, err, status.ErrInvalidArgument)
	got, err := s.GetSnapshot(ctx, "x")
	require.NoError(t, err)
	require.Nil(t, got)
	_, err = s.SaveSnapshot(ctx, "x", nil)
	require.ErrorIs(t, err, status.ErrInvalidArgument)
	_, err = s.GetLatestSnapshot(ctx, "")
	require.ErrorIs(t, err, aix.ErrSessionIDRequired)
	got, err = s.GetSnapshot(ctx, "")
	require.NoError(t, err)
	require.Nil(t, got)
}

// hidden is a session without the checkpoint methods.
type hidden struct{ session.Session }

func TestNoCheckpoints(t *testing.T) {
	ctx := context.Background()
	st, err := adapters.Open(ctx, "memory://")
	require.NoError(t, err)
	defer st.Close()
	s, err := genkitstore.NewFunc[note](func(id string) (session.Session, error) {
		ss, err := st.Session(id)
		return hidden{ss}, err
	}, genkitstore.Options{})
	require.NoError(t, err)
	_, err = s.GetSnapshot(ctx, "x")
	require.ErrorIs(t, err, genkitstore.ErrNoCheckpoints)
	_, err = s.GetLatestSnapshot(ctx, "s1")
	require.ErrorIs(t, err, genkitstore.ErrNoCheckpoints)
	_, err = s.SaveSnapshot(ctx, "x", func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
		return row("s1", t0, "", "x"), nil
	})
	require.ErrorIs(t, err, genkitstore.ErrNoCheckpoints)

	noCaps, err := adapters.NewStore(func(id string) (hidden, error) {
		ss, err := st.Session(id)
		return hidden{ss}, err
	}, func() error { return nil })
	require.NoError(t, err)
	_, err = genkitstore.New[note](noCaps, genkitstore.Options{})
	require.ErrorIs(t, err, genkitstore.ErrNoCheckpoints)
}

func TestOptions(t *testing.T) {
	open := func(string) (session.Session, error) { return nil, errors.New("unused") }
	for _, tc := range []struct {
		opts genkitstore.Options
		want string
	}{
		{genkitstore.Options{Attempts: -1}, "Attempts"},
		{genkitstore.Options{PollInterval: -time.Second}, "PollInterval"},
	} {
		_, err := genkitstore.NewFunc[note](open, tc.opts)
		require.ErrorContains(t, err, tc.want)
	}
	_, err := genkitstore.NewFunc[note](nil, genkitstore.Options{})
	require.Error(t, err)
	_, err = genkitstore.New[note](nil, genkitstore.Options{})
	require.Error(t, err)
}
