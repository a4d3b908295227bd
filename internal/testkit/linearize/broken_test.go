package linearize

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentsessions/sessions/session"
)

// splitBatches is a broken session: AddItems appends its batch one item at
// a time, yielding between, so batches interleave and reads see halves.
type splitBatches struct{ session.Session }

func (s splitBatches) AddItems(ctx context.Context, items []session.Item) error {
	for _, it := range items {
		if err := s.Session.AddItems(ctx, []session.Item{it}); err != nil {
			return err
		}
		runtime.Gosched()
	}
	return nil
}

// dropEvery is a broken session: every nth batch it acknowledges is not
// written.
type dropEvery struct {
	session.Session
	n     int64
	count *atomic.Int64
}

func (s dropEvery) AddItems(ctx context.Context, items []session.Item) error {
	if len(items) > 0 && s.count.Add(1)%s.n == 0 {
		return nil
	}
	return s.Session.AddItems(ctx, items)
}

// positionCursor is a broken follower: its cursor is the number of items
// read, so a pop below the cursor that appends refilled is not reported
// (the reader misses what replaced the items it saw). That is what a
// follower of list positions does without the Redis adapter's marks.
type positionCursor struct{ session.Session }

func (s positionCursor) ItemsSince(ctx context.Context, cursor session.Cursor) ([]session.Item, session.Cursor, error) {
	n := 0
	if cursor != "" {
		var err error
		if n, err = strconv.Atoi(strings.TrimPrefix(string(cursor), "n")); err != nil {
			return nil, cursor, fmt.Errorf("%w: %q", session.ErrInvalidCursor, string(cursor))
		}
	}
	items, err := s.Items(ctx)
	if err != nil {
		return nil, cursor, err
	}
	if len(items) < n {
		return nil, cursor, session.ErrCursorLost // only a history shorter than the cursor
	}
	if len(items) == n {
		return nil, cursor, nil
	}
	return items[n:], session.Cursor("n" + strconv.Itoa(len(items))), nil
}

// checkThenAppend is a broken once-appender: it looks the operation id up,
// appends, and only then records it, so concurrent retries all append.
type checkThenAppend struct {
	session.Session
	mu   *sync.Mutex
	done map[string]bool
}

func (s checkThenAppend) AddItemsOnce(ctx context.Context, opID string, items []session.Item) (bool, error) {
	s.mu.Lock()
	done := s.done[opID]
	s.mu.Unlock()
	if done {
		return false, nil
	}
	runtime.Gosched()
	if err := s.Session.AddItems(ctx, items); err != nil {
		return false, err
	}
	s.mu.Lock()
	s.done[opID] = true
	s.mu.Unlock()
	return true, nil
}

// commitAnyVersion is a broken checkpoint committer: it skips the version
// check, so that copies of a run restored from one checkpoint all commit.
type commitAnyVersion struct{ session.CheckpointCommitter }

func (s commitAnyVersion) AppendWithCheckpoint(ctx context.Context, items []session.Item, name string, doc []byte, _ int64) (int64, error) {
	return s.CheckpointCommitter.AppendWithCheckpoint(ctx, items, name, doc, session.AnyVersion)
}

// appendThenSave is a broken checkpoint committer: it appends the batch,
// then saves the checkpoint in a second step, so that a reader sees one
// without the other and a commit that conflicts has appended.
type appendThenSave struct{ session.CheckpointCommitter }

func (s appendThenSave) AppendWithCheckpoint(ctx context.Context, items []session.Item, name string, doc []byte, version int64) (int64, error) {
	if err := s.AddItems(ctx, items); err != nil {
		return 0, err
	}
	runtime.Gosched()
	return s.SaveCheckpoint(ctx, name, doc, version)
}

// saveAnyVersion is a broken checkpoint store: SaveCheckpoint skips the
// version check, so that a stale copy of a run overwrites the checkpoint.
type saveAnyVersion struct{ session.CheckpointCommitter }

func (s saveAnyVersion) SaveCheckpoint(ctx context.Context, name string, doc []byte, _ int64) (int64, error) {
	return s.CheckpointCommitter.SaveCheckpoint(ctx, name, doc, session.AnyVersion)
}

// deleteAnyVersion is a broken checkpoint store: DeleteCheckpoint ignores
// the version, so that a stale copy of a run deletes a checkpoint saved
// since it loaded.
type deleteAnyVersion struct{ session.CheckpointCommitter }

func (s deleteAnyVersion) DeleteCheckpoint(ctx context.Context, name string, _ int64) error {
	return s.CheckpointCommitter.DeleteCheckpoint(ctx, name, session.AnyVersion)
}

// committer returns s as the session.CheckpointCommitter it is.
func committer(s session.Session) session.CheckpointCommitter { return s.(session.CheckpointCommitter) }

// TestNegativeControls proves that the campaign can fail: on eight broken
// sessions over the memory backend, it must find a history that is not
// linearizable; for the broken saves and deletes, most histories.
func TestNegativeControls(t *testing.T) {
	set := current()
	set.histories = max(set.histories, 10)
	paced := set.pace
	set.pace = 0 // as busy as it gets
	// The counterexample is for reading: the test asserts only that the
	// checker finds one, and minimizing under -race took most of its time.
	set.minimize = min(set.minimize, 2*time.Second)
	controls := []struct {
		name string
		wrap func(session.Session) session.Session
		// needs is the capability the broken session must offer, for its
		// flaw to be exercised (zero: none).
		needs session.Capability
		// most is set when the checker must find most histories, not
		// one, not linearizable. Their clients pace as the campaign's do:
		// a stale save or delete, the only one a broken version check
		// shows in, is rare in a history of unpaced clients on the
		// memory backend, where a client runs many operations before the
		// next client runs one (1 in 10 versioned deletes is stale, 4 in
		// 10 with pacing).
		most bool
	}{
		{"split-batches", func(s session.Session) session.Session { return splitBatches{s} }, 0, false},
		{"drop-every-20th", func(s session.Session) session.Session {
			return dropEvery{Session: s, n: 20, count: new(atomic.Int64)}
		}, 0, false},
		{"follow-by-position", func(s session.Session) session.Session { return positionCursor{s} }, session.CapFollow, false},
		{"once-check-then-append", func(s session.Session) session.Session {
			return checkThenAppend{Session: s, mu: new(sync.Mutex), done: map[string]bool{}}
		}, session.CapAppendOnce, false},
		{"commit-any-version", func(s session.Session) session.Session { return commitAnyVersion{committer(s)} }, session.CapCheckpointCommit, false},
		{"commit-append-then-save", func(s session.Session) session.Session { return appendThenSave{committer(s)} }, session.CapCheckpointCommit, false},
		{"save-any-version", func(s session.Session) session.Session { return saveAnyVersion{committer(s)} }, session.CapCheckpoints, true},
		{"delete-any-version", func(s session.Session) session.Session { return deleteAnyVersion{committer(s)} }, session.CapCheckpoints, true},
	}
	for _, c := range controls {
		t.Run(c.name, func(t *testing.T) {
			open := storeOpener(t, "memory://")
			record := plain(func(id string) (session.Session, error) {
				s, err := open(id)
				if err != nil {
					return nil, err
				}
				return c.wrap(s), nil
			}, nil)
			cset := set
			if c.most {
				// 20 histories: the test fails in fewer than 1 run in
				// 1000 when the checker finds 87 in 100 (delete-any-version
				// over 60 histories), and takes a quarter second.
				cset.pace, cset.histories = paced, max(set.histories, 20)
			}
			tl := campaign(t, "control-"+c.name, record, 8, cset)
			if c.needs != 0 && !tl.caps.Has(c.needs) {
				t.Fatalf("the broken session does not offer %v (session.Probe: %v)", c.needs, tl.caps)
			}
			if tl.illegal == 0 {
				t.Fatalf("the checker found all %d histories of a broken session linearizable", tl.histories)
			}
			if c.most && 2*tl.illegal <= tl.histories {
				t.Fatalf("the checker found only %d of %d histories of a broken session not linearizable", tl.illegal, tl.histories)
			}
		})
	}
}
