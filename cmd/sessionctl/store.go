package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/all" // every backend's URL scheme
	"github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// storeFlags are the flags of every command that opens a store.
type storeFlags struct {
	json           *bool
	connectTimeout *time.Duration
}

// addStoreFlags adds -json and -connect-timeout to fs.
func addStoreFlags(fs *flag.FlagSet) storeFlags {
	return storeFlags{
		json:           fs.Bool("json", false, "print one JSON document on standard output (fields: docs/sessionctl.md)"),
		connectTimeout: fs.Duration("connect-timeout", 10*time.Second, "how long to wait for the store to answer when opening it"),
	}
}

// access says what a command may do to the store it opens.
type access int

const (
	// readOnly creates nothing and writes nothing.
	readOnly access = iota
	// readWrite writes to a store that exists: an SQLite file that is
	// missing, or holds no session tables, is an error, as for readOnly.
	readWrite
	// create may create the store: migrate's destination, demo's file.
	create
)

// openStore opens a store URL with a collector for corrupt-record reports.
// A read-only open creates nothing (no file, table, collection, index) and
// fails when the store does not exist; so does a read-write open of an
// SQLite file (no command but migrate's destination creates a store at a
// mistyped path). The store must answer within timeout; a store that
// cannot be reached is one line saying so.
func openStore(ctx context.Context, dsn string, mode access, timeout time.Duration) (adapters.Store, *driver.CorruptLog, error) {
	if timeout <= 0 {
		return nil, nil, usagef("-connect-timeout must be positive")
	}
	if err := tlsPreflight(ctx, dsn, min(timeout, 3*time.Second)); err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if mode == readWrite {
		if err := requireExisting(cctx, dsn); err != nil {
			return nil, nil, explainOpen(ctx, cctx, dsn, timeout, mode, err)
		}
	}
	corrupt := &driver.CorruptLog{}
	st, err := adapters.OpenWith(cctx, dsn, adapters.Options{OnCorrupt: corrupt.Handler(), ReadOnly: mode == readOnly})
	if err != nil {
		return nil, nil, explainOpen(ctx, cctx, dsn, timeout, mode, err)
	}
	// Some backends (MongoDB) connect lazily: a read of a session nobody
	// has makes an unreachable server an error now, in one line, rather
	// than a wait of the driver's own length later. It writes nothing.
	if s, err := st.Session("sessionctl-reachability-probe"); err == nil {
		if _, err := session.Latest(cctx, s, 1); err != nil {
			_ = st.Close()
			return nil, nil, explainOpen(ctx, cctx, dsn, timeout, mode, err)
		}
	}
	return st, corrupt, nil
}

// requireExisting refuses an SQLite URL whose file does not exist or holds
// no session tables, before a read-write open would create them: it opens
// the file read-only (which creates nothing) and closes it. The SQLite
// adapter has no URL option for "open read-write, create nothing"; other
// backends have no file to mistype (a session id they do not list is
// refused by the commands themselves).
func requireExisting(ctx context.Context, dsn string) error {
	if !isSQLiteFile(dsn) {
		return nil
	}
	st, err := adapters.OpenWith(ctx, dsn, adapters.Options{ReadOnly: true, OnCorrupt: func(context.Context, driver.CorruptRecord) {}})
	if err != nil {
		return err
	}
	return st.Close()
}

// isSQLiteFile reports whether dsn names an SQLite database file (not an
// in-memory one).
func isSQLiteFile(dsn string) bool {
	u, err := url.Parse(dsn)
	if err != nil || !strings.EqualFold(u.Scheme, sqlite.Scheme) {
		return false
	}
	p, err := sqlite.URLPath(u)
	return err == nil && !sqliteInMemory(p)
}

func sqliteInMemory(path string) bool {
	return path == ":memory:" || strings.HasPrefix(path, "file::memory:") || strings.Contains(path, "mode=memory")
}

// volatile says why what is written to dsn would vanish when sessionctl
// exits ("" when it would not): memory:// and an in-memory SQLite database
// live in this process only.
func volatile(dsn string) string {
	if isMemory(dsn) {
		return "memory:// is a store inside this sessionctl process: it is new at every open and gone when the process exits"
	}
	u, err := url.Parse(dsn)
	if err != nil || !strings.EqualFold(u.Scheme, sqlite.Scheme) {
		return ""
	}
	if p, err := sqlite.URLPath(u); err == nil && sqliteInMemory(p) {
		return "an in-memory SQLite database lives inside this sessionctl process: it is new at every open and gone when the process exits"
	}
	return ""
}

// explainOpen turns a failed open into one line: "cannot reach" with the
// reason when the network failed, the store's own error otherwise.
// A driver cut off by the deadline may say anything ("error decoding key
// arr: unexpected EOF"): when the deadline passed, that is the reason.
func explainOpen(ctx, cctx context.Context, dsn string, timeout time.Duration, mode access, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if cctx.Err() != nil {
		return fmt.Errorf("cannot reach the store at %s: no answer within %s (-connect-timeout)", hostOf(dsn), timeout)
	}
	switch {
	case errors.Is(err, adapters.ErrInvalidDSN):
		return err
	case errors.Is(err, fs.ErrNotExist) && mode == readOnly:
		return fmt.Errorf("no store at %s: the file does not exist (read-only commands never create one; check the path)", redactDSN(dsn))
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("no store at %s: the file does not exist (sessionctl creates a store only as migrate's destination; check the path); nothing changed", redactDSN(dsn))
	case errors.Is(err, sqlite.ErrNoSchema) && mode == readOnly:
		return fmt.Errorf("%s holds no session tables (read-only commands never create them; check the path and the *_table options): %w", redactDSN(dsn), err)
	case errors.Is(err, sqlite.ErrNoSchema):
		return fmt.Errorf("%s holds no session tables (sessionctl creates them only as migrate's destination; check the path and the *_table options); nothing changed: %w", redactDSN(dsn), err)
	case strings.Contains(err.Error(), "attempt to write a readonly database"):
		return fmt.Errorf("%s: SQLite cannot read a WAL-mode database read-only without its -shm file, which this directory does not let it create; copy the file to a writable directory, or run where the -shm file exists: %w", redactDSN(dsn), err)
	}
	if why := unreachable(err, timeout); why != "" {
		return fmt.Errorf("cannot reach the store at %s: %s", hostOf(dsn), why)
	}
	return err
}

// unreachable names the network failure in err, or returns "".
func unreachable(err error, timeout time.Duration) string {
	var dns *net.DNSError
	var rec tls.RecordHeaderError
	var ne net.Error
	msg := err.Error()
	switch {
	case errors.As(err, &rec):
		return "the server does not speak TLS (for a plain server, use the scheme without the s: redis://)"
	case errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(msg, "connection refused"):
		return "connection refused (is the server running, on this host and port?)"
	case errors.As(err, &dns):
		return "host not found (" + dns.Name + ")"
	case errors.Is(err, syscall.ECONNRESET) || strings.Contains(msg, "connection reset"):
		return "the server reset the connection (is it the right kind of server?)"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(msg, "unexpected EOF"):
		return "the server closed the connection mid-answer (is it the right kind of server, and is its backend up?)"
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() ||
		strings.Contains(msg, "server selection") || strings.Contains(msg, "i/o timeout"):
		return fmt.Sprintf("no answer within %s (-connect-timeout)", timeout)
	}
	return ""
}

// hostOf returns the part of a store URL that names where it is, without
// credentials, path or options: "redis://127.0.0.1:6379".
func hostOf(dsn string) string {
	red := adapters.Redact(dsn)
	u, err := url.Parse(red)
	if err != nil || u.Host == "" {
		return red
	}
	return u.Scheme + "://" + u.Host
}

// tlsSchemes are the schemes whose first bytes are a TLS handshake.
var tlsSchemes = map[string]string{"rediss": "redis", "rediss+cluster": "redis+cluster", "rediss+sentinel": "redis+sentinel"}

// tlsPreflight shakes hands with the first host of a rediss URL, so that
// a plain server answers at once with a hint instead of after the
// driver's retries (26 s with go-redis's defaults). Only a server that
// does not speak TLS at all is an error here; certificates are the
// driver's business.
func tlsPreflight(ctx context.Context, dsn string, wait time.Duration) error {
	i := strings.Index(dsn, "://")
	if i < 0 {
		return nil
	}
	plain, ok := tlsSchemes[strings.ToLower(dsn[:i])]
	if !ok {
		return nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil // OpenWith says why, without the password
	}
	host, _, _ := strings.Cut(u.Host, ",")
	if host == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(host, "6379")
	}
	hctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // only asks whether the server speaks TLS; sends nothing else
	conn, err := d.DialContext(hctx, "tcp", host)
	if err == nil {
		_ = conn.Close()
		return nil
	}
	var rec tls.RecordHeaderError
	switch {
	case ctx.Err() != nil:
		return ctx.Err() // interrupted
	case errors.As(err, &rec), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("cannot reach the store at %s: no TLS handshake from the server, which answered in plain text (for a plain server, use %s://)", hostOf(dsn), plain)
	case hctx.Err() != nil:
		return fmt.Errorf("cannot reach the store at %s: no TLS handshake from the server within %s (is it a plain server? then use %s://)", hostOf(dsn), wait, plain)
	}
	return nil // refused, unknown host, …: the driver's error says it
}

// sessionIDs returns ids when given, and otherwise every session of st.
func sessionIDs(ctx context.Context, st adapters.Store, ids []string, dsn string) ([]string, error) {
	if len(ids) > 0 {
		return ids, nil
	}
	l, ok := st.(adapters.Lister)
	if !ok {
		return nil, fmt.Errorf("%s cannot list its sessions: name them with --session", redactDSN(dsn))
	}
	return l.ListSessions(ctx)
}

// pageFunc lists a page of a store's sessions, as
// adapters.PageLister's ListSessionsPage does.
type pageFunc func(cursor string, limit int) ([]string, string, error)

// orderedPager returns the function that lists a page of st's sessions in
// ListSessions's order, each session once: the store's own pages
// (adapters.PageLister) on every store but Redis, and pages of one full
// listing read now (adapters.PageOf) on Redis, whose SCAN pages come in no
// order and may list a session twice, and on a store that can only list
// them all (adapters.Lister). ok is false for a store that can do neither.
func orderedPager(ctx context.Context, st adapters.Store, dsn string) (page pageFunc, ok bool, err error) {
	if pl, isPL := st.(adapters.PageLister); isPL && !isRedisURL(dsn) {
		return func(cursor string, limit int) ([]string, string, error) {
			return pl.ListSessionsPage(ctx, cursor, limit)
		}, true, nil
	}
	if l, isL := st.(adapters.Lister); isL {
		all, err := l.ListSessions(ctx)
		return func(cursor string, limit int) ([]string, string, error) {
			return adapters.PageOf(all, cursor, limit)
		}, true, err
	}
	if pl, isPL := st.(adapters.PageLister); isPL {
		return func(cursor string, limit int) ([]string, string, error) {
			return pl.ListSessionsPage(ctx, cursor, limit)
		}, true, nil
	}
	return nil, false, nil
}

// eachListed yields every session page lists, from the first page to the
// last, listPageSize at a time, holding one page; a listing error ends it.
func eachListed(page pageFunc) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		cursor := ""
		for {
			ids, next, err := page(cursor, listPageSize)
			if err != nil {
				yield("", err)
				return
			}
			for _, id := range ids {
				if !yield(id, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			cursor = next
		}
	}
}

// isRedisURL reports whether dsn names a Redis store.
func isRedisURL(dsn string) bool {
	u, err := url.Parse(dsn)
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "redis", "rediss", "unix", "redis+sentinel", "rediss+sentinel":
		return true
	}
	return false
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return fmt.Sprint(*m) }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// errNoSuchSession reports a session id the store does not list.
var errNoSuchSession = errors.New("no such session")

// requireListed refuses a session id the store does not list (a mistyped
// id), when the store can list its sessions: ok is false when it cannot,
// and the caller says that an id it does not have reads as an empty
// session. Call it when the session read as empty (no item, no unreadable
// record): a session with items is listed.
// It reads the listing a page at a time, up to id.
func requireListed(ctx context.Context, st adapters.Store, id, dsn string) (ok bool, err error) {
	page, canList, err := orderedPager(ctx, st, dsn)
	if !canList {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("listing the sessions of %s to check that %s exists: %w", redactDSN(dsn), quoteID(id), err)
	}
	for x, err := range eachListed(page) {
		if err != nil {
			return true, fmt.Errorf("listing the sessions of %s to check that %s exists: %w", redactDSN(dsn), quoteID(id), err)
		}
		if x == id {
			return true, nil
		}
	}
	return true, fmt.Errorf("%w %s in %s (sessionctl list shows those it has; nothing changed)", errNoSuchSession, quoteID(id), redactDSN(dsn))
}

// cannotListNote is what inspect and repair say about an empty session of
// a store that cannot list its sessions.
const cannotListNote = "(this store cannot list its sessions, so an id it does not have reads as an empty session)"
