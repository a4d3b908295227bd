package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// pySession issues, with pgx, the statements the Python SDK's
// SQLAlchemySession (src/agents/extensions/memory/sqlalchemy_session.py)
// issues on PostgreSQL through SQLAlchemy's asyncpg dialect, in the same
// order and transactions.
type pySession struct {
	t      *testing.T
	c      *pgx.Conn
	schema string
	id     string
}

// pyCreateTables is what SQLAlchemy's create_all emits for the class's
// tables on PostgreSQL (note SERIAL: Integer, autoincrement).
func pyCreateTables(t *testing.T, c *pgx.Conn, schema string) {
	t.Helper()
	ctx := context.Background()
	for _, ddl := range []string{
		`CREATE SCHEMA IF NOT EXISTS ` + schema,
		`SET search_path TO ` + schema,
		`CREATE TABLE agent_sessions (
	session_id VARCHAR NOT NULL, 
	created_at TIMESTAMP WITHOUT TIME ZONE DEFAULT CURRENT_TIMESTAMP NOT NULL, 
	updated_at TIMESTAMP WITHOUT TIME ZONE DEFAULT CURRENT_TIMESTAMP NOT NULL, 
	PRIMARY KEY (session_id)
)`,
		`CREATE TABLE agent_messages (
	id SERIAL NOT NULL, 
	session_id VARCHAR NOT NULL, 
	message_data TEXT NOT NULL, 
	created_at TIMESTAMP WITHOUT TIME ZONE DEFAULT CURRENT_TIMESTAMP NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(session_id) REFERENCES agent_sessions (session_id) ON DELETE CASCADE
)`,
		`CREATE INDEX idx_agent_messages_session_time ON agent_messages (session_id, created_at)`,
	} {
		_, err := c.Exec(ctx, ddl)
		require.NoError(t, err, ddl)
	}
}

// addItems is SQLAlchemySession.add_items with items already serialized
// by json.dumps(item, ensure_ascii=True, separators=(",", ":")).
func (p *pySession) addItems(payload ...string) {
	p.t.Helper()
	require.NoError(p.t, p.addItemsErr(payload...))
}

// addItemsErr is addItems returning its error, for other goroutines than
// the test's.
func (p *pySession) addItemsErr(payload ...string) error {
	ctx := context.Background()
	return pgx.BeginFunc(ctx, p.c, func(tx pgx.Tx) error {
		var existing string
		err := tx.QueryRow(ctx, `SELECT agent_sessions.session_id 
FROM agent_sessions 
WHERE agent_sessions.session_id = $1::VARCHAR`, p.id).Scan(&existing)
		if err == pgx.ErrNoRows {
			// begin_nested: a savepoint around the insert, so that an
			// IntegrityError from a concurrent creator is swallowed.
			if _, err := tx.Exec(ctx, `SAVEPOINT sa_savepoint_1`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO agent_sessions (session_id) VALUES ($1::VARCHAR)`, p.id)
			var pgErr *pgconn.PgError
			switch {
			case errors.As(err, &pgErr) && pgErr.Code == "23505":
				// except IntegrityError: another writer created it.
				if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT sa_savepoint_1`); err != nil {
					return err
				}
			case err != nil:
				return err
			default:
				if _, err := tx.Exec(ctx, `RELEASE SAVEPOINT sa_savepoint_1`); err != nil {
					return err
				}
			}
		} else if err != nil {
			return err
		}
		// executemany of one INSERT per item.
		for _, m := range payload {
			if _, err := tx.Exec(ctx, `INSERT INTO agent_messages (session_id, message_data) VALUES ($1::VARCHAR, $2::VARCHAR)`, p.id, m); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `UPDATE agent_sessions SET updated_at=CURRENT_TIMESTAMP WHERE agent_sessions.session_id = $1::VARCHAR`, p.id)
		return err
	})
}

// getItems is SQLAlchemySession.get_items(limit): oldest first by
// (created_at, id); with a limit, newest first then reversed. Its
// window-doubling for corrupt rows is not needed here: every row is valid.
func (p *pySession) getItems(limit int) []string {
	p.t.Helper()
	ctx := context.Background()
	var rows pgx.Rows
	var err error
	if limit < 0 {
		rows, err = p.c.Query(ctx, `SELECT agent_messages.message_data 
FROM agent_messages 
WHERE agent_messages.session_id = $1::VARCHAR ORDER BY agent_messages.created_at ASC, agent_messages.id ASC`, p.id)
	} else {
		rows, err = p.c.Query(ctx, `SELECT agent_messages.message_data 
FROM agent_messages 
WHERE agent_messages.session_id = $1::VARCHAR ORDER BY agent_messages.created_at DESC, agent_messages.id DESC 
 LIMIT $2::INTEGER`, p.id, limit)
	}
	require.NoError(p.t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(p.t, err)
	if limit >= 0 {
		slices.Reverse(out)
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// popItem is SQLAlchemySession._pop_item on a dialect with DELETE ...
// RETURNING: the DELETE is the claim; a lost race is told from an empty
// session by looking again.
func (p *pySession) popItem() (string, bool) {
	p.t.Helper()
	ctx := context.Background()
	for {
		var data string
		var found, retry bool
		err := pgx.BeginFunc(ctx, p.c, func(tx pgx.Tx) error {
			err := tx.QueryRow(ctx, `DELETE FROM agent_messages WHERE agent_messages.id = (SELECT agent_messages.id 
FROM agent_messages 
WHERE agent_messages.session_id = $1::VARCHAR ORDER BY agent_messages.created_at DESC, agent_messages.id DESC 
 LIMIT $2::INTEGER) RETURNING agent_messages.message_data`, p.id, 1).Scan(&data)
			if err == nil {
				found = true
				return nil
			}
			if err != pgx.ErrNoRows {
				return err
			}
			var id int64
			err = tx.QueryRow(ctx, `SELECT agent_messages.id 
FROM agent_messages 
WHERE agent_messages.session_id = $1::VARCHAR ORDER BY agent_messages.created_at DESC, agent_messages.id DESC 
 LIMIT $2::INTEGER`, p.id, 1).Scan(&id)
			if err == pgx.ErrNoRows {
				return nil
			}
			retry = err == nil
			return err
		})
		require.NoError(p.t, err)
		if !retry {
			return data, found
		}
	}
}

// clearSession is SQLAlchemySession._clear_session.
func (p *pySession) clearSession() {
	p.t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, p.c, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM agent_messages WHERE agent_messages.session_id = $1::VARCHAR`, p.id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM agent_sessions WHERE agent_sessions.session_id = $1::VARCHAR`, p.id)
		return err
	})
	require.NoError(p.t, err)
}

// TestPythonInterop interleaves SQLAlchemySession's statements with the
// adapter on one session of one database whose tables Python made: after
// every step both sides read the same items in the same order, in full
// and as latest-N.
func TestPythonInterop(t *testing.T) {
	ctx := context.Background()
	schema := freshSchema(t)
	c := connect(t)
	pyCreateTables(t, c, schema)
	py := &pySession{t: t, c: c, schema: schema, id: "shared-conversation"}
	st := openStore(t, Options{Schema: schema})
	g, err := st.Session(py.id)
	require.NoError(t, err)

	var want []string // the history as both must read it
	same := func(step string) {
		t.Helper()
		got, err := g.Items(ctx)
		require.NoError(t, err)
		if want == nil {
			want = []string{}
		}
		require.Equal(t, want, strs(got), "%s: Go reads", step)
		require.Equal(t, want, py.getItems(-1), "%s: Python reads", step)
		for _, n := range []int{1, 2, 3, 5, 100} {
			latest, err := g.LatestItems(ctx, n)
			require.NoError(t, err)
			require.Equal(t, py.getItems(n), strs(latest), "%s: latest %d", step, n)
		}
	}
	pyItem := func(i int) string {
		// json.dumps(..., ensure_ascii=True, separators=(",", ":"))
		return fmt.Sprintf(`{"role":"user","content":"py %d \u00e9\u2603","type":"message"}`, i)
	}
	goItems := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf(`{"type":"message","role":"assistant","content":"go %d é☃"}`, i))
		}
		return out
	}
	addGo := func(items []string) {
		t.Helper()
		var its []session.Item
		for _, s := range items {
			its = append(its, item(s))
		}
		require.NoError(t, g.AddItems(ctx, its))
		want = append(want, items...)
	}

	py.addItems(pyItem(0), pyItem(1))
	want = append(want, pyItem(0), pyItem(1))
	same("python adds 2 (and creates the session row)")
	addGo(goItems(0, 3))
	same("go adds 3")
	py.addItems(pyItem(2))
	want = append(want, pyItem(2))
	same("python adds 1")

	it, ok, err := g.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, pyItem(2), it.String(), "go pops python's newest")
	want = want[:len(want)-1]
	same("go pops")

	data, ok := py.popItem()
	require.True(t, ok)
	require.Equal(t, goItems(2, 3)[0], data, "python pops go's newest")
	want = want[:len(want)-1]
	same("python pops")

	require.NoError(t, g.ReplaceItems(ctx, []session.Item{item(goItems(10, 11)[0]), item(pyItem(10))}))
	want = []string{goItems(10, 11)[0], pyItem(10)}
	same("go replaces")
	py.addItems(pyItem(11), pyItem(12))
	want = append(want, pyItem(11), pyItem(12))
	same("python adds after a replace")

	py.clearSession()
	want = nil
	same("python clears")
	addGo(goItems(20, 22))
	same("go adds to a session python cleared")
	py.addItems(pyItem(20))
	want = append(want, pyItem(20))
	same("python adds")
	require.NoError(t, g.Clear(ctx))
	want = nil
	same("go clears")
	_, ok = py.popItem()
	require.False(t, ok)
	_, ok, err = g.PopItem(ctx)
	require.NoError(t, err)
	require.False(t, ok)

	// The tables stay Python's: int4 ids, Python's index, plus the
	// adapter's (session_id, created_at, id) index.
	var idType string
	require.NoError(t, c.QueryRow(ctx, `SELECT data_type FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = 'agent_messages' AND column_name = 'id'`, schema).Scan(&idType))
	require.Equal(t, "integer", idType)
	var indexes []string
	rows, err := c.Query(ctx, `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'agent_messages' ORDER BY 1`, schema)
	require.NoError(t, err)
	indexes, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"agent_messages_pkey", "idx_agent_messages_session_time", "idx_agent_messages_time_id"}, indexes)
}

// TestPythonConcurrentPops: Python's pops (which take no session lock) and
// the adapter's, racing on one session: every item is popped exactly once.
func TestPythonConcurrentPops(t *testing.T) {
	ctx := context.Background()
	schema := freshSchema(t)
	c := connect(t)
	pyCreateTables(t, c, schema)
	st := openStore(t, Options{Schema: schema})
	g, err := st.Session("racing")
	require.NoError(t, err)
	const n = 300
	want := numbered("r", 0, n)
	require.NoError(t, g.AddItems(ctx, want))

	var mu sync.Mutex
	popped := map[string]int{}
	record := func(s string) {
		mu.Lock()
		popped[s]++
		mu.Unlock()
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Go(func() { // Python
			pc := connect(t)
			if _, err := pc.Exec(ctx, `SET search_path TO `+schema); err != nil {
				errs <- err
				return
			}
			py := &pySession{t: t, c: pc, schema: schema, id: "racing"}
			for {
				data, ok := py.popItem()
				if !ok {
					return
				}
				record(data)
			}
		})
		wg.Go(func() { // Go
			for {
				it, ok, err := g.PopItem(ctx)
				if err != nil {
					errs <- fmt.Errorf("go popper %d: %w", w, err)
					return
				}
				if !ok {
					return
				}
				record(it.String())
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	require.Len(t, popped, n)
	for k, v := range popped {
		require.Equal(t, 1, v, "%s popped %d times", k, v)
	}
}
