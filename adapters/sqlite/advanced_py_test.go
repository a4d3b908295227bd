package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// advancedPy stands in for one instance of the Python SDK's
// AdvancedSQLiteSession: it issues the statements the class issues, copied
// from openai-agents-python src/agents/extensions/memory/advanced_sqlite_session.py
// (and, for the base tables and rows, src/agents/memory/sqlite_session.py)
// at commit 7f7a44f8dc0650296bd5ab6c745c9bcbaa6ac3b7 (v0.22.0 and 28
// commits, 2026-08-22), in the class's order and transactions, and keeps
// the instance's state (_current_branch_id, _generation) as it does. The
// table names are the defaults (agent_sessions, agent_messages). Items
// are given as the text json.dumps wrote.
type advancedPy struct {
	t      *testing.T
	db     *sql.DB
	id     string
	branch string // _current_branch_id
	gen    int64  // _generation
}

// newAdvancedPy is AdvancedSQLiteSession(session_id=id, db_path=path,
// create_tables=True): _init_db_for_connection with
// _create_schema_for_connection and _init_structure_tables.
func newAdvancedPy(t *testing.T, path, id string) *advancedPy {
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	db.SetMaxOpenConns(1) // the class's one locked connection
	t.Cleanup(func() { db.Close() })
	p := &advancedPy{t: t, db: db, id: id, branch: "main"}
	p.tx(func(tx *sql.Tx) {
		for _, ddl := range []string{
			// sqlite_session.py _create_schema_for_connection
			`
            CREATE TABLE IF NOT EXISTS agent_sessions (
                session_id TEXT PRIMARY KEY,
                created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
            )
        `, `
            CREATE TABLE IF NOT EXISTS agent_messages (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                session_id TEXT NOT NULL,
                message_data TEXT NOT NULL,
                created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                FOREIGN KEY (session_id) REFERENCES agent_sessions (session_id)
                    ON DELETE CASCADE
            )
        `, `
            CREATE INDEX IF NOT EXISTS idx_agent_messages_session_id
            ON agent_messages (session_id, id)
        `,
			// _init_structure_tables
			`
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
            )
        `, `
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
            )
        `} {
			p.exec(tx, ddl)
		}
		p.ensureBranchReservations(tx)
		p.ensureClearGenerations(tx)
		for _, ddl := range []string{`
            CREATE INDEX IF NOT EXISTS idx_structure_session_seq
            ON message_structure(session_id, sequence_number)
        `, `
            CREATE INDEX IF NOT EXISTS idx_structure_branch
            ON message_structure(session_id, branch_id)
        `, `
            CREATE INDEX IF NOT EXISTS idx_structure_turn
            ON message_structure(session_id, branch_id, user_turn_number)
        `, `
            CREATE INDEX IF NOT EXISTS idx_structure_branch_seq
            ON message_structure(session_id, branch_id, sequence_number)
        `, `
            CREATE INDEX IF NOT EXISTS idx_turn_usage_session_turn
            ON turn_usage(session_id, branch_id, user_turn_number)
        `} {
			p.exec(tx, ddl)
		}
	})
	return p
}

// instance is another AdvancedSQLiteSession on the same file and session
// (create_tables=False), with its own branch pointer.
func (p *advancedPy) instance() *advancedPy {
	return &advancedPy{t: p.t, db: p.db, id: p.id, branch: "main"}
}

// session is an instance on the same file for another session id.
func (p *advancedPy) session(id string) *advancedPy {
	return &advancedPy{t: p.t, db: p.db, id: id, branch: "main"}
}

func (p *advancedPy) tx(fn func(tx *sql.Tx)) {
	tx, err := p.db.Begin()
	require.NoError(p.t, err)
	defer tx.Rollback()
	fn(tx)
	require.NoError(p.t, tx.Commit())
}

func (p *advancedPy) exec(tx *sql.Tx, q string, args ...any) int64 {
	res, err := tx.Exec(q, args...)
	require.NoError(p.t, err, q)
	n, err := res.RowsAffected()
	require.NoError(p.t, err)
	return n
}

func (p *advancedPy) one(tx *sql.Tx, q string, args []any, dest ...any) bool {
	err := tx.QueryRow(q, args...).Scan(dest...)
	if err == sql.ErrNoRows {
		return false
	}
	require.NoError(p.t, err, q)
	return true
}

// _ensure_branch_reservations_table
func (p *advancedPy) ensureBranchReservations(tx *sql.Tx) {
	p.exec(tx, `
            CREATE TABLE IF NOT EXISTS branch_reservations (
                session_id TEXT NOT NULL,
                branch_id TEXT NOT NULL,
                PRIMARY KEY (session_id, branch_id)
            )
        `)
	var one int
	if p.one(tx, `
            SELECT 1
            FROM message_structure ms
            WHERE ms.session_id = ?
            AND NOT EXISTS (
                SELECT 1 FROM branch_reservations br
                WHERE br.session_id = ms.session_id AND br.branch_id = ms.branch_id
            )
            LIMIT 1
            `, []any{p.id}, &one) {
		p.exec(tx, `
                INSERT OR IGNORE INTO branch_reservations (session_id, branch_id)
                SELECT DISTINCT session_id, branch_id
                FROM message_structure
                WHERE session_id = ?
                `, p.id)
	}
}

// _ensure_session_clear_generations_table
func (p *advancedPy) ensureClearGenerations(tx *sql.Tx) {
	p.exec(tx, `
            CREATE TABLE IF NOT EXISTS session_clear_generations (
                session_id TEXT PRIMARY KEY,
                generation INTEGER NOT NULL DEFAULT 0
            )
        `)
	p.exec(tx, `
            INSERT OR IGNORE INTO session_clear_generations (session_id, generation)
            VALUES (?, 0)
            `, p.id)
}

// _refresh_branch_after_external_clear
func (p *advancedPy) refresh(tx *sql.Tx, initialize bool) {
	if initialize {
		p.ensureClearGenerations(tx)
	} else {
		var one int
		if !p.one(tx, `
                SELECT 1 FROM sqlite_master
                WHERE type = 'table' AND name = 'session_clear_generations'
                `, nil, &one) {
			return
		}
	}
	var gen int64
	p.one(tx, `
            SELECT generation FROM session_clear_generations
            WHERE session_id = ?
            `, []any{p.id}, &gen)
	if gen != p.gen {
		p.gen, p.branch = gen, "main"
	}
}

// _resolve_read_branch
func (p *advancedPy) readBranch(tx *sql.Tx, branch string) string {
	if branch != "" {
		return branch
	}
	p.refresh(tx, false)
	return p.branch
}

// addItems is add_items: _insert_items and _insert_structure_metadata in
// one transaction.
func (p *advancedPy) addItems(items ...string) {
	p.tx(func(tx *sql.Tx) {
		p.refresh(tx, true)
		p.exec(tx, `
            INSERT OR IGNORE INTO agent_sessions (session_id) VALUES (?)
        `, p.id)
		for _, it := range items {
			p.exec(tx, `
            INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)
        `, p.id, it)
		}
		p.exec(tx, `
            UPDATE agent_sessions
            SET updated_at = CURRENT_TIMESTAMP
            WHERE session_id = ?
        `, p.id)
		rows, err := tx.Query(`SELECT id FROM agent_messages WHERE session_id = ? ORDER BY id DESC LIMIT ?`, p.id, len(items))
		require.NoError(p.t, err)
		var ids []int64
		for rows.Next() {
			var id int64
			require.NoError(p.t, rows.Scan(&id))
			ids = append([]int64{id}, ids...)
		}
		require.NoError(p.t, rows.Close())
		var seq, turn, branchTurn int64
		p.one(tx, `
                SELECT COALESCE(MAX(sequence_number), 0)
                FROM message_structure
                WHERE session_id = ?
            `, []any{p.id}, &seq)
		p.one(tx, `
                SELECT
                    COALESCE(MAX(user_turn_number), 0) as max_global_turn,
                    COALESCE(MAX(branch_turn_number), 0) as max_branch_turn
                FROM message_structure
                WHERE session_id = ? AND branch_id = ?
            `, []any{p.id, p.branch}, &turn, &branchTurn)
		var users int64
		for i, it := range items {
			typ, user, tool := pyClassify(it)
			if user {
				users++
			}
			p.exec(tx, `
                INSERT INTO message_structure
                (session_id, message_id, branch_id, message_type, sequence_number,
                 user_turn_number, branch_turn_number, tool_name)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            `, p.id, ids[i], p.branch, typ, seq+int64(i)+1, turn+users, branchTurn+users, tool)
		}
	})
}

// pyClassify is _classify_message_type, _is_user_message and
// _extract_tool_name, written from the class's source for the items the
// tests use (string fields).
func pyClassify(raw string) (typ string, user bool, tool any) {
	var m map[string]any
	if json.Unmarshal([]byte(raw), &m) != nil {
		return "other", false, nil
	}
	get := func(k string) string { s, _ := m[k].(string); return s }
	typ = "other"
	switch {
	case get("role") == "user":
		typ, user = "user", true
	case get("role") == "assistant":
		typ = "assistant"
	case get("type") != "":
		typ = get("type")
	}
	itemType := get("type")
	_, hasLabel := m["server_label"]
	switch {
	case (itemType == "mcp_call" || itemType == "mcp_approval_request") && hasLabel:
		label, name := get("server_label"), get("name")
		switch {
		case name != "" && label != "":
			tool = label + "." + name
		case label != "":
			tool = label
		case name != "":
			tool = name
		}
	case itemType == "tool_search_call" || itemType == "tool_search_output":
		tool = "tool_search"
	case itemType == "computer_call" || itemType == "file_search_call" || itemType == "web_search_call" || itemType == "code_interpreter_call":
		tool = itemType
	default:
		if name, ok := m["name"]; ok && name != nil {
			n, ns := fmt.Sprint(name), get("namespace")
			switch {
			case n != "" && ns != "" && ns == n:
				tool = n
			case n != "" && ns != "":
				tool = ns + "." + n
			default:
				tool = n
			}
		}
	}
	return typ, user, tool
}

// getItems is get_items(branch_id=branch) with no limit ("" for the
// current branch).
func (p *advancedPy) getItems(branch string) []string {
	var out []string
	p.tx(func(tx *sql.Tx) {
		b := p.readBranch(tx, branch)
		rows, err := tx.Query(`
                            SELECT m.message_data
                            FROM agent_messages m
                            JOIN message_structure s ON m.id = s.message_id
                            WHERE m.session_id = ? AND s.branch_id = ?
                            ORDER BY s.sequence_number ASC
                        `, p.id, b)
		require.NoError(p.t, err)
		defer rows.Close()
		for rows.Next() {
			var s string
			require.NoError(p.t, rows.Scan(&s))
			if json.Valid([]byte(s)) {
				out = append(out, s)
			}
		}
	})
	return out
}

// cleanupOrphans is _cleanup_orphaned_messages: the rows it deletes.
func (p *advancedPy) cleanupOrphans(tx *sql.Tx) int64 {
	return p.exec(tx, `
                DELETE FROM agent_messages
                WHERE session_id = ?
                AND id NOT IN (
                    SELECT message_id
                    FROM message_structure ms
                    WHERE ms.session_id = ?
                )
                `, p.id, p.id)
}

// cleanup runs _cleanup_orphaned_messages in a transaction of its own.
func (p *advancedPy) cleanup() int64 {
	var n int64
	p.tx(func(tx *sql.Tx) { n = p.cleanupOrphans(tx) })
	return n
}

// popItem is pop_item: the newest structure row of the current branch,
// its message, orphans, and the emptied turn's usage row; "" when the
// branch is empty.
func (p *advancedPy) popItem() string {
	var data string
	for {
		done := true
		p.tx(func(tx *sql.Tx) {
			p.refresh(tx, true)
			p.ensureBranchReservations(tx)
			var msgID int64
			var turn sql.NullInt64
			if !p.one(tx, `
                            DELETE FROM message_structure
                            WHERE id = (
                                SELECT id FROM message_structure
                                WHERE session_id = ? AND branch_id = ?
                                ORDER BY sequence_number DESC
                                LIMIT 1
                            )
                            RETURNING message_id, user_turn_number
                            `, []any{p.id, p.branch}, &msgID, &turn) {
				return
			}
			var msg sql.NullString
			p.one(tx, `SELECT message_data FROM agent_messages WHERE id = ?`, []any{msgID}, &msg)
			p.cleanupOrphans(tx)
			if turn.Valid {
				var left int
				p.one(tx, `
                                SELECT COUNT(*) FROM message_structure
                                WHERE session_id = ? AND branch_id = ?
                                AND user_turn_number = ?
                                `, []any{p.id, p.branch, turn.Int64}, &left)
				if left == 0 {
					p.exec(tx, `
                                    DELETE FROM turn_usage
                                    WHERE session_id = ? AND branch_id = ?
                                    AND user_turn_number = ?
                                    `, p.id, p.branch, turn.Int64)
				}
			}
			if !msg.Valid || !json.Valid([]byte(msg.String)) {
				done = false
				return
			}
			data = msg.String
		})
		if done {
			return data
		}
	}
}

// clearSession is clear_session.
func (p *advancedPy) clearSession() {
	p.tx(func(tx *sql.Tx) {
		p.ensureBranchReservations(tx)
		p.ensureClearGenerations(tx)
		p.exec(tx, `DELETE FROM agent_messages WHERE session_id = ?`, p.id)
		p.exec(tx, `DELETE FROM agent_sessions WHERE session_id = ?`, p.id)
		p.exec(tx, "DELETE FROM message_structure WHERE session_id = ?", p.id)
		p.exec(tx, "DELETE FROM turn_usage WHERE session_id = ?", p.id)
		p.exec(tx, `
                    UPDATE session_clear_generations
                    SET generation = generation + 1
                    WHERE session_id = ?
                    `, p.id)
		p.one(tx, `
                    SELECT generation FROM session_clear_generations
                    WHERE session_id = ?
                    `, []any{p.id}, &p.gen)
		p.branch = "main"
	})
}

// commitBranchPointer is _commit_branch_pointer.
func (p *advancedPy) commitBranchPointer(branch string, gen int64) {
	p.tx(func(tx *sql.Tx) {
		var durable int64
		p.one(tx, `
                SELECT generation FROM session_clear_generations
                WHERE session_id = ?
                `, []any{p.id}, &durable)
		if durable != gen {
			p.gen, p.branch = durable, "main"
			return
		}
		p.gen, p.branch = durable, branch
	})
}

// createBranchFromTurn is create_branch_from_turn with a branch name:
// _copy_messages_to_new_branch then _commit_branch_pointer. It returns
// the class's ValueError text, or "".
func (p *advancedPy) createBranchFromTurn(turn int64, name string) (valueError string) {
	var gen int64
	p.tx(func(tx *sql.Tx) {
		p.ensureBranchReservations(tx)
		p.refresh(tx, true)
		source := p.branch
		gen = p.gen
		var data string
		if !p.one(tx, `
                        SELECT am.message_data
                        FROM message_structure ms
                        JOIN agent_messages am ON ms.message_id = am.id
                        WHERE ms.session_id = ? AND ms.branch_id = ?
                        AND ms.branch_turn_number = ? AND ms.message_type = 'user'
                        `, []any{p.id, source, turn}, &data) {
			valueError = fmt.Sprintf("Turn %d does not contain a user message in branch '%s'", turn, source)
			return
		}
		if p.exec(tx, `
                INSERT OR IGNORE INTO branch_reservations (session_id, branch_id)
                VALUES (?, ?)
                `, p.id, name) == 0 {
			valueError = fmt.Sprintf("Branch ID '%s' has already been used. Choose a new branch ID.", name)
			return
		}
		rows, err := tx.Query(`
                        SELECT
                            ms.message_id,
                            ms.message_type,
                            ms.sequence_number,
                            ms.user_turn_number,
                            ms.branch_turn_number,
                            ms.tool_name
                        FROM message_structure ms
                        WHERE ms.session_id = ? AND ms.branch_id = ?
                        AND ms.branch_turn_number < ?
                        ORDER BY ms.sequence_number
                    `, p.id, source, turn)
		require.NoError(p.t, err)
		var copies [][6]any
		for rows.Next() {
			var r [6]any
			require.NoError(p.t, rows.Scan(&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]))
			copies = append(copies, r)
		}
		require.NoError(p.t, rows.Close())
		if len(copies) > 0 {
			var seq int64
			p.one(tx, `
                            SELECT COALESCE(MAX(sequence_number), 0)
                            FROM message_structure
                            WHERE session_id = ?
                        `, []any{p.id}, &seq)
			for i, r := range copies {
				p.exec(tx, `
                            INSERT INTO message_structure
                            (session_id, message_id, branch_id, message_type, sequence_number,
                             user_turn_number, branch_turn_number, tool_name)
                            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                        `, p.id, r[0], name, r[1], seq+int64(i)+1, r[3], r[4], r[5])
			}
		}
	})
	if valueError == "" {
		p.commitBranchPointer(name, gen)
	}
	return valueError
}

// switchToBranch is switch_to_branch; it returns the ValueError text or "".
func (p *advancedPy) switchToBranch(branch string) (valueError string) {
	var gen int64
	p.tx(func(tx *sql.Tx) {
		p.ensureClearGenerations(tx)
		var n int
		p.one(tx, `
                        SELECT COUNT(*) FROM message_structure
                        WHERE session_id = ? AND branch_id = ?
                    `, []any{p.id, branch}, &n)
		if n == 0 {
			valueError = fmt.Sprintf("Branch '%s' does not exist", branch)
			return
		}
		p.one(tx, `
                            SELECT generation FROM session_clear_generations
                            WHERE session_id = ?
                            `, []any{p.id}, &gen)
	})
	if valueError == "" {
		p.commitBranchPointer(branch, gen)
	}
	return valueError
}

// deleteBranch is delete_branch(branch, force=False) on a branch that is
// not the current one; it returns the rows deleted (usage, structure,
// orphaned messages).
func (p *advancedPy) deleteBranch(branch string) (usage, structure, orphans int64) {
	p.tx(func(tx *sql.Tx) {
		p.ensureBranchReservations(tx)
		var n int
		p.one(tx, `
                        SELECT COUNT(*) FROM message_structure
                        WHERE session_id = ? AND branch_id = ?
                    `, []any{p.id, branch}, &n)
		require.NotZero(p.t, n, "Branch '%s' does not exist", branch)
		usage = p.exec(tx, `
                        DELETE FROM turn_usage
                        WHERE session_id = ? AND branch_id = ?
                    `, p.id, branch)
		structure = p.exec(tx, `
                        DELETE FROM message_structure
                        WHERE session_id = ? AND branch_id = ?
                    `, p.id, branch)
		orphans = p.cleanupOrphans(tx)
	})
	return usage, structure, orphans
}

// pyBranch is a list_branches entry.
type pyBranch struct {
	ID                  string
	Messages, UserTurns int64
	Current             bool
}

// listBranches is list_branches.
func (p *advancedPy) listBranches() []pyBranch {
	var out []pyBranch
	p.tx(func(tx *sql.Tx) {
		current := p.readBranch(tx, "")
		rows, err := tx.Query(`
                        SELECT
                            ms.branch_id,
                            COUNT(*) as message_count,
                            COUNT(CASE WHEN ms.message_type = 'user' THEN 1 END) as user_turns,
                            MIN(ms.created_at) as created_at
                        FROM message_structure ms
                        WHERE ms.session_id = ?
                        GROUP BY ms.branch_id
                        ORDER BY created_at
                    `, p.id)
		require.NoError(p.t, err)
		defer rows.Close()
		for rows.Next() {
			var b pyBranch
			var created string
			require.NoError(p.t, rows.Scan(&b.ID, &b.Messages, &b.UserTurns, &created))
			b.Current = b.ID == current
			out = append(out, b)
		}
	})
	return out
}

// pyTurn is a get_conversation_turns entry.
type pyTurn struct {
	Turn    int64
	Content string
}

// conversationTurns is get_conversation_turns(branch) ("" for the
// current branch), with _content_preview(content, 100) for string
// contents.
func (p *advancedPy) conversationTurns(branch string) []pyTurn {
	var out []pyTurn
	p.tx(func(tx *sql.Tx) {
		b := p.readBranch(tx, branch)
		rows, err := tx.Query(`
                        SELECT
                            ms.branch_turn_number,
                            am.message_data,
                            ms.created_at
                        FROM message_structure ms
                        JOIN agent_messages am ON ms.message_id = am.id
                        WHERE ms.session_id = ? AND ms.branch_id = ?
                        AND ms.message_type = 'user'
                        ORDER BY ms.branch_turn_number
                    `, p.id, b)
		require.NoError(p.t, err)
		defer rows.Close()
		for rows.Next() {
			var turn int64
			var data, created string
			require.NoError(p.t, rows.Scan(&turn, &data, &created))
			var m map[string]any
			if json.Unmarshal([]byte(data), &m) != nil {
				continue
			}
			content, _ := m["content"].(string)
			if r := []rune(content); len(r) > 100 {
				content = string(r[:100]) + "..."
			}
			out = append(out, pyTurn{turn, content})
		}
	})
	return out
}

// storeRunUsage is store_run_usage for a Usage whose details are the
// SDK's defaults' shape: _capture_current_turn, then
// _update_turn_usage_internal with the turn anchor.
func (p *advancedPy) storeRunUsage(requests, input, output, total, cached, reasoning int64) {
	var (
		turn   int64
		branch string
		anchor sql.NullInt64
	)
	p.tx(func(tx *sql.Tx) {
		branch = p.readBranch(tx, "")
		p.one(tx, `
                    SELECT COALESCE(MAX(user_turn_number), 0)
                    FROM message_structure
                    WHERE session_id = ? AND branch_id = ?
                    `, []any{p.id, branch}, &turn)
		p.one(tx, `
                    SELECT MIN(id) FROM message_structure
                    WHERE session_id = ? AND branch_id = ? AND user_turn_number = ?
                    `, []any{p.id, branch, turn}, &anchor)
	})
	p.tx(func(tx *sql.Tx) {
		if anchor.Valid {
			var one int
			if !p.one(tx, `
                            SELECT 1 FROM message_structure
                            WHERE session_id = ? AND branch_id = ?
                            AND user_turn_number = ? AND id = ?
                            `, []any{p.id, branch, turn, anchor.Int64}, &one) {
				return
			}
		}
		// json.dumps(usage_data.input_tokens_details.__dict__), and the output's.
		in := fmt.Sprintf(`{"cached_tokens": %d}`, cached)
		out := fmt.Sprintf(`{"reasoning_tokens": %d}`, reasoning)
		p.exec(tx, `
                        INSERT OR REPLACE INTO turn_usage
                        (session_id, branch_id, user_turn_number, requests, input_tokens, output_tokens,
                         total_tokens, input_tokens_details, output_tokens_details)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    `, p.id, branch, turn, requests, input, output, total, in, out)
	})
}

// turnUsage is get_turn_usage(branch_id=branch) for all turns, each row as
// "turn requests input output total input_details output_details".
func (p *advancedPy) turnUsage(branch string) []string {
	var out []string
	p.tx(func(tx *sql.Tx) {
		b := p.readBranch(tx, branch)
		rows, err := tx.Query(`
                    SELECT user_turn_number, requests, input_tokens, output_tokens,
                           total_tokens, input_tokens_details, output_tokens_details
                    FROM turn_usage
                    WHERE session_id = ? AND branch_id = ?
                    ORDER BY user_turn_number
                `, p.id, b)
		require.NoError(p.t, err)
		defer rows.Close()
		for rows.Next() {
			var turn, r, i, o, total int64
			var in, ou string
			require.NoError(p.t, rows.Scan(&turn, &r, &i, &o, &total, &in, &ou))
			out = append(out, fmt.Sprintf("%d %d %d %d %d %s %s", turn, r, i, o, total, in, ou))
		}
	})
	return out
}

// structure returns the session's message_structure rows without their
// ids, message ids and times: (branch, type, sequence, user turn, branch
// turn, tool), by sequence number.
func (p *advancedPy) structure() []string {
	rows, err := p.db.Query(`SELECT branch_id, message_type, sequence_number, user_turn_number, branch_turn_number, tool_name
        FROM message_structure WHERE session_id = ? ORDER BY sequence_number`, p.id)
	require.NoError(p.t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var branch, typ string
		var seq int64
		var turn, bturn sql.NullInt64
		var tool sql.NullString
		require.NoError(p.t, rows.Scan(&branch, &typ, &seq, &turn, &bturn, &tool))
		out = append(out, fmt.Sprintf("%s %s %d %v %v %v", branch, typ, seq, turn, bturn, tool))
	}
	return out
}
