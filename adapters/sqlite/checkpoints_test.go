package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// load returns the checkpoint's document and version, failing the test on
// an error.
func load(t *testing.T, s *Session, name string) (string, int64) {
	t.Helper()
	doc, v, err := s.LoadCheckpoint(context.Background(), name)
	require.NoError(t, err)
	return string(doc), v
}

// TestCheckpointStaleAppendWritesNothing: an AppendWithCheckpoint whose
// version is not the stored one appends nothing and leaves the checkpoint
// as it was; its error names the session and the checkpoint, never the
// document.
func TestCheckpointStaleAppendWritesNothing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.session(t, "run-1")
	require.NoError(t, s.AddItems(ctx, numbered("before", 2)))
	v, err := s.AppendWithCheckpoint(ctx, numbered("turn1", 2), "state", []byte(`{"turn":1}`), 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), v)

	for _, stale := range []int64{0, 2, 7, -2} {
		_, err = s.AppendWithCheckpoint(ctx, numbered("stale", 3), "state", []byte(`{"secret-document":1}`), stale)
		require.ErrorIs(t, err, session.ErrCheckpointConflict, "version %d", stale)
		require.ErrorContains(t, err, `"state"`)
		require.ErrorContains(t, err, `"run-1"`)
		require.ErrorContains(t, err, "stored version is 1")
		require.NotContains(t, err.Error(), "secret-document", "errors never hold the document")
	}
	_, err = s.SaveCheckpoint(ctx, "state", []byte(`{"secret-document":1}`), 0)
	require.ErrorIs(t, err, session.ErrCheckpointConflict)

	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, append(texts(numbered("before", 2)), texts(numbered("turn1", 2))...), texts(got), "nothing of the stale appends")
	doc, ver := load(t, s, "state")
	require.Equal(t, `{"turn":1}`, doc)
	require.Equal(t, int64(1), ver)

	// The right version appends and advances; AnyVersion overwrites.
	v, err = s.AppendWithCheckpoint(ctx, numbered("turn2", 1), "state", []byte(`{"turn":2}`), 1)
	require.NoError(t, err)
	require.Equal(t, int64(2), v)
	v, err = s.SaveCheckpoint(ctx, "state", []byte(`{"any":1}`), session.AnyVersion)
	require.NoError(t, err)
	require.Equal(t, int64(3), v)
	v, err = s.SaveCheckpoint(ctx, "fresh", []byte(`{"any":0}`), session.AnyVersion)
	require.NoError(t, err)
	require.Equal(t, int64(1), v, "AnyVersion on nothing stored starts at 1")
	got, err = s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, got, 5)

	// A stale delete deletes nothing.
	require.ErrorIs(t, s.DeleteCheckpoint(ctx, "state", 2), session.ErrCheckpointConflict)
	require.ErrorIs(t, s.DeleteCheckpoint(ctx, "state", 0), session.ErrCheckpointConflict)
	require.NoError(t, s.DeleteCheckpoint(ctx, "missing", 0))
	require.NoError(t, s.DeleteCheckpoint(ctx, "missing", session.AnyVersion))
	require.ErrorIs(t, s.DeleteCheckpoint(ctx, "missing", 1), session.ErrCheckpointConflict)
	names, err := s.ListCheckpoints(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"fresh", "state"}, names)
	require.NoError(t, s.DeleteCheckpoint(ctx, "state", 3))
	_, _, err = s.LoadCheckpoint(ctx, "state")
	require.ErrorIs(t, err, session.ErrNoCheckpoint)
	require.ErrorContains(t, err, `"state"`)

	// Refused before anything is written.
	_, err = s.AppendWithCheckpoint(ctx, numbered("x", 1), "", []byte("d"), 0)
	require.ErrorIs(t, err, session.ErrInvalidSessionID)
	_, err = s.AppendWithCheckpoint(ctx, numbered("x", 1), "n", nil, 0)
	require.Error(t, err)
	_, err = s.AppendWithCheckpoint(ctx, []session.Item{{}}, "n", []byte("d"), 0)
	require.Error(t, err)
	got, err = s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, got, 5)
}

// TestCheckpointFailedBatchSavesNothing: when the batch of an
// AppendWithCheckpoint fails (a trigger refuses one of its items), the
// checkpoint is not saved either, also in a group transaction whose other
// writes commit.
func TestCheckpointFailedBatchSavesNothing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	_, err := f.st.DB().ExecContext(ctx, `CREATE TRIGGER refuse BEFORE INSERT ON agent_messages
        WHEN NEW.message_data = '{"refuse":1}' BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END`)
	require.NoError(t, err)
	s := f.session(t, "a")
	bad := items(t, `{"ok":1}`, `{"refuse":1}`)
	_, err = s.AppendWithCheckpoint(ctx, bad, "state", []byte("d1"), 0)
	require.ErrorContains(t, err, "refused by the test trigger")
	_, _, err = s.LoadCheckpoint(ctx, "state")
	require.ErrorIs(t, err, session.ErrNoCheckpoint, "alone: the checkpoint rolled back with the batch")

	release := holdLock(t, f.path)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	run := func(i int, fn func() error) {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = fn() }()
		waitQueued(t, f.st, i+1)
	}
	run(0, func() error { return f.session(t, "b").AddItems(ctx, numbered("b", 2)) })
	run(1, func() error { _, err := s.AppendWithCheckpoint(ctx, bad, "state", []byte("d2"), 0); return err })
	run(2, func() error {
		_, err := s.AppendWithCheckpoint(ctx, numbered("c", 1), "other", []byte("d3"), 0)
		return err
	})
	release()
	wg.Wait()
	require.NoError(t, errs[0])
	require.ErrorContains(t, errs[1], "refused by the test trigger")
	require.NoError(t, errs[2])
	_, _, err = s.LoadCheckpoint(ctx, "state")
	require.ErrorIs(t, err, session.ErrNoCheckpoint, "in a group: the checkpoint rolled back with the batch")
	doc, v := load(t, s, "other")
	require.Equal(t, "d3", doc)
	require.Equal(t, int64(1), v)
	require.Equal(t, texts(numbered("c", 1)), rawRows(t, f.st, "a"))
	require.Equal(t, texts(numbered("b", 2)), rawRows(t, f.st, "b"))
}

// TestCheckpointConflictInGroup: a checkpoint whose version check fails in
// a group transaction wrote nothing, so the group does not roll back: one
// transaction commits every other write, and the conflict is decided on
// what the group wrote before it.
func TestCheckpointConflictInGroup(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.session(t, "a")
	_, err := s.SaveCheckpoint(ctx, "state", []byte("v1"), 0)
	require.NoError(t, err)
	tx0, w0 := f.st.Stats()

	release := holdLock(t, f.path)
	var wg sync.WaitGroup
	errs := make([]error, 5)
	vers := make([]int64, 5)
	run := func(i int, fn func() (int64, error)) {
		wg.Add(1)
		go func() { defer wg.Done(); vers[i], errs[i] = fn() }()
		waitQueued(t, f.st, i+1)
	}
	appendCk := func(tag string, v int64) func() (int64, error) {
		return func() (int64, error) {
			return s.AppendWithCheckpoint(ctx, numbered(tag, 2), "state", []byte(tag), v)
		}
	}
	run(0, func() (int64, error) { return 0, s.AddItems(ctx, numbered("add1", 1)) })
	run(1, appendCk("first", 1))  // 1 -> 2
	run(2, appendCk("stale", 1))  // conflict: the first moved it to 2
	run(3, appendCk("second", 2)) // 2 -> 3
	run(4, func() (int64, error) { return 0, f.session(t, "b").AddItems(ctx, numbered("add2", 1)) })
	release()
	wg.Wait()

	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Equal(t, int64(2), vers[1])
	require.ErrorIs(t, errs[2], session.ErrCheckpointConflict)
	require.ErrorContains(t, errs[2], "stored version is 2, not 1")
	require.NoError(t, errs[3])
	require.Equal(t, int64(3), vers[3])
	require.NoError(t, errs[4])
	tx1, w1 := f.st.Stats()
	require.Equal(t, int64(1), tx1-tx0, "one transaction: the conflict rolled nothing back")
	require.Equal(t, int64(4), w1-w0)

	want := texts(numbered("add1", 1))
	want = append(want, texts(numbered("first", 2))...)
	want = append(want, texts(numbered("second", 2))...)
	require.Equal(t, want, rawRows(t, f.st, "a"))
	require.Equal(t, texts(numbered("add2", 1)), rawRows(t, f.st, "b"))
	doc, v := load(t, s, "state")
	require.Equal(t, "second", doc)
	require.Equal(t, int64(3), v)
}

// TestCheckpointReopen: what an AppendWithCheckpoint committed, the batch
// and the checkpoint, is there for a Store that opens the file afterwards,
// and for a second Store that had it open all along.
func TestCheckpointReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "reopen.db")
	peer := openStore(t, path, Options{})
	st, err := OpenFile(ctx, path, Options{})
	require.NoError(t, err)
	s, err := st.Session("run")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, numbered("user", 1)))
	v, err := s.AppendWithCheckpoint(ctx, numbered("settle", 3), "runstate", []byte(`{"step":"settled"}`), 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), v)
	require.NoError(t, st.Close())

	for name, store := range map[string]*Store{"reopened": openStore(t, path, Options{}), "peer": peer} {
		r, err := store.Session("run")
		require.NoError(t, err)
		got, err := r.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, append(texts(numbered("user", 1)), texts(numbered("settle", 3))...), texts(got), name)
		doc, ver := load(t, r, "runstate")
		require.Equal(t, `{"step":"settled"}`, doc, name)
		require.Equal(t, int64(1), ver, name)
	}
	ro := openStore(t, path, Options{ReadOnly: true})
	r, err := ro.Session("run")
	require.NoError(t, err)
	doc, _ := load(t, r, "runstate")
	require.Equal(t, `{"step":"settled"}`, doc, "read-only")
	_, err = r.SaveCheckpoint(ctx, "runstate", []byte("x"), 1)
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorIs(t, r.DeleteCheckpoint(ctx, "runstate", 1), ErrReadOnly)
}

// TestCheckpointConcurrentWithAddItems: 16 goroutines on one Store, half
// appending with AddItems, half appending with AppendWithCheckpoint in a
// load-save loop on one shared checkpoint, all through the group-commit
// writer: nothing is lost, every batch is whole and contiguous, exactly
// the batches whose checkpoint saved are there, and the checkpoint counts
// every save.
func TestCheckpointConcurrentWithAddItems(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	const goroutines, rounds, batch = 16, 25, 3
	shared := f.session(t, "shared")
	tx0, n0 := f.st.Stats()

	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		saved     = map[string]bool{} // tag -> its checkpoint saved
		conflicts int
		errs      = make(chan error, goroutines)
	)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := f.session(t, fmt.Sprintf("own-%d", g))
			for r := range rounds {
				tag := fmt.Sprintf("g%d.r%d", g, r)
				if g%2 == 0 {
					if err := shared.AddItems(ctx, numbered(tag, batch)); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					saved[tag] = true
					mu.Unlock()
				} else {
					for {
						doc, v, err := shared.LoadCheckpoint(ctx, "counter")
						count := 0
						switch {
						case err == nil:
							_, _ = fmt.Sscanf(string(doc), "%d", &count)
						case !isNoCheckpoint(err):
							errs <- err
							return
						}
						_, err = shared.AppendWithCheckpoint(ctx, numbered(tag, batch), "counter", []byte(fmt.Sprint(count+1)), v)
						if err == nil {
							mu.Lock()
							saved[tag] = true
							mu.Unlock()
							break
						}
						if !isConflict(err) {
							errs <- err
							return
						}
						mu.Lock()
						conflicts++
						mu.Unlock()
						// A conflicting attempt wrote nothing: retry with a
						// new tag so that its items could never be confused.
						tag += "'"
					}
				}
				if err := own.AddItems(ctx, numbered(tag, 1)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	got := rawRows(t, f.st, "shared")
	require.Len(t, got, goroutines*rounds*batch, "every batch, and nothing of a conflicting attempt")
	// Every batch is whole, in order and contiguous.
	for i := 0; i < len(got); i += batch {
		var obj map[string]int
		require.NoError(t, json.Unmarshal([]byte(got[i]), &obj), got[i])
		require.Len(t, obj, 1)
		var tag string
		for tag = range obj {
		}
		require.True(t, saved[tag], "batch %q was appended though its write failed", tag)
		for j := range batch {
			require.Equal(t, numbered(tag, batch)[j].String(), got[i+j], "batch %q contiguous", tag)
		}
		delete(saved, tag)
	}
	require.Empty(t, saved, "every batch that was acknowledged is there")
	doc, v := load(t, shared, "counter")
	require.Equal(t, fmt.Sprint(goroutines/2*rounds), doc, "every save counted once")
	require.Equal(t, int64(goroutines/2*rounds), v)
	for g := range goroutines {
		require.Len(t, rawRows(t, f.st, fmt.Sprintf("own-%d", g)), rounds)
	}
	tx, n := f.st.Stats()
	t.Logf("%d writes in %d transactions, %d version conflicts", n-n0, tx-tx0, conflicts)
	require.Less(t, tx-tx0, n-n0, "the writes shared transactions")
}

func isNoCheckpoint(err error) bool { return errors.Is(err, session.ErrNoCheckpoint) }
func isConflict(err error) bool     { return errors.Is(err, session.ErrCheckpointConflict) }

// TestCheckpointsLifecycle: Clear and ReplaceItems keep a session's
// checkpoints, RemoveSession deletes them with everything else, and a
// session with checkpoints alone is not listed as holding items.
func TestCheckpointsLifecycle(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.session(t, "a")
	other := f.session(t, "b")
	require.NoError(t, s.AddItems(ctx, numbered("a", 2)))
	_, err := s.SaveCheckpoint(ctx, "z", []byte("dz"), 0)
	require.NoError(t, err)
	_, err = s.SaveCheckpoint(ctx, "a", []byte("da"), 0)
	require.NoError(t, err)
	_, err = other.SaveCheckpoint(ctx, "a", []byte("other"), 0)
	require.NoError(t, err)

	require.NoError(t, s.Clear(ctx))
	require.NoError(t, s.ReplaceItems(ctx, nil))
	names, err := s.ListCheckpoints(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "z"}, names, "Clear keeps the checkpoints")
	doc, _ := load(t, s, "z")
	require.Equal(t, "dz", doc)
	var sessionRows int
	require.NoError(t, f.st.DB().QueryRowContext(ctx, `SELECT count(*) FROM agent_sessions`).Scan(&sessionRows))
	require.Zero(t, sessionRows, "saving a checkpoint makes no session row")

	require.NoError(t, s.AddItems(ctx, numbered("again", 1)))
	require.NoError(t, f.st.RemoveSession(ctx, "a"))
	names, err = s.ListCheckpoints(ctx)
	require.NoError(t, err)
	require.Empty(t, names)
	require.Empty(t, rawRows(t, f.st, "a"))
	require.NoError(t, f.st.DB().QueryRowContext(ctx, `SELECT count(*) FROM agent_sessions`).Scan(&sessionRows))
	require.Zero(t, sessionRows)
	doc, _ = load(t, other, "a")
	require.Equal(t, "other", doc, "another session's checkpoints stay")
}

// TestCheckpointsTableLayout pins the table's DDL and that documents are
// stored as BLOBs, byte for byte.
func TestCheckpointsTableLayout(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.session(t, "a")
	doc := []byte("\x00\xff{not json at all}\n")
	_, err := s.SaveCheckpoint(ctx, "n", doc, 0)
	require.NoError(t, err)
	got, _, err := s.LoadCheckpoint(ctx, "n")
	require.NoError(t, err)
	require.Equal(t, doc, got, "any bytes, kept as they are")
	var typ string
	var version int64
	require.NoError(t, f.st.DB().QueryRowContext(ctx,
		`SELECT typeof(document), version FROM agent_checkpoints WHERE session_id = 'a' AND name = 'n'`).Scan(&typ, &version))
	require.Equal(t, "blob", typ)
	require.Equal(t, int64(1), version)
	var ddl string
	require.NoError(t, f.st.DB().QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE name = 'agent_checkpoints'`).Scan(&ddl))
	ddl = strings.Join(strings.Fields(ddl), " ")
	require.Equal(t, `CREATE TABLE "agent_checkpoints" ( session_id TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL, document BLOB NOT NULL, updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY (session_id, name) )`, ddl)

	// The option names it.
	path := filepath.Join(t.TempDir(), "named.db")
	st := openStore(t, path, Options{CheckpointsTable: "run_states"})
	ns, err := st.Session("a")
	require.NoError(t, err)
	_, err = ns.SaveCheckpoint(ctx, "n", []byte("d"), 0)
	require.NoError(t, err)
	require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT count(*) FROM run_states`).Scan(&version))
	require.Equal(t, int64(1), version)
	for _, bad := range []Options{{CheckpointsTable: "bad name"}, {CheckpointsTable: "AGENT_MESSAGES"}, {SessionsTable: "s", CheckpointsTable: "S"}} {
		_, err := OpenFile(ctx, ":memory:", bad)
		require.ErrorIs(t, err, ErrInvalidOptions, "%+v", bad)
	}
}

// TestCheckpointsExistingStores: a Python-written file, and one an older
// version of this package wrote (the session tables alone), open as they
// are; a writable open adds the checkpoints table and nothing else, a
// read-only or SkipCreateTables open adds nothing, reads no checkpoints
// and refuses saves.
func TestCheckpointsExistingStores(t *testing.T) {
	ctx := context.Background()
	older := func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "older.db")
		db, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		defer db.Close()
		q := newQueries(Options{SessionsTable: DefaultSessionsTable, MessagesTable: DefaultMessagesTable})
		for _, ddl := range []string{q.createSessions, q.createMessages, q.createIndex,
			`INSERT INTO agent_sessions (session_id) VALUES ('old')`,
			`INSERT INTO agent_messages (session_id, message_data) VALUES ('old', '{"old":1}')`} {
			_, err := db.ExecContext(ctx, ddl)
			require.NoError(t, err)
		}
		return path
	}
	python := func(t *testing.T) string { p, _ := pythonFile(t); return p }
	for name, file := range map[string]func(*testing.T) string{"python": python, "older": older} {
		t.Run(name, func(t *testing.T) {
			path := file(t)
			sessionTables := func() []string {
				var out []string
				db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
				require.NoError(t, err)
				defer db.Close()
				rows, err := db.QueryContext(ctx, `SELECT name, sql FROM sqlite_master WHERE tbl_name NOT IN ('agent_checkpoints', 'agent_messages_operations') ORDER BY name`)
				require.NoError(t, err)
				for rows.Next() {
					var n string
					var ddl sql.NullString
					require.NoError(t, rows.Scan(&n, &ddl))
					out = append(out, n+": "+ddl.String)
				}
				require.NoError(t, closeRows(rows))
				return out
			}
			before := sessionTables()
			for _, opts := range []Options{{ReadOnly: true}, {SkipCreateTables: true}} {
				st := openStore(t, path, opts)
				s, err := st.Session("old")
				require.NoError(t, err)
				_, _, err = s.LoadCheckpoint(ctx, "n")
				require.ErrorIs(t, err, session.ErrNoCheckpoint, "%+v", opts)
				names, err := s.ListCheckpoints(ctx)
				require.NoError(t, err)
				require.Empty(t, names)
				_, err = s.SaveCheckpoint(ctx, "n", []byte("d"), 0)
				if opts.ReadOnly {
					require.ErrorIs(t, err, ErrReadOnly)
				} else {
					require.ErrorIs(t, err, ErrNoSchema)
					require.ErrorContains(t, err, "agent_checkpoints")
					require.NoError(t, s.DeleteCheckpoint(ctx, "n", 0), "nothing to delete")
					require.NoError(t, st.RemoveSession(ctx, "nobody"))
				}
				require.False(t, tableOf(t, st, "agent_checkpoints"), "%+v created nothing", opts)
				require.NoError(t, st.Close())
			}
			st := openStore(t, path, Options{})
			require.True(t, tableOf(t, st, "agent_checkpoints"), "a writable open creates the table")
			s, err := st.Session("old")
			require.NoError(t, err)
			v, err := s.AppendWithCheckpoint(ctx, numbered("new", 1), "n", []byte("d"), 0)
			require.NoError(t, err)
			require.Equal(t, int64(1), v)
			require.NoError(t, st.Close())
			require.Equal(t, before, sessionTables(), "the session tables are as they were")
		})
	}
}

func tableOf(t *testing.T, st *Store, name string) bool {
	t.Helper()
	ok, err := tableExists(context.Background(), st.DB(), name)
	require.NoError(t, err)
	return ok
}

// TestCheckpointsLazyTable: a Store on a file whose checkpoints table
// appeared, or disappeared, after it opened (another program's
// migration) finds it at its first checkpoint call, and a writable Store
// that could not create it at open creates it at the first save.
func TestCheckpointsLazyTable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lazy.db")
	w := openStore(t, path, Options{})
	_, err := w.DB().ExecContext(ctx, `DROP TABLE agent_checkpoints`)
	require.NoError(t, err)
	skip := openStore(t, path, Options{SkipCreateTables: true})
	ss, err := skip.Session("a")
	require.NoError(t, err)
	_, err = ss.SaveCheckpoint(ctx, "n", []byte("d"), 0)
	require.ErrorIs(t, err, ErrNoSchema)

	w2 := openStore(t, path, Options{})
	w2.ckReady.Store(false) // as if the create at open had failed
	_, err = w2.DB().ExecContext(ctx, `DROP TABLE agent_checkpoints`)
	require.NoError(t, err)
	s2, err := w2.Session("a")
	require.NoError(t, err)
	_, _, err = s2.LoadCheckpoint(ctx, "n")
	require.ErrorIs(t, err, session.ErrNoCheckpoint)
	_, err = s2.SaveCheckpoint(ctx, "n", []byte("d"), 3)
	require.ErrorIs(t, err, session.ErrCheckpointConflict)
	require.False(t, tableOf(t, w2, "agent_checkpoints"), "a conflicting save rolled its CREATE back")
	v, err := s2.SaveCheckpoint(ctx, "n", []byte("d"), 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), v)

	doc, _ := load(t, ss, "n")
	require.Equal(t, "d", doc, "the SkipCreateTables Store finds the table now")
	names, err := ss.ListCheckpoints(ctx)
	require.NoError(t, err)
	require.True(t, slices.Equal([]string{"n"}, names))
}

// TestCheckpointConflictRunsAgainAfterRollback: a version check that
// failed in a group transaction that then rolls back (a later batch of the
// group fails) was decided on writes that are undone: it runs again with
// the others, and its answer is the one the committed order gives.
func TestCheckpointConflictRunsAgainAfterRollback(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	_, err := f.st.DB().ExecContext(ctx, `CREATE TRIGGER refuse BEFORE INSERT ON agent_messages
        WHEN NEW.message_data = '{"refuse":1}' BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END`)
	require.NoError(t, err)
	s := f.session(t, "a")
	tx0, w0 := f.st.Stats()

	release := holdLock(t, f.path)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	vers := make([]int64, 3)
	run := func(i int, fn func() (int64, error)) {
		wg.Add(1)
		go func() { defer wg.Done(); vers[i], errs[i] = fn() }()
		waitQueued(t, f.st, i+1)
	}
	run(0, func() (int64, error) {
		return s.AppendWithCheckpoint(ctx, numbered("first", 1), "state", []byte("first"), 0)
	})
	run(1, func() (int64, error) {
		return s.AppendWithCheckpoint(ctx, numbered("second", 1), "state", []byte("second"), 0)
	})
	run(2, func() (int64, error) { return 0, f.session(t, "b").AddItems(ctx, items(t, `{"refuse":1}`)) })
	release()
	wg.Wait()
	require.NoError(t, errs[0])
	require.Equal(t, int64(1), vers[0])
	require.ErrorIs(t, errs[1], session.ErrCheckpointConflict, "run again after the first committed: still second")
	require.ErrorContains(t, errs[2], "refused by the test trigger")
	tx1, w1 := f.st.Stats()
	require.Equal(t, int64(1), tx1-tx0, "the first group rolled back, the second committed")
	require.Equal(t, int64(1), w1-w0)
	require.Equal(t, texts(numbered("first", 1)), rawRows(t, f.st, "a"))
	doc, v := load(t, s, "state")
	require.Equal(t, "first", doc)
	require.Equal(t, int64(1), v)
}
