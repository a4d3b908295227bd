package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/adapters/postgres"
)

// schemaKeeper leaves a store's schema as check found it: it was read
// before the check opened its stores, and restore drops what the check
// added, once they are closed.
type schemaKeeper interface {
	restore(ctx context.Context) (dropped, left []string, err error)
}

// snapshotSchema reads what check needs to leave the schema of the store
// dsn names as it found it: an SQLite file's sqlite_master, a PostgreSQL
// database's tables and indexes of the store's names, a MongoDB
// database's collections and indexes of the store's names. It returns
// nil for any other store (memory and Redis have no schema).
func snapshotSchema(ctx context.Context, dsn string) (schemaKeeper, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, nil
	}
	switch strings.ToLower(u.Scheme) {
	case "postgres", "postgresql":
		pg, err := snapshotPostgresSchema(ctx, u)
		if pg == nil || err != nil {
			return nil, err
		}
		return pg, nil
	case "mongodb", "mongodb+srv":
		mg, err := snapshotMongoSchema(ctx, u)
		if mg == nil || err != nil {
			return nil, err
		}
		return mg, nil
	}
	sc, err := snapshotSQLiteSchema(ctx, dsn)
	if sc == nil || err != nil {
		return nil, err
	}
	return sc, nil
}

// pgSchema is what check needs to leave a PostgreSQL database's schema as
// it found it: the tables the store's options name (sessions, messages,
// checkpoints, operation ids), which of them existed, and the indexes on
// them, in the schema the store creates them in.
type pgSchema struct {
	dsn, redacted string
	schema        string // the schema option; "" means the search path's first (current_schema())
	tables        []string
	nsBefore      bool            // the schema existed (always, without the option)
	before        map[string]bool // "table/<name>", "index/<name>"
}

// pgOptions are the PostgreSQL adapter's own URL options (adapters/postgres).
var pgOptions = []string{"schema", "sessions_table", "messages_table", "checkpoints_table"}

func snapshotPostgresSchema(ctx context.Context, u *url.URL) (*pgSchema, error) {
	q, err := adapters.ParsePassthroughQuery(u, pgOptions...)
	if err != nil {
		return nil, nil // the open says why
	}
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	msgs := or(q.Get("messages_table"), postgres.DefaultMessagesTable)
	sc := &pgSchema{
		dsn: q.DriverURL(u), redacted: redactDSN(u.String()), schema: q.Get("schema"),
		tables: []string{or(q.Get("sessions_table"), postgres.DefaultSessionsTable), msgs,
			or(q.Get("checkpoints_table"), postgres.DefaultCheckpointsTable), msgs + "_operations"},
	}
	conn, err := pgx.Connect(ctx, sc.dsn)
	if err != nil {
		return nil, nil // the open says why
	}
	defer conn.Close(context.WithoutCancel(ctx))
	objs, ns, err := sc.objects(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("reading the schema of %s before the check: %w", sc.redacted, err)
	}
	sc.nsBefore, sc.before = ns != "", map[string]bool{}
	for _, o := range objs {
		sc.before[o.kind+"/"+o.name] = true
	}
	return sc, nil
}

// pgQuerier is a connection or a transaction.
type pgQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// objects lists the store's tables that exist and the indexes on them
// (kind "table" or "index", table the index's), sorted, and returns the
// schema they are in ("" when it does not exist).
func (sc *pgSchema) objects(ctx context.Context, q pgQuerier) ([]schemaObject, string, error) {
	var ns *string
	if sc.schema == "" {
		if err := q.QueryRow(ctx, `SELECT current_schema()`).Scan(&ns); err != nil {
			return nil, "", err
		}
		if ns == nil {
			return nil, "", errors.New("no schema of the search path exists")
		}
	} else {
		var ok bool
		if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, sc.schema).Scan(&ok); err != nil {
			return nil, "", err
		}
		if !ok {
			return nil, "", nil
		}
		ns = &sc.schema
	}
	rows, err := q.Query(ctx, `SELECT 'table', table_name::text, table_name::text FROM information_schema.tables
	WHERE table_schema = $1 AND table_name = ANY($2)
UNION ALL
SELECT 'index', indexname::text, tablename::text FROM pg_indexes WHERE schemaname = $1 AND tablename = ANY($2)
ORDER BY 1 DESC, 2`, *ns, sc.tables)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []schemaObject
	for rows.Next() {
		var o schemaObject
		if err := rows.Scan(&o.kind, &o.name, &o.table); err != nil {
			return nil, "", err
		}
		out = append(out, o)
	}
	return out, *ns, rows.Err()
}

// restore drops, in one transaction, what the check added: each of the
// store's tables that was not there before, if it is empty (the new
// tables are locked ACCESS EXCLUSIVE first, so that no writer adds a row
// between the look and the drop), each new index on a table that was, and
// the schema named by the schema option, if the check created it and it
// is empty then. A new table holding rows is left (something else wrote
// to it during the check), and so is what depends on it.
func (sc *pgSchema) restore(ctx context.Context) (dropped, left []string, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, sc.dsn)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '10s'`); err != nil {
		return nil, nil, err
	}
	objs, ns, err := sc.objects(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	if ns == "" {
		return nil, nil, tx.Commit(ctx)
	}
	qual := func(name string) string { return pgx.Identifier{ns, name}.Sanitize() }
	var newTables []string
	for _, o := range objs {
		if o.kind == "table" && !sc.before["table/"+o.name] {
			newTables = append(newTables, o.name)
		}
	}
	drop := map[string]bool{}
	if len(newTables) > 0 {
		names := make([]string, len(newTables))
		for i, t := range newTables {
			names[i] = qual(t)
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE `+strings.Join(names, ", ")+` IN ACCESS EXCLUSIVE MODE`); err != nil {
			return nil, nil, err
		}
		for _, t := range newTables {
			var n int64
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+qual(t)).Scan(&n); err != nil {
				return nil, nil, err
			}
			if n > 0 {
				left = append(left, fmt.Sprintf("table %s (%s, written during the check by something else)", t, plural(int(n), "row", "rows")))
				continue
			}
			drop[t] = true
		}
		// A new empty table another kept one refers to (the sessions
		// table of a messages table holding rows) stays with it.
		for _, t := range newTables {
			if !drop[t] {
				continue
			}
			var referenced bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_constraint c
	WHERE c.contype = 'f' AND c.confrelid = to_regclass($1) AND c.conrelid <> to_regclass($1)
	AND NOT (c.conrelid = ANY (SELECT to_regclass(x) FROM unnest($2::text[]) AS x)))`, qual(t), qualAll(qual, sortedKeys(drop))).Scan(&referenced); err != nil {
				return nil, nil, err
			}
			if referenced {
				delete(drop, t)
				left = append(left, fmt.Sprintf("table %s (empty, but a table kept refers to it)", t))
			}
		}
		if len(drop) > 0 {
			names := qualAll(qual, sortedKeys(drop))
			if _, err := tx.Exec(ctx, `DROP TABLE `+strings.Join(names, ", ")); err != nil {
				return nil, nil, err
			}
			for _, t := range sortedKeys(drop) {
				dropped = append(dropped, "table "+t)
			}
		}
	}
	for _, o := range objs {
		if o.kind != "index" || sc.before["index/"+o.name] || !sc.before["table/"+o.table] {
			continue // an old index, or one of a new table (dropped with it, or kept with it)
		}
		if _, err := tx.Exec(ctx, `DROP INDEX `+qual(o.name)); err != nil {
			return nil, nil, err
		}
		dropped = append(dropped, "index "+o.name)
	}
	if sc.schema != "" && !sc.nsBefore {
		var empty bool
		if err := tx.QueryRow(ctx, `SELECT NOT EXISTS (SELECT FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1)
	AND NOT EXISTS (SELECT FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1)
	AND NOT EXISTS (SELECT FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = $1)`, ns).Scan(&empty); err != nil {
			return nil, nil, err
		}
		if empty {
			if _, err := tx.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{ns}.Sanitize()); err != nil {
				return nil, nil, err
			}
			dropped = append(dropped, "schema "+ns)
		} else {
			left = append(left, fmt.Sprintf("schema %s (it holds objects that were not there before the check)", ns))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, nil, err
	}
	return dropped, left, nil
}

// sortedKeys returns the keys of m, sorted.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func qualAll(qual func(string) string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = qual(n)
	}
	return out
}
