package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// advancedPy issues the statements the Python SDK's AdvancedSQLiteSession
// (agents/extensions/memory/advanced_sqlite_session.py) issues, on one
// file: the base SQLiteSession tables, its structure tables, and add_items,
// get_items and pop_item on a branch.
type advancedPy struct {
	t  *testing.T
	db *sql.DB
	id string
}

func newAdvancedPy(t *testing.T, path, id string) *advancedPy {
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	q := newQueries(Options{SessionsTable: DefaultSessionsTable, MessagesTable: DefaultMessagesTable})
	for _, ddl := range []string{q.createSessions, q.createMessages, q.createIndex, `
                CREATE TABLE IF NOT EXISTS message_structure (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    session_id TEXT NOT NULL,
                    message_id INTEGER NOT NULL,
                    branch_id TEXT NOT NULL DEFAULT 'main',
                    message_type TEXT NOT NULL,
                    sequence_number INTEGER NOT NULL,
                    user_turn_number INTEGER,
                    branch_turn_number INTEGER,
                    tool_name TEXT,
                    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                    FOREIGN KEY (session_id)
                        REFERENCES agent_sessions(session_id) ON DELETE CASCADE,
                    FOREIGN KEY (message_id)
                        REFERENCES agent_messages(id) ON DELETE CASCADE
                )`, `
                CREATE TABLE IF NOT EXISTS turn_usage (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    session_id TEXT NOT NULL,
                    branch_id TEXT NOT NULL DEFAULT 'main',
                    user_turn_number INTEGER NOT NULL,
                    requests INTEGER DEFAULT 0,
                    input_tokens INTEGER DEFAULT 0,
                    output_tokens INTEGER DEFAULT 0,
                    total_tokens INTEGER DEFAULT 0,
                    input_tokens_details JSON,
                    output_tokens_details JSON,
                    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                    FOREIGN KEY (session_id)
                        REFERENCES agent_sessions(session_id) ON DELETE CASCADE,
                    UNIQUE(session_id, branch_id, user_turn_number)
                )`,
		`CREATE INDEX IF NOT EXISTS idx_structure_session_seq ON message_structure(session_id, sequence_number)`,
		`CREATE INDEX IF NOT EXISTS idx_structure_branch ON message_structure(session_id, branch_id)`,
		`CREATE INDEX IF NOT EXISTS idx_structure_turn ON message_structure(session_id, branch_id, user_turn_number)`,
		`CREATE INDEX IF NOT EXISTS idx_structure_branch_seq ON message_structure(session_id, branch_id, sequence_number)`,
		`CREATE INDEX IF NOT EXISTS idx_turn_usage_session_turn ON turn_usage(session_id, branch_id, user_turn_number)`,
	} {
		_, err := db.Exec(ddl)
		require.NoError(t, err)
	}
	return &advancedPy{t: t, db: db, id: id}
}

// addItems is add_items on branch: SQLiteSession's _insert_items and the
// class's _insert_structure_metadata, in one transaction.
func (p *advancedPy) addItems(branch string, items ...string) {
	t := p.t
	tx, err := p.db.Begin()
	require.NoError(t, err)
	defer tx.Rollback()
	exec := func(q string, args ...any) {
		_, err := tx.Exec(q, args...)
		require.NoError(t, err)
	}
	exec(`INSERT OR IGNORE INTO agent_sessions (session_id) VALUES (?)`, p.id)
	for _, it := range items {
		exec(`INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)`, p.id, it)
	}
	exec(`UPDATE agent_sessions SET updated_at = CURRENT_TIMESTAMP WHERE session_id = ?`, p.id)
	rows, err := tx.Query(`SELECT id FROM agent_messages WHERE session_id = ? ORDER BY id DESC LIMIT ?`, p.id, len(items))
	require.NoError(t, err)
	var ids []int64
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		ids = append([]int64{id}, ids...)
	}
	require.NoError(t, rows.Close())
	var seq, turn, branchTurn int
	require.NoError(t, tx.QueryRow(`
                SELECT COALESCE(MAX(sequence_number), 0)
                FROM message_structure
                WHERE session_id = ?`, p.id).Scan(&seq))
	require.NoError(t, tx.QueryRow(`
                SELECT
                    COALESCE(MAX(user_turn_number), 0) as max_global_turn,
                    COALESCE(MAX(branch_turn_number), 0) as max_branch_turn
                FROM message_structure
                WHERE session_id = ? AND branch_id = ?`, p.id, branch).Scan(&turn, &branchTurn))
	users := 0
	for i, it := range items {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(it), &m))
		typ := "other"
		switch {
		case m["role"] == "user":
			typ = "user"
			users++
		case m["role"] == "assistant":
			typ = "assistant"
		case m["type"] != nil:
			typ = fmt.Sprint(m["type"])
		}
		exec(`
                INSERT INTO message_structure
                (session_id, message_id, branch_id, message_type, sequence_number,
                 user_turn_number, branch_turn_number, tool_name)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, p.id, ids[i], branch, typ, seq+i+1, turn+users, branchTurn+users, nil)
	}
	require.NoError(t, tx.Commit())
}

// getItems is get_items(branch_id=branch) with no limit.
func (p *advancedPy) getItems(branch string) []string {
	rows, err := p.db.Query(`
                            SELECT m.message_data
                            FROM agent_messages m
                            JOIN message_structure s ON m.id = s.message_id
                            WHERE m.session_id = ? AND s.branch_id = ?
                            ORDER BY s.sequence_number ASC`, p.id, branch)
	require.NoError(p.t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(p.t, rows.Scan(&s))
		out = append(out, s)
	}
	return out
}

// popItem is pop_item on branch: claim the newest structure row, read its
// message, delete messages no structure row references.
func (p *advancedPy) popItem(branch string) (string, int64) {
	t := p.t
	tx, err := p.db.Begin()
	require.NoError(t, err)
	defer tx.Rollback()
	var msgID int64
	var turn sql.NullInt64
	require.NoError(t, tx.QueryRow(`
                            DELETE FROM message_structure
                            WHERE id = (
                                SELECT id FROM message_structure
                                WHERE session_id = ? AND branch_id = ?
                                ORDER BY sequence_number DESC
                                LIMIT 1
                            )
                            RETURNING message_id, user_turn_number`, p.id, branch).Scan(&msgID, &turn))
	var data string
	require.NoError(t, tx.QueryRow(`SELECT message_data FROM agent_messages WHERE id = ?`, msgID).Scan(&data))
	res, err := tx.Exec(`
                DELETE FROM agent_messages
                WHERE session_id = ?
                AND id NOT IN (
                    SELECT message_id
                    FROM message_structure ms
                    WHERE ms.session_id = ?
                )`, p.id, p.id)
	require.NoError(t, err)
	orphans, err := res.RowsAffected()
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	return data, orphans
}

// dump returns every row of every table, to compare before and after.
func (p *advancedPy) dump() string {
	var b strings.Builder
	for _, table := range []string{"agent_sessions", "agent_messages", "message_structure", "turn_usage"} {
		rows, err := p.db.Query(`SELECT * FROM ` + table + ` ORDER BY 1`)
		require.NoError(p.t, err)
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			require.NoError(p.t, rows.Scan(ptrs...))
			fmt.Fprintf(&b, "%s %v\n", table, vals)
		}
		require.NoError(p.t, rows.Close())
	}
	return b.String()
}

// TestAdvancedSQLiteSessionStore: on a file AdvancedSQLiteSession wrote,
// with two branches whose rows interleave, Go reads the main branch as the
// class reads it, refuses every write to the history with
// ErrAdvancedStore, changes no row, and the class's next pop finds no
// orphan to delete.
func TestAdvancedSQLiteSessionStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "advanced.db")
	py := newAdvancedPy(t, path, "conv")
	py.addItems("main", `{"role":"user","content":"one"}`, `{"role":"assistant","content":"1"}`)
	py.addItems("alt", `{"role":"user","content":"alt one"}`)
	py.addItems("main", `{"role":"user","content":"two"}`, `{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}`)
	py.addItems("alt", `{"role":"assistant","content":"alt 1"}`)
	py.addItems("main", `{"type":"function_call_output","call_id":"c","output":"ok"}`)
	main := py.getItems("main")
	require.Len(t, main, 5)

	st, err := OpenFile(ctx, path, Options{})
	require.NoError(t, err)
	defer st.Close()
	s, err := st.Session("conv")
	require.NoError(t, err)
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, main, texts(got), "Go reads the main branch as get_items does")
	latest, err := s.LatestItems(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, main[3:], texts(latest))
	followed, cursor, err := s.ItemsSince(ctx, "")
	require.NoError(t, err)
	require.Equal(t, main, texts(followed), "a follower reads the main branch too")
	followed, _, err = s.ItemsSince(ctx, cursor)
	require.NoError(t, err)
	require.Empty(t, followed)

	before := py.dump()
	item := session.MustItem(`{"role":"user","content":"from go"}`)
	for name, call := range map[string]func() error{
		"AddItems":      func() error { return s.AddItems(ctx, []session.Item{item}) },
		"PopItem":       func() error { _, _, err := s.PopItem(ctx); return err },
		"Clear":         func() error { return s.Clear(ctx) },
		"ReplaceItems":  func() error { return s.ReplaceItems(ctx, []session.Item{item}) },
		"RemoveSession": func() error { return st.RemoveSession(ctx, "conv") },
		"AddItemsOnce":  func() error { _, err := s.AddItemsOnce(ctx, "op", []session.Item{item}); return err },
		"AppendWithCheckpoint": func() error {
			_, err := s.AppendWithCheckpoint(ctx, []session.Item{item}, "run", []byte(`{}`), 0)
			return err
		},
	} {
		err := call()
		require.ErrorIs(t, err, ErrAdvancedStore, name)
		require.ErrorIs(t, err, session.ErrUnsupported, name)
		require.Contains(t, err.Error(), "AdvancedSQLiteSession", name)
	}
	require.Equal(t, before, py.dump(), "no row changed")

	// A checkpoint alone touches none of the class's tables.
	_, err = s.SaveCheckpoint(ctx, "run", []byte(`{"v":1}`), 0)
	require.NoError(t, err)
	require.Equal(t, before, py.dump())

	data, orphans := py.popItem("main")
	require.Equal(t, main[4], data)
	require.EqualValues(t, 1, orphans, "the popped message alone: Go left nothing else for the class to delete")
	require.Equal(t, main[:4], py.getItems("main"))
	got, err = s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, main[:4], texts(got), "Go sees the class's pop")
	_, _, err = s.ItemsSince(ctx, cursor)
	require.ErrorIs(t, err, session.ErrCursorLost, "the class popped the follower's last item")
}
