package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/agentsessions/sessions/adapters/sqlite"
)

// schemaObject is one entry of an SQLite file's sqlite_master.
type schemaObject struct{ kind, name, table string }

// sqliteSchema is what check needs to leave an SQLite file's schema as it
// found it: the file's path and the objects its sqlite_master listed
// before the check opened it.
type sqliteSchema struct {
	path   string
	before map[string]bool // kind/name
}

// snapshotSQLiteSchema reads the schema objects of the SQLite file dsn
// names (nil, nil for any other store), read-only.
func snapshotSQLiteSchema(ctx context.Context, dsn string) (*sqliteSchema, error) {
	if !isSQLiteFile(dsn) {
		return nil, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, nil
	}
	path, err := sqlite.URLPath(u)
	if err != nil {
		return nil, nil
	}
	sc := &sqliteSchema{path: path, before: map[string]bool{}}
	objs, err := sc.objects(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the schema of %s before the check: %w", redactDSN(dsn), err)
	}
	for _, o := range objs {
		sc.before[o.kind+"/"+o.name] = true
	}
	return sc, nil
}

// open opens the file for check's own statements: read-only, or with a
// busy timeout for the drop.
func (sc *sqliteSchema) open(readOnly bool) (*sql.DB, error) {
	p := sc.path
	if !strings.HasPrefix(p, "file:") {
		p = "file:" + p
	}
	sep := "?"
	if strings.Contains(p, "?") {
		sep = "&"
	}
	if readOnly {
		p += sep + "mode=ro"
	} else {
		p += sep + "_pragma=busy_timeout(5000)"
	}
	db, err := sql.Open("sqlite", p)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// objects lists the file's schema objects, SQLite's own (sqlite_…)
// left out.
func (sc *sqliteSchema) objects(ctx context.Context) ([]schemaObject, error) {
	db, err := sc.open(true)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return listSchema(ctx, db)
}

func listSchema(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) ([]schemaObject, error) {
	rows, err := q.QueryContext(ctx, `SELECT type, name, tbl_name FROM sqlite_master WHERE name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY type DESC, name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []schemaObject
	for rows.Next() {
		var o schemaObject
		if err := rows.Scan(&o.kind, &o.name, &o.table); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// restore drops what the check added to the schema: each table that was
// not there before, if it is empty (in one write transaction, so that no
// writer adds a row between the look and the drop), and each index that
// was not there before. It returns the objects it dropped and those it
// left (a table holding rows: someone else wrote to it during the check).
func (sc *sqliteSchema) restore(ctx context.Context) (dropped, left []string, err error) {
	db, err := sc.open(false)
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return nil, nil, err
	}
	commit := false
	defer func() {
		if !commit {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
		}
	}()
	objs, err := listSchema(ctx, conn)
	if err != nil {
		return nil, nil, err
	}
	newTables := map[string]bool{}
	for _, o := range objs { // tables first (type DESC)
		if sc.before[o.kind+"/"+o.name] {
			continue
		}
		switch o.kind {
		case "table":
			var n int64
			if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM `+quoteSQL(o.name)).Scan(&n); err != nil {
				return nil, nil, err
			}
			if n > 0 {
				left = append(left, fmt.Sprintf("table %s (%s, written during the check by something else)", o.name, plural(int(n), "row", "rows")))
				continue
			}
			if _, err := conn.ExecContext(ctx, `DROP TABLE `+quoteSQL(o.name)); err != nil {
				return nil, nil, err
			}
			newTables[o.name] = true
			dropped = append(dropped, "table "+o.name)
		case "index", "trigger", "view":
			if newTables[o.table] {
				continue // dropped with its table
			}
			if _, err := conn.ExecContext(ctx, `DROP `+strings.ToUpper(o.kind)+` `+quoteSQL(o.name)); err != nil {
				return nil, nil, err
			}
			dropped = append(dropped, o.kind+" "+o.name)
		}
	}
	if _, err := conn.ExecContext(ctx, `COMMIT`); err != nil {
		return nil, nil, err
	}
	commit = true
	return dropped, left, nil
}

// quoteSQL quotes an SQLite identifier.
func quoteSQL(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }
