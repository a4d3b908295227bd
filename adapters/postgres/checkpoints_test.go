package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// ckSession returns a handle on id, failing the test on an error.
func ckSession(t *testing.T, st *Store, id string) *Session {
	t.Helper()
	s, err := st.Session(id)
	require.NoError(t, err)
	return s
}

// loadCk returns the checkpoint's document and version.
func loadCk(t *testing.T, s *Session, name string) (string, int64) {
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
	schema := freshSchema(t)
	st := openStore(t, Options{Schema: schema})
	s := ckSession(t, st, "run-1")
	require.NoError(t, s.AddItems(ctx, numbered("before", 0, 2)))
	v, err := s.AppendWithCheckpoint(ctx, numbered("turn1", 0, 2), "state", []byte(`{"turn":1}`), 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), v)

	for _, stale := range []int64{0, 2, 7, -2} {
		_, err = s.AppendWithCheckpoint(ctx, numbered("stale", 0, 3), "state", []byte(`{"secret-document":1}`), stale)
		require.ErrorIs(t, err, session.ErrCheckpointConflict, "version %d", stale)
		require.ErrorContains(t, err, `"state"`)
		require.ErrorContains(t, err, `"run-1"`)
		require.ErrorContains(t, err, "stored version is 1")
		require.NotContains(t, err.Error(), "secret-document", "errors never hold the document")
	}
	_, err = s.SaveCheckpoint(ctx, "state", []byte(`{"secret-document":1}`), 0)
	require.ErrorIs(t, err, session.ErrCheckpointConflict)
	require.NotContains(t, err.Error(), "secret-document")

	want := append(strs(numbered("before", 0, 2)), strs(numbered("turn1", 0, 2))...)
	require.Equal(t, want, rawRows(t, st, "run-1"), "nothing of the stale appends")
	doc, ver := loadCk(t, s, "state")
	require.Equal(t, `{"turn":1}`, doc)
	require.Equal(t, int64(1), ver)
	require.Equal(t, int32(0), st.Pool().Stat().AcquiredConns(), "every connection went back to the pool")

	// The right version appends and advances; AnyVersion overwrites.
	v, err = s.AppendWithCheckpoint(ctx, numbered("turn2", 0, 1), "state", []byte(`{"turn":2}`), 1)
	require.NoError(t, err)
	require.Equal(t, int64(2), v)
	v, err = s.SaveCheckpoint(ctx, "state", []byte(`{"any":1}`), session.AnyVersion)
	require.NoError(t, err)
	require.Equal(t, int64(3), v)
	v, err = s.AppendWithCheckpoint(ctx, numbered("any", 0, 1), "fresh", []byte(`{"any":0}`), session.AnyVersion)
	require.NoError(t, err)
	require.Equal(t, int64(1), v, "AnyVersion on nothing stored starts at 1")
	require.Len(t, rawRows(t, st, "run-1"), 6)

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

	// A batch the server refuses (a trigger refuses one of its items)
	// saves no checkpoint either.
	for _, q := range []string{
		`CREATE FUNCTION ` + quote(schema) + `.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.message_data = '{"refuse":1}' THEN RAISE EXCEPTION 'refused by the test trigger'; END IF; RETURN NEW; END $$`,
		`CREATE TRIGGER refuse BEFORE INSERT ON ` + st.q.messages + ` FOR EACH ROW EXECUTE FUNCTION ` + quote(schema) + `.refuse()`,
	} {
		_, err := st.Pool().Exec(ctx, q)
		require.NoError(t, err, q)
	}
	_, err = s.AppendWithCheckpoint(ctx, []session.Item{item(`{"ok":1}`), item(`{"refuse":1}`)}, "refused", []byte("d"), 0)
	require.ErrorContains(t, err, "refused by the test trigger")
	_, _, err = s.LoadCheckpoint(ctx, "refused")
	require.ErrorIs(t, err, session.ErrNoCheckpoint, "the checkpoint rolled back with its batch")
	require.Len(t, rawRows(t, st, "run-1"), 6)
	require.Equal(t, int32(0), st.Pool().Stat().AcquiredConns())
}

// TestCheckpointReopen: what an AppendWithCheckpoint committed, the batch
// and the checkpoint, is there for a Store (a pool) opened afterwards.
func TestCheckpointReopen(t *testing.T) {
	ctx := context.Background()
	schema := freshSchema(t)
	st, err := Open(ctx, serverURL(t), Options{Schema: schema})
	require.NoError(t, err)
	s := ckSession(t, st, "run")
	require.NoError(t, s.AddItems(ctx, numbered("user", 0, 1)))
	v, err := s.AppendWithCheckpoint(ctx, numbered("settle", 0, 3), "runstate", []byte(`{"step":"settled"}`), 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), v)
	require.NoError(t, st.Close())

	re := openStore(t, Options{Schema: schema})
	r := ckSession(t, re, "run")
	got, err := r.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, append(strs(numbered("user", 0, 1)), strs(numbered("settle", 0, 3))...), strs(got))
	doc, ver := loadCk(t, r, "runstate")
	require.Equal(t, `{"step":"settled"}`, doc)
	require.Equal(t, int64(1), ver)
}

// TestCheckpointConcurrentCommits: two Stores (two pools, as two
// processes) x 8 goroutines commit batches with one shared checkpoint in
// load-save loops, beside plain AddItems to the same session: every
// acknowledged batch is there whole and contiguous, none of a conflicting
// attempt is, and the checkpoint counts every commit once.
func TestCheckpointConcurrentCommits(t *testing.T) {
	ctx := context.Background()
	schema := freshSchema(t)
	stores := []*Store{openStore(t, Options{Schema: schema}), openStore(t, Options{Schema: schema})}
	const perStore, rounds, batch = 8, 10, 3
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		saved     = map[string]bool{}
		commits   int
		conflicts int
		errs      = make(chan error, 2*perStore)
	)
	for si, st := range stores {
		for g := range perStore {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := st.Session("shared")
				if err != nil {
					errs <- err
					return
				}
				for r := range rounds {
					tag := fmt.Sprintf("s%d.g%d.r%d", si, g, r)
					if g%4 == 0 {
						if err := s.AddItems(ctx, numbered(tag, 0, batch)); err != nil {
							errs <- err
							return
						}
						mu.Lock()
						saved[tag] = true
						mu.Unlock()
						continue
					}
					for {
						doc, v, err := s.LoadCheckpoint(ctx, "counter")
						count := 0
						switch {
						case err == nil:
							_, _ = fmt.Sscanf(string(doc), "%d", &count)
						case !errors.Is(err, session.ErrNoCheckpoint):
							errs <- err
							return
						}
						_, err = s.AppendWithCheckpoint(ctx, numbered(tag, 0, batch), "counter", []byte(fmt.Sprint(count+1)), v)
						mu.Lock()
						if err == nil {
							saved[tag] = true
							commits++
						} else if errors.Is(err, session.ErrCheckpointConflict) {
							conflicts++
						}
						mu.Unlock()
						if err == nil {
							break
						}
						if !errors.Is(err, session.ErrCheckpointConflict) {
							errs <- err
							return
						}
						tag += "'" // a new tag for the next attempt
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := rawRows(t, stores[0], "shared")
	require.Len(t, got, 2*perStore*rounds*batch, "every batch, and nothing of a conflicting attempt")
	for i := 0; i < len(got); i += batch {
		var obj struct{ N string }
		require.NoError(t, json.Unmarshal([]byte(got[i]), &obj), got[i])
		tag := obj.N[:len(obj.N)-2] // "<tag>-0"
		require.True(t, saved[tag], "batch %q was appended though its write failed", tag)
		require.Equal(t, strs(numbered(tag, 0, batch)), got[i:i+batch], "batch %q whole and contiguous", tag)
		delete(saved, tag)
	}
	require.Empty(t, saved, "every acknowledged batch is there")
	doc, v := loadCk(t, ckSession(t, stores[1], "shared"), "counter")
	require.Equal(t, fmt.Sprint(commits), doc, "every commit counted once")
	require.Equal(t, int64(commits), v)
	t.Logf("%d commits, %d version conflicts", commits, conflicts)
}

// TestCheckpointRemoveWhileCommitting: RemoveSession and Clear beside
// AppendWithCheckpoint on one session take the rows' locks in one order,
// so none of them ever fails with a deadlock, and what is left is
// consistent: every checkpoint left has its batch.
func TestCheckpointRemoveWhileCommitting(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := ckSession(t, st, "busy")
			for r := range 15 {
				name := fmt.Sprintf("n%d", g%3)
				if _, err := s.AppendWithCheckpoint(ctx, numbered(fmt.Sprintf("%s.%d.%d", name, g, r), 0, 2), name, []byte("d"), session.AnyVersion); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := ckSession(t, st, "busy")
		for i := range 30 {
			var err error
			if i%2 == 0 {
				err = st.RemoveSession(ctx, "busy")
			} else {
				err = s.Clear(ctx)
			}
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	require.NoError(t, st.RemoveSession(ctx, "busy"))
	names, err := ckSession(t, st, "busy").ListCheckpoints(ctx)
	require.NoError(t, err)
	require.Empty(t, names)
	require.Empty(t, rawRows(t, st, "busy"))
}

// TestCheckpointNamesAndIDs: names and session ids PostgreSQL's text
// cannot hold (NUL, invalid UTF-8) are stored escaped, as session ids are,
// and listed as given, sorted as sort.Strings sorts them (not by the
// server's collation).
func TestCheckpointNamesAndIDs(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	for _, id := range []string{"plain", "nul\x00id", "bad\xffutf8"} {
		s := ckSession(t, st, id)
		names := []string{"b", "B", "a\x00b", "\xff", "é", "Z", escapedPrefix + "00"}
		for i, n := range names {
			_, err := s.SaveCheckpoint(ctx, n, []byte(fmt.Sprintf("%s/%d", id, i)), 0)
			require.NoError(t, err, "%q", n)
		}
		got, err := s.ListCheckpoints(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{escapedPrefix + "00", "B", "Z", "a\x00b", "b", "é", "\xff"}, got, id)
		for i, n := range names {
			doc, v := loadCk(t, s, n)
			require.Equal(t, fmt.Sprintf("%s/%d", id, i), doc)
			require.Equal(t, int64(1), v)
		}
	}
}

// TestCheckpointsTableLayout pins the table's columns, and that documents
// are any bytes, kept as they are.
func TestCheckpointsTableLayout(t *testing.T) {
	ctx := context.Background()
	schema := freshSchema(t)
	st := openStore(t, Options{Schema: schema})
	s := ckSession(t, st, "a")
	doc := []byte("\x00\xff{not json at all}\n")
	_, err := s.SaveCheckpoint(ctx, "n", doc, 0)
	require.NoError(t, err)
	got, _, err := s.LoadCheckpoint(ctx, "n")
	require.NoError(t, err)
	require.Equal(t, doc, got)

	rows, err := st.Pool().Query(ctx, `SELECT column_name, data_type, is_nullable FROM information_schema.columns
	WHERE table_schema = $1 AND table_name = 'agent_checkpoints' ORDER BY ordinal_position`, schema)
	require.NoError(t, err)
	var cols []string
	for rows.Next() {
		var name, typ, null string
		require.NoError(t, rows.Scan(&name, &typ, &null))
		cols = append(cols, name+" "+typ+" "+null)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{
		"session_id character varying NO", "name text NO", "version bigint NO",
		"document bytea NO", "updated_at timestamp without time zone NO",
	}, cols)
	var pk string
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT pg_get_constraintdef(oid) FROM pg_constraint
	WHERE conrelid = $1::regclass AND contype = 'p'`, st.q.ck.reg).Scan(&pk))
	require.Equal(t, "PRIMARY KEY (session_id, name)", pk)

	named := openStore(t, Options{Schema: schema, CheckpointsTable: "run_states"})
	_, err = ckSession(t, named, "a").SaveCheckpoint(ctx, "n", []byte("d"), 0)
	require.NoError(t, err)
	var n int
	require.NoError(t, named.Pool().QueryRow(ctx, `SELECT count(*) FROM `+quote(schema)+`.run_states`).Scan(&n))
	require.Equal(t, 1, n)
	for _, bad := range []Options{{CheckpointsTable: "bad name"}, {CheckpointsTable: "agent_messages"}, {SessionsTable: "s", CheckpointsTable: "S"}} {
		_, err := Open(ctx, serverURL(t), bad)
		require.ErrorIs(t, err, ErrInvalidOptions, "%+v", bad)
	}
}

// TestCheckpointsPythonTables: on the tables Python made, SkipCreateTables
// creates nothing, reads no checkpoints and refuses saves with
// ErrNoSchema; a role that may not create tables still opens the store
// (the first save says why it cannot); a default open adds the
// checkpoints table and leaves Python's as they were.
func TestCheckpointsPythonTables(t *testing.T) {
	ctx := context.Background()
	schema := freshSchema(t)
	c := connect(t)
	pyCreateTables(t, c, schema)
	_, err := c.Exec(ctx, `INSERT INTO agent_sessions (session_id) VALUES ('py')`)
	require.NoError(t, err)
	_, err = c.Exec(ctx, `INSERT INTO agent_messages (session_id, message_data) VALUES ('py', '{"role":"user","content":"hi"}')`)
	require.NoError(t, err)
	pythonColumns := func() []string {
		rows, err := c.Query(ctx, `SELECT table_name, column_name, data_type, column_default FROM information_schema.columns
		WHERE table_schema = $1 AND table_name IN ('agent_sessions', 'agent_messages') ORDER BY table_name, ordinal_position`, schema)
		require.NoError(t, err)
		var out []string
		for rows.Next() {
			var tbl, col, typ string
			var def *string
			require.NoError(t, rows.Scan(&tbl, &col, &typ, &def))
			d := ""
			if def != nil {
				d = *def
			}
			out = append(out, tbl+"."+col+" "+typ+" "+d)
		}
		require.NoError(t, rows.Err())
		return out
	}
	before := pythonColumns()
	// Python's tables lack the (session_id, created_at, id) index, which
	// a default open adds; make it, so that only the checkpoints table is
	// missing.
	_, err = c.Exec(ctx, `CREATE INDEX idx_agent_messages_time_id ON agent_messages (session_id, created_at, id)`)
	require.NoError(t, err)
	hasTable := func() bool {
		var ok bool
		require.NoError(t, c.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, quote(schema)+".agent_checkpoints").Scan(&ok))
		return ok
	}

	skip := openStore(t, Options{Schema: schema, SkipCreateTables: true})
	s := ckSession(t, skip, "py")
	_, _, err = s.LoadCheckpoint(ctx, "n")
	require.ErrorIs(t, err, session.ErrNoCheckpoint)
	names, err := s.ListCheckpoints(ctx)
	require.NoError(t, err)
	require.Empty(t, names)
	_, err = s.AppendWithCheckpoint(ctx, numbered("x", 0, 1), "n", []byte("d"), 0)
	require.ErrorIs(t, err, ErrNoSchema)
	require.ErrorContains(t, err, "agent_checkpoints")
	require.NoError(t, s.DeleteCheckpoint(ctx, "n", 0))
	require.ErrorIs(t, s.DeleteCheckpoint(ctx, "n", 4), session.ErrCheckpointConflict)
	require.NoError(t, skip.RemoveSession(ctx, "nobody"))
	require.False(t, hasTable(), "SkipCreateTables creates nothing")
	require.Equal(t, []string{`{"role":"user","content":"hi"}`}, rawRows(t, skip, "py"))

	// A role that may read and write the tables but not create any.
	var b [4]byte
	_, _ = rand.Read(b[:])
	role := "ck_nocreate_" + hex.EncodeToString(b[:])
	for _, q := range []string{
		`CREATE ROLE ` + role + ` NOLOGIN`,
		`GRANT USAGE ON SCHEMA ` + quote(schema) + ` TO ` + role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ` + quote(schema) + ` TO ` + role,
		`GRANT USAGE ON ALL SEQUENCES IN SCHEMA ` + quote(schema) + ` TO ` + role,
	} {
		_, err := c.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = c.Exec(ctx, `DROP OWNED BY `+role)
		_, _ = c.Exec(ctx, `DROP ROLE `+role)
	})
	cfg, err := pgxpool.ParseConfig(serverURL(t))
	require.NoError(t, err)
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, `SET ROLE `+role)
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	limited, err := OpenPool(ctx, pool, Options{Schema: schema})
	require.NoError(t, err, "a role that may not create the checkpoints table still opens the store")
	ls := ckSession(t, limited, "py")
	got, err := ls.Items(ctx)
	require.NoError(t, err)
	require.Len(t, got, 1)
	_, _, err = ls.LoadCheckpoint(ctx, "n")
	require.ErrorIs(t, err, session.ErrNoCheckpoint)
	_, err = ls.SaveCheckpoint(ctx, "n", []byte("d"), 0)
	require.ErrorContains(t, err, "permission denied", "the first save says why it cannot")
	require.False(t, hasTable())

	// A default open creates the table; Python's tables are as they were.
	st := openStore(t, Options{Schema: schema})
	require.True(t, hasTable())
	require.Equal(t, before, pythonColumns(), "Python's tables are as they were")
	gs := ckSession(t, st, "py")
	v, err := gs.AppendWithCheckpoint(ctx, numbered("go", 0, 1), "n", []byte("d"), 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), v)
	require.Len(t, rawRows(t, st, "py"), 2)
	// The Store that found no table at open finds it now.
	doc, _ := loadCk(t, ckSession(t, skip, "py"), "n")
	require.Equal(t, "d", doc)
}

// TestCheckpointErrorsNameTheOperation: a refused commit's error says what
// was refused (the batch's size, the checkpoint and the session), though
// the name is only made when there is an error to return.
func TestCheckpointErrorsNameTheOperation(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	s := ckSession(t, st, "s1")
	_, err := s.AppendWithCheckpoint(ctx, nil, "state", []byte(`{"v":1}`), 0)
	require.NoError(t, err)
	_, err = s.AppendWithCheckpoint(ctx, numbered("turn", 0, 2), "state", []byte(`{"v":2}`), 7)
	require.ErrorIs(t, err, session.ErrCheckpointConflict)
	require.Contains(t, err.Error(), `postgres: append 2 items with checkpoint "state" of session "s1"`)
	_, err = s.AppendWithCheckpoint(ctx, nil, "state", []byte(`{"v":2}`), 7)
	require.ErrorIs(t, err, session.ErrCheckpointConflict)
	require.Contains(t, err.Error(), `postgres: save checkpoint "state" of session "s1"`)
}
