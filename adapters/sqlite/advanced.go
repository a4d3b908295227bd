package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/agentsessions/sessions/internal/pyjson"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// AdvancedSQLiteSession stores.
//
// The Python SDK's AdvancedSQLiteSession
// (agents/extensions/memory/advanced_sqlite_session.py) keeps, beside
// SQLiteSession's two tables, a message_structure row per message of a
// branch (its sequence number, message type, user-turn and branch-turn
// numbers and tool name), turn_usage rows, branch_reservations (every
// branch id a session ever used) and session_clear_generations (how many
// times a session was cleared, so that an instance pointing at a branch a
// clear removed goes back to "main"). Its get_items reads a branch
// through message_structure, and its pops, clears and branch deletions
// delete every message row of the session no structure row references.
//
// On such a store this package does what the class does, statement for
// statement: a history write inserts the structure rows the class's
// _insert_structure_metadata would, in the transaction of the message
// rows; reads follow the handle's current branch; PopItem, Clear and
// ReplaceItems delete structure, usage and orphaned message rows as the
// class's pop_item, clear_session and delete_branch do.

// MainBranch is the branch every AdvancedSQLiteSession instance, and
// every Session handle, starts on.
const MainBranch = "main"

// ErrNotAdvanced reports a branch, turn or usage call on a store that is
// not an AdvancedSQLiteSession store (it has no message_structure table
// of its messages table). It wraps session.ErrUnsupported. Store.
// CreateAdvancedTables makes a store one.
var ErrNotAdvanced = fmt.Errorf("%w: not an AdvancedSQLiteSession store (no message_structure table for its messages table)", session.ErrUnsupported)

// branchPointer is a handle's current branch, as an AdvancedSQLiteSession
// instance keeps _current_branch_id and _generation: the branch, and the
// session's clear generation when the pointer was last synchronized with
// the store. A clear another instance commits bumps the stored generation,
// and the next look at it resets the pointer to MainBranch.
type branchPointer struct {
	mu     sync.Mutex
	branch string // "" is MainBranch
	gen    int64
}

func (p *branchPointer) get() (string, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.branch == "" {
		return MainBranch, p.gen
	}
	return p.branch, p.gen
}

func (p *branchPointer) set(branch string, gen int64) {
	p.mu.Lock()
	p.branch, p.gen = branch, gen
	p.mu.Unlock()
}

// sync applies the stored generation gen: a pointer that last saw another
// generation goes back to MainBranch. It returns the branch.
func (p *branchPointer) sync(gen int64) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if gen != p.gen {
		p.branch, p.gen = MainBranch, gen
	}
	if p.branch == "" {
		return MainBranch
	}
	return p.branch
}

// CurrentBranch returns the branch the handle reads and writes:
// MainBranch until SwitchBranch or CreateBranchFromTurn moves it, and
// again after a Clear (by any handle or by the Python class) that the
// handle has seen since.
func (s *Session) CurrentBranch() string {
	b, _ := s.br.get()
	return b
}

// advancedOwnedSQL counts message_structure's foreign key from message_id
// to the Store's messages table: the class's _claim_structure_tables
// ownership. A message_structure of another messages table (the file
// holds another pair's structure rows) leaves this pair a plain
// SQLiteSession store, which the class would refuse to open as advanced.
const advancedOwnedSQL = `SELECT count(*) FROM pragma_foreign_key_list('message_structure') WHERE "from" = 'message_id' AND "table" = ?1 COLLATE NOCASE`

// detectAdvanced reports whether the database holds AdvancedSQLiteSession's
// message_structure table for the Store's messages table.
func (st *Store) detectAdvanced(ctx context.Context) (bool, error) {
	var n int
	err := st.db.QueryRowContext(ctx, advancedOwnedSQL, st.q.messages).Scan(&n)
	return n > 0, err
}

// isAdvanced reports whether the Store reads and writes the database as an
// AdvancedSQLiteSession store: it was one when opened, or a write
// transaction found it one since (the class created its tables after the
// Store opened the file).
func (st *Store) isAdvanced() bool {
	return st.advanced || st.advancedSeen.Load()
}

// advancedNow reports whether the database is an AdvancedSQLiteSession
// store, in the write transaction open on w (BEGIN IMMEDIATE: no other
// connection changes the schema until it ends). It reads the schema
// cookie (PRAGMA schema_version, from the header page the transaction
// holds anyway) and looks for the class's table again only when the
// cookie changed since the last look, so a write transaction pays one
// PRAGMA. A cookie it cannot read makes it look.
func (st *Store) advancedNow(ctx context.Context, w *wconn) bool {
	if st.advanced {
		return true
	}
	v, err := w.schemaVersion(ctx)
	if err == nil && v == st.schemaSeen.Load() {
		return st.advancedSeen.Load()
	}
	var n int
	if qerr := w.c.QueryRowContext(ctx, advancedOwnedSQL, st.q.messages).Scan(&n); qerr != nil {
		return st.advancedSeen.Load()
	}
	st.advancedSeen.Store(n > 0)
	if err == nil {
		st.schemaSeen.Store(v)
	}
	return n > 0
}

// ensureOwnIndexes adds this package's indexes to an AdvancedSQLiteSession
// store, in the write transaction open on w, once per Store. Failing to
// (or a transaction that rolls back) costs speed, not correctness: the
// next Store tries again.
func (st *Store) ensureOwnIndexes(ctx context.Context, w *wconn) {
	if st.ownIndexes.Swap(true) {
		return
	}
	for _, ddl := range st.aq.ownIndexes {
		if err := w.exec(ctx, ddl); err != nil {
			slog.WarnContext(ctx, "sqlite: could not add an index to the AdvancedSQLiteSession tables; branch writes will scan them", "error", err)
			return
		}
	}
}

// CreateAdvancedTables makes the database an AdvancedSQLiteSession store,
// as the class's constructor does with create_tables=True: it creates
// message_structure, turn_usage, branch_reservations and
// session_clear_generations and their indexes if missing, in one
// transaction. Items the Store's sessions already hold get no structure
// rows (the class does not add them either): the class's reads do not
// show them, and its next pop, clear or branch deletion on their session
// deletes them as orphans. A Store on an ordinary file never creates these
// tables otherwise.
func (st *Store) CreateAdvancedTables(ctx context.Context) error {
	err := st.writeW(ctx, "create the AdvancedSQLiteSession tables", false, func(ctx context.Context, w *wconn, _ bool) error {
		for _, ddl := range append(st.aq.create, st.aq.ownIndexes...) {
			if err := w.execOnce(ctx, ddl); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		st.advancedSeen.Store(true)
	}
	return err
}

// advQueries are the statements of an AdvancedSQLiteSession store, the
// class's own (with this Store's table names).
type advQueries struct {
	create []string

	items, latest, version, since string

	ensureGen, initGen, readGen, bumpGen string

	ensureReservations, missingReservation, backfillReservations, reserve string

	newestIDs, maxSeq, maxUserTurn, maxBranchTurn, insertStructure string

	ownIndexes []string

	popWalk, deleteStructureID, cleanupOrphans, turnLeft, deleteTurnUsage string

	clearStructure, clearUsage, deleteBranchUsage, deleteBranchStructure  string
	countBranch, turnUser, copyRows, insertUsage, currentTurn, turnAnchor string
	listBranches, turns, turnUsage                                        string
}

func newAdvQueries(o Options) advQueries {
	s, m := quote(o.SessionsTable), quote(o.MessagesTable)
	from := ` FROM ` + m + ` m JOIN message_structure s ON m.id = s.message_id WHERE m.session_id = ?1 AND s.branch_id = ?2`
	return advQueries{
		// _init_structure_tables (create_tables=True).
		create: []string{
			`CREATE TABLE IF NOT EXISTS message_structure (
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
                    REFERENCES ` + s + `(session_id) ON DELETE CASCADE,
                FOREIGN KEY (message_id)
                    REFERENCES ` + m + `(id) ON DELETE CASCADE
            )`,
			`CREATE TABLE IF NOT EXISTS turn_usage (
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
                    REFERENCES ` + s + `(session_id) ON DELETE CASCADE,
                UNIQUE(session_id, branch_id, user_turn_number)
            )`,
			branchReservationsDDL,
			clearGenerationsDDL,
			`CREATE INDEX IF NOT EXISTS idx_structure_session_seq ON message_structure(session_id, sequence_number)`,
			`CREATE INDEX IF NOT EXISTS idx_structure_branch ON message_structure(session_id, branch_id)`,
			`CREATE INDEX IF NOT EXISTS idx_structure_turn ON message_structure(session_id, branch_id, user_turn_number)`,
			`CREATE INDEX IF NOT EXISTS idx_structure_branch_seq ON message_structure(session_id, branch_id, sequence_number)`,
			`CREATE INDEX IF NOT EXISTS idx_turn_usage_session_turn ON turn_usage(session_id, branch_id, user_turn_number)`,
		},

		// get_items on a branch, and this package's paging and following
		// by sequence number.
		items:  `SELECT s.sequence_number, m.message_data` + from + ` ORDER BY s.sequence_number ASC`,
		latest: `SELECT s.sequence_number, m.message_data` + from + ` AND s.sequence_number < ?3 ORDER BY s.sequence_number DESC LIMIT ?4`,
		since:  `SELECT s.sequence_number, m.id, m.message_data` + from + ` AND s.sequence_number >= ?3 ORDER BY s.sequence_number ASC`,
		// A branch's version: its structure rows' count and newest id
		// (AUTOINCREMENT: an id is never handed out twice).
		version: `SELECT count(*) || ':' || coalesce(max(id), 0) FROM message_structure WHERE session_id = ?1 AND branch_id = ?2`,

		// _ensure_session_clear_generations_table, _refresh_branch_after_external_clear.
		ensureGen: clearGenerationsDDL,
		initGen:   `INSERT OR IGNORE INTO session_clear_generations (session_id, generation) VALUES (?1, 0)`,
		readGen:   `SELECT generation FROM session_clear_generations WHERE session_id = ?1`,
		bumpGen:   `UPDATE session_clear_generations SET generation = generation + 1 WHERE session_id = ?1`,

		// _ensure_branch_reservations_table, _reserve_branch_id.
		ensureReservations: branchReservationsDDL,
		missingReservation: `SELECT 1 FROM message_structure ms WHERE ms.session_id = ?1 AND NOT EXISTS (
                SELECT 1 FROM branch_reservations br
                WHERE br.session_id = ms.session_id AND br.branch_id = ms.branch_id
            ) LIMIT 1`,
		backfillReservations: `INSERT OR IGNORE INTO branch_reservations (session_id, branch_id) SELECT DISTINCT session_id, branch_id FROM message_structure WHERE session_id = ?1`,
		reserve:              `INSERT OR IGNORE INTO branch_reservations (session_id, branch_id) VALUES (?1, ?2)`,

		// _insert_structure_metadata.
		newestIDs: `SELECT id FROM ` + m + ` WHERE session_id = ?1 ORDER BY id DESC LIMIT ?2`,
		maxSeq:    `SELECT COALESCE(MAX(sequence_number), 0) FROM message_structure WHERE session_id = ?1`,
		// The class reads both maxima in one statement, which scans the
		// branch's rows; one statement each, on an index each (ownIndexes),
		// is O(log n) with the same answers.
		maxUserTurn:   `SELECT COALESCE(MAX(user_turn_number), 0) FROM message_structure WHERE session_id = ?1 AND branch_id = ?2`,
		maxBranchTurn: `SELECT COALESCE(MAX(branch_turn_number), 0) FROM message_structure WHERE session_id = ?1 AND branch_id = ?2`,
		// This package's own indexes, beside the class's (which ignores
		// them): the branch-turn maximum, and message_id, which SQLite
		// looks up for message_structure's foreign key on every message
		// row a pop, clear or branch deletion deletes (this package's
		// connections enforce foreign keys; without it each deleted
		// message row scans the table).
		ownIndexes: []string{
			`CREATE INDEX IF NOT EXISTS agentsessions_structure_branch_turn ON message_structure(session_id, branch_id, branch_turn_number)`,
			`CREATE INDEX IF NOT EXISTS agentsessions_structure_message ON message_structure(message_id)`,
		},
		insertStructure: `INSERT INTO message_structure (session_id, message_id, branch_id, message_type, sequence_number, user_turn_number, branch_turn_number, tool_name) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)`,

		// pop_item: the class claims the newest structure row of the
		// branch; this package walks down to the newest readable one
		// (popAdvanced).
		popWalk:           `SELECT s.id, s.sequence_number, s.user_turn_number, m.id IS NULL, m.message_data FROM message_structure s LEFT JOIN ` + m + ` m ON m.id = s.message_id WHERE s.session_id = ?1 AND s.branch_id = ?2 ORDER BY s.sequence_number DESC`,
		deleteStructureID: `DELETE FROM message_structure WHERE id = ?1`,
		cleanupOrphans:    `DELETE FROM ` + m + ` WHERE session_id = ?1 AND id NOT IN (SELECT message_id FROM message_structure ms WHERE ms.session_id = ?1)`,
		turnLeft:          `SELECT COUNT(*) FROM message_structure WHERE session_id = ?1 AND branch_id = ?2 AND user_turn_number = ?3`,
		deleteTurnUsage:   `DELETE FROM turn_usage WHERE session_id = ?1 AND branch_id = ?2 AND user_turn_number = ?3`,

		// clear_session.
		clearStructure: `DELETE FROM message_structure WHERE session_id = ?1`,
		clearUsage:     `DELETE FROM turn_usage WHERE session_id = ?1`,

		// delete_branch.
		countBranch:           `SELECT COUNT(*) FROM message_structure WHERE session_id = ?1 AND branch_id = ?2`,
		deleteBranchUsage:     `DELETE FROM turn_usage WHERE session_id = ?1 AND branch_id = ?2`,
		deleteBranchStructure: `DELETE FROM message_structure WHERE session_id = ?1 AND branch_id = ?2`,

		// _copy_messages_to_new_branch.
		turnUser: `SELECT am.message_data FROM message_structure ms JOIN ` + m + ` am ON ms.message_id = am.id
            WHERE ms.session_id = ?1 AND ms.branch_id = ?2 AND ms.branch_turn_number = ?3 AND ms.message_type = 'user'`,
		copyRows: `SELECT ms.message_id, ms.message_type, ms.sequence_number, ms.user_turn_number, ms.branch_turn_number, ms.tool_name
            FROM message_structure ms WHERE ms.session_id = ?1 AND ms.branch_id = ?2 AND ms.branch_turn_number < ?3 ORDER BY ms.sequence_number`,

		// store_run_usage: _capture_current_turn, _update_turn_usage_internal.
		currentTurn: `SELECT COALESCE(MAX(user_turn_number), 0) FROM message_structure WHERE session_id = ?1 AND branch_id = ?2`,
		turnAnchor:  `SELECT MIN(id) FROM message_structure WHERE session_id = ?1 AND branch_id = ?2 AND user_turn_number = ?3`,
		insertUsage: `INSERT OR REPLACE INTO turn_usage (session_id, branch_id, user_turn_number, requests, input_tokens, output_tokens, total_tokens, input_tokens_details, output_tokens_details) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)`,

		// list_branches, get_conversation_turns, get_turn_usage.
		listBranches: `SELECT ms.branch_id, COUNT(*) as message_count, COUNT(CASE WHEN ms.message_type = 'user' THEN 1 END) as user_turns, MIN(ms.created_at) as created_at
            FROM message_structure ms WHERE ms.session_id = ?1 GROUP BY ms.branch_id ORDER BY created_at`,
		turns: `SELECT ms.branch_turn_number, am.message_data, ms.created_at FROM message_structure ms JOIN ` + m + ` am ON ms.message_id = am.id
            WHERE ms.session_id = ?1 AND ms.branch_id = ?2 AND ms.message_type = 'user' ORDER BY ms.branch_turn_number`,
		turnUsage: `SELECT user_turn_number, requests, input_tokens, output_tokens, total_tokens, input_tokens_details, output_tokens_details
            FROM turn_usage WHERE session_id = ?1 AND branch_id = ?2 ORDER BY user_turn_number`,
	}
}

const (
	branchReservationsDDL = `CREATE TABLE IF NOT EXISTS branch_reservations (
                session_id TEXT NOT NULL,
                branch_id TEXT NOT NULL,
                PRIMARY KEY (session_id, branch_id)
            )`
	clearGenerationsDDL = `CREATE TABLE IF NOT EXISTS session_clear_generations (
                session_id TEXT PRIMARY KEY,
                generation INTEGER NOT NULL DEFAULT 0
            )`
)

// syncWrite is the class's _refresh_branch_after_external_clear at the
// start of a write: it creates the session's clear-generation row if
// missing, and resets the handle's pointer to MainBranch when the session
// was cleared since the pointer last looked. It returns the branch to
// write.
func (s *Session) syncWrite(ctx context.Context, w *wconn) (branch string, gen int64, err error) {
	q := &s.st.aq
	if err := w.exec(ctx, q.ensureGen); err != nil {
		return "", 0, err
	}
	if err := w.exec(ctx, q.initGen, s.id); err != nil {
		return "", 0, err
	}
	stmt, err := w.stmt(ctx, q.readGen)
	if err != nil {
		return "", 0, err
	}
	if err := stmt.QueryRowContext(ctx, s.id).Scan(&gen); err != nil {
		return "", 0, err
	}
	return s.br.sync(gen), gen, nil
}

// readBranch is the class's _resolve_read_branch for the current branch:
// the pointer, reset to MainBranch if the session was cleared since it
// last looked (a store without the generations table was never cleared
// by the class).
func (s *Session) readBranch(ctx context.Context) (string, error) {
	branch, _ := s.br.get()
	if branch == MainBranch {
		return branch, nil // a reset changes nothing
	}
	return s.branchIn(ctx, s.st.db)
}

// branchIn is readBranch on c, reading the generation whatever the
// pointer says.
func (s *Session) branchIn(ctx context.Context, c interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (string, error) {
	var gen int64
	err := c.QueryRowContext(ctx, s.st.aq.readGen, s.id).Scan(&gen)
	switch {
	case err == nil:
	case errors.Is(err, sql.ErrNoRows) || isNoSuchTable(err):
		gen = 0
	default:
		return "", err
	}
	return s.br.sync(gen), nil
}

// isNoSuchTable reports SQLite's error for a table that does not exist.
func isNoSuchTable(err error) bool {
	return err != nil && bytes.Contains([]byte(err.Error()), []byte("no such table"))
}

// ensureReservations is the class's _ensure_branch_reservations_table:
// every branch the session has rows on is reserved, so that its id is
// never reused once its last row goes.
func (s *Session) ensureReservations(ctx context.Context, w *wconn) error {
	q := &s.st.aq
	if err := w.exec(ctx, q.ensureReservations); err != nil {
		return err
	}
	stmt, err := w.stmt(ctx, q.missingReservation)
	if err != nil {
		return err
	}
	var one int
	switch err := stmt.QueryRowContext(ctx, s.id).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return w.exec(ctx, q.backfillReservations, s.id)
}

// insertStructure is the class's _insert_structure_metadata for the n
// message rows just inserted for the session (raw(i) is the i-th's
// message_data): one message_structure row each on the current branch,
// with the next sequence numbers of the session and the branch's turn
// numbers advanced by each user message.
func (s *Session) insertStructure(ctx context.Context, w *wconn, n int, raw func(i int) []byte) error {
	q := &s.st.aq
	branch, _, err := s.syncWrite(ctx, w)
	if err != nil {
		return err
	}
	rows, err := w.c.QueryContext(ctx, q.newestIDs, s.id, n)
	if err != nil {
		return err
	}
	ids := make([]int64, 0, n)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	if len(ids) != n {
		return errors.New("failed to resolve inserted message IDs while writing structure metadata")
	}
	var seq, turn, branchTurn int64
	if err := w.c.QueryRowContext(ctx, q.maxSeq, s.id).Scan(&seq); err != nil {
		return err
	}
	if err := w.c.QueryRowContext(ctx, q.maxUserTurn, s.id, branch).Scan(&turn); err != nil {
		return err
	}
	if err := w.c.QueryRowContext(ctx, q.maxBranchTurn, s.id, branch).Scan(&branchTurn); err != nil {
		return err
	}
	var users int64
	for i := 0; i < n; i++ {
		c := classify(raw(i))
		if c.user {
			users++
		}
		var tool any
		if c.hasTool {
			tool = c.tool
		}
		// ids are newest first.
		if err := w.exec(ctx, q.insertStructure, s.id, ids[n-1-i], branch, c.typ, seq+int64(i)+1, turn+users, branchTurn+users, tool); err != nil {
			return err
		}
	}
	return nil
}

// cleanupOrphans is the class's _cleanup_orphaned_messages_sync: it
// deletes the session's message rows no structure row references.
func (s *Session) cleanupOrphans(ctx context.Context, w *wconn) error {
	return w.exec(ctx, s.st.aq.cleanupOrphans, s.id)
}

// popAdvanced is pop_item on the current branch: it deletes the structure
// row of the newest readable item of the branch (and, as the class does,
// the structure rows above it whose message row is gone), the message
// rows no structure row references any more, and a turn's usage row when
// the turn has no row left on the branch. Unlike the class, which deletes
// an unreadable newest row and goes on, it leaves unreadable rows in
// place and reports them (as PopItem does on every store): a record this
// package cannot read is never deleted by it.
func (s *Session) popAdvanced(ctx context.Context, w *wconn, d *decoder) (session.Item, bool, error) {
	q := &s.st.aq
	branch, _, err := s.syncWrite(ctx, w)
	if err != nil {
		return session.Item{}, false, err
	}
	if err := s.ensureReservations(ctx, w); err != nil {
		return session.Item{}, false, err
	}
	rows, err := w.c.QueryContext(ctx, q.popWalk, s.id, branch)
	if err != nil {
		return session.Item{}, false, err
	}
	type claimed struct {
		id   int64
		turn sql.NullInt64
	}
	var (
		drop    []claimed // the popped row, and the rows above it whose message is gone
		found   bool
		missing bool
	)
	for rows.Next() {
		var c claimed
		var seq int64
		if err := rows.Scan(&c.id, &seq, &c.turn, &missing, &d.raw); err != nil {
			rows.Close()
			return session.Item{}, false, err
		}
		if missing {
			// The class claims such a row, finds no message and goes on.
			drop = append(drop, c)
			continue
		}
		raw := d.text()
		it, derr := d.dec.DecodeString(raw)
		if derr != nil {
			d.corrupt = append(d.corrupt, corruptAt(seq, raw, derr))
			continue
		}
		d.items = append(d.items, it)
		drop = append(drop, c)
		found = true
		break
	}
	if err := closeRows(rows); err != nil || !found {
		return session.Item{}, false, err
	}
	for _, c := range drop {
		if err := w.exec(ctx, q.deleteStructureID, c.id); err != nil {
			return session.Item{}, false, err
		}
	}
	if err := s.cleanupOrphans(ctx, w); err != nil {
		return session.Item{}, false, err
	}
	// A turn left without rows on the branch loses its usage row (the
	// class checks after each row it claims; rows only go, so checking
	// once at the end leaves the same rows).
	for _, c := range drop {
		if !c.turn.Valid {
			continue
		}
		var left int64
		if err := w.c.QueryRowContext(ctx, q.turnLeft, s.id, branch, c.turn.Int64).Scan(&left); err != nil {
			return session.Item{}, false, err
		}
		if left == 0 {
			if err := w.exec(ctx, q.deleteTurnUsage, s.id, branch, c.turn.Int64); err != nil {
				return session.Item{}, false, err
			}
		}
	}
	return d.items[0], true, nil
}

// clearAdvanced is clear_session: every branch's rows of the session go,
// its usage rows too, its branch ids stay reserved, and its clear
// generation moves on so that every instance pointing at a branch goes
// back to MainBranch. This handle's pointer is reset at once.
func (s *Session) clearAdvanced(ctx context.Context, w *wconn) error {
	q := &s.st.aq
	if err := s.ensureReservations(ctx, w); err != nil {
		return err
	}
	for _, stmt := range []string{q.ensureGen} {
		if err := w.exec(ctx, stmt); err != nil {
			return err
		}
	}
	for _, stmt := range []string{q.initGen, s.st.q.clearMessages, s.st.q.clearSession, q.clearStructure, q.clearUsage, q.bumpGen} {
		if err := w.exec(ctx, stmt, s.id); err != nil {
			return err
		}
	}
	var gen int64
	if err := w.c.QueryRowContext(ctx, q.readGen, s.id).Scan(&gen); err != nil {
		return err
	}
	s.br.set(MainBranch, gen)
	return nil
}

// dropBranchRows deletes the branch's usage and structure rows and the
// message rows left without one (delete_branch's statements), for
// ReplaceItems on the current branch.
func (s *Session) dropBranchRows(ctx context.Context, w *wconn, branch string) error {
	q := &s.st.aq
	if err := s.ensureReservations(ctx, w); err != nil {
		return err
	}
	for _, stmt := range []string{q.deleteBranchUsage, q.deleteBranchStructure} {
		if err := w.exec(ctx, stmt, s.id, branch); err != nil {
			return err
		}
	}
	return s.cleanupOrphans(ctx, w)
}

// replaceAdvanced replaces the current branch's history with items: the
// branch's rows go as delete_branch deletes them, and items are appended
// to it as add_items appends. Other branches, and the messages they
// share with this one, stay.
func (s *Session) replaceAdvanced(ctx context.Context, w *wconn, items []session.Item) error {
	branch, _, err := s.syncWrite(ctx, w)
	if err != nil {
		return err
	}
	if err := s.dropBranchRows(ctx, w, branch); err != nil {
		return err
	}
	if len(items) == 0 {
		return nil
	}
	return s.insert(ctx, w, items)
}

// branchVersion is HistoryVersion on the current branch, on the
// connection c (the Store's database, or a write transaction's).
func (s *Session) branchVersion(ctx context.Context, c interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, branch string) (string, error) {
	var v string
	err := c.QueryRowContext(ctx, s.st.aq.version, s.id, branch).Scan(&v)
	return "b:" + v, err
}

// corruptAt is the report of an unreadable record at sequence number seq.
func corruptAt(seq int64, raw string, err error) driver.CorruptRecord {
	return driver.CorruptRecord{Position: "id=" + strconv.FormatInt(seq, 10), Raw: []byte(raw), Err: err}
}

// classification is what the class's _classify_message_type,
// _extract_tool_name and _is_user_message say of an item.
type classification struct {
	typ     string
	user    bool
	tool    string
	hasTool bool
}

// classify reads raw as the class reads the item json.loads gives back
// (NaN and the infinities included, the last of duplicate keys winning):
// only a JSON object has a role, a type or a name.
func classify(raw []byte) classification {
	c := classification{typ: "other"}
	it, err := session.NewItem(raw)
	if err != nil {
		return c
	}
	field := func(k string) json.RawMessage { v, _ := it.Field(k); return v }
	role, _ := jsonString(field("role"))
	switch {
	case role == "user":
		c.typ, c.user = "user", true
	case role == "assistant":
		c.typ = "assistant"
	case truthy(field("type")):
		c.typ = pyStr(field("type"))
	}
	c.tool, c.hasTool = toolName(it)
	return c
}

// toolName is _extract_tool_name.
func toolName(it session.Item) (string, bool) {
	field := func(k string) json.RawMessage { v, _ := it.Field(k); return v }
	typ, isStr := jsonString(field("type"))
	if !isStr {
		typ = "" // only strings are in the class's sets
	}
	if it.HasField("server_label") && (typ == "mcp_call" || typ == "mcp_approval_request") {
		label, name := field("server_label"), field("name")
		switch {
		case truthy(name) && truthy(label):
			return pyStr(label) + "." + pyStr(name), true
		case truthy(label):
			return pyStr(label), true
		case truthy(name):
			return pyStr(name), true
		}
		return "", false
	}
	switch typ {
	case "computer_call", "file_search_call", "web_search_call", "code_interpreter_call":
		return typ, true
	case "tool_search_call", "tool_search_output":
		return "tool_search", true
	}
	name, ok := it.Field("name")
	if !ok || isNull(name) {
		return "", false
	}
	nameStr := pyStr(name)
	nsStr := ""
	if ns, ok := it.Field("namespace"); ok && !isNull(ns) {
		nsStr = pyStr(ns)
	}
	// tool_qualified_name and is_reserved_synthetic_tool_namespace, on
	// the str() of both: a namespace equal to the name is the name alone.
	if nameStr != "" && nsStr != "" && nsStr != nameStr {
		return nsStr + "." + nameStr, true
	}
	return nameStr, true
}

func jsonString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// truthy is Python's truth value of a decoded JSON value: false for null,
// false, 0, "", [] and {}; true for NaN and the infinities.
func truthy(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case 'n', 'f':
		return false
	case 't', 'N', 'I':
		return true
	case '"':
		return len(raw) > 2
	case '[', '{':
		inner := bytes.TrimSpace(raw[1:])
		return len(inner) > 0 && inner[0] != ']' && inner[0] != '}'
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return err != nil || f != 0
}

// pyStr is Python's str() of a decoded JSON value, for the values an item
// gives a type or a name: a string itself, a number as Python prints it,
// True and False. Containers, which no real item has there, are written as
// json.dumps writes them, not as Python's repr.
func pyStr(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if s, ok := jsonString(raw); ok {
		return s
	}
	switch string(raw) {
	case "true":
		return "True"
	case "false":
		return "False"
	case "null":
		return "None"
	case "NaN":
		return "nan"
	case "Infinity":
		return "inf"
	case "-Infinity":
		return "-inf"
	}
	if out, err := pyjson.Dumps(raw, pyjson.Options{}); err == nil {
		return string(out)
	}
	return string(raw)
}
