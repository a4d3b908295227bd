package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

func init() {
	commands["list"] = command{"list the sessions of a store with item counts, sizes and checkpoints (read-only)", runList}
}

// listSession is one session in list's -json output. UpdatedAt (RFC 3339,
// UTC) is absent where the store keeps no such time (memory, and the Redis
// native layout, which stamps created_at only).
type listSession struct {
	SessionID      string `json:"session_id"`
	Items          int    `json:"items"`
	Bytes          int    `json:"bytes"`
	CorruptRecords int    `json:"corrupt_records"`
	// Encrypted counts the envelopes read without a key (their bytes are
	// in Bytes: the stored size).
	Encrypted int    `json:"encrypted_items,omitempty"`
	UpdatedAt string `json:"updated_at,omitempty"`
	// Checkpoint is the CHECKPOINT column: "-" (no checkpoint, or a store
	// that keeps none), else the states of the session's checkpoints, most
	// urgent first: unreadable, terminal, held, pending, none.
	Checkpoint  string           `json:"checkpoint"`
	Checkpoints []listCheckpoint `json:"checkpoints,omitempty"`
	// CheckpointError is why the session's checkpoints could not be listed.
	CheckpointError string `json:"checkpoint_error,omitempty"`
	// AlsoInLayout names the other Redis layout ("python", "native") when
	// it holds a session with this id too: two disjoint histories.
	AlsoInLayout string `json:"also_in_layout,omitempty"`
	Error        string `json:"error,omitempty"`
}

// listCheckpoint is one checkpoint in list's -json output.
type listCheckpoint struct {
	Name    string `json:"name"`
	Version int64  `json:"version"`
	State   string `json:"state"`
	Bytes   int    `json:"bytes"`
	nextJSON
	Error string `json:"error,omitempty"` // why it is unreadable
	// text is what comes next, in words, for NOTES.
	text string
}

// listReport is list's -json output: one document, written as the
// listing goes (sessions streams, one page at a time).
type listReport struct {
	Store    string        `json:"store"`
	Sessions []listSession `json:"sessions"`
	// NextCursor, when -limit cut the listing, is the -after value that
	// resumes it.
	NextCursor string `json:"next_cursor,omitempty"`
	// Error is why the listing stopped before its end.
	Error string `json:"error,omitempty"`
}

// listPageSize is how many sessions list reads and prints at a time.
const listPageSize = 500

// runList pages through the sessions of a store and prints, page by page,
// each one's item count, size, update time and checkpoint states.
func runList(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "list", "URL")
	sf := addStoreFlags(fs)
	keysFile := addKeysFlag(fs)
	limit := fs.Int("limit", 0, "list at most this many sessions, then print the -after cursor that resumes the listing (0: no limit)")
	after := fs.String("after", "", "resume a listing after this cursor, as a list cut by -limit printed it")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("-limit must not be negative")
	}
	cursor, err := decodeCursor(*after)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one store URL")
	}
	keys, err := loadKeys(*keysFile)
	if err != nil {
		return err
	}
	dsn := pos[0]
	e.setStatus("opening %s read-only; nothing changed", redactDSN(dsn))
	st, corrupt, err := openStore(ctx, dsn, readOnly, *sf.connectTimeout)
	if err != nil {
		return err
	}
	defer st.Close()
	page, err := pager(ctx, st, dsn)
	if err != nil {
		return err
	}
	other := openOtherLayout(ctx, dsn, *sf.connectTimeout)
	defer other.close()
	out := newListWriter(e, *sf.json, redactDSN(dsn))
	listed, failed := 0, 0
	var notes []string
	for {
		n := listPageSize
		if *limit > 0 {
			n = min(n, *limit-listed)
		}
		ids, next, err := page(cursor, n)
		if err == nil {
			var rows []listSession
			var f int
			rows, f, err = summarizePage(ctx, st, keys, corrupt, ids)
			failed += f
			there := other.holds(ctx, ids)
			for i := range rows {
				if there[rows[i].SessionID] {
					rows[i].AlsoInLayout = other.layout
					notes = append(notes, fmt.Sprintf("note: session %s also exists in the %s layout (?layout=%s): two disjoint histories; each URL reads one", quoteID(rows[i].SessionID), other.layout, other.layout))
				}
			}
			out.sessions(rows)
		}
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			_ = out.end("", err)
			return err
		}
		listed += len(ids)
		e.setStatus("%s listed; nothing changed (list is read-only)", plural(listed, "session", "sessions"))
		cursor = next
		if cursor == "" || *limit > 0 && listed >= *limit {
			break
		}
	}
	if err := out.end(cursor, nil); err != nil {
		return err
	}
	if !*sf.json {
		if cursor != "" {
			fmt.Fprintf(e.stdout, "%s (-limit %d); the listing goes on with: -after %s\n", plural(listed, "session", "sessions"), *limit, encodeCursor(cursor))
		} else {
			fmt.Fprintf(e.stdout, "%s\n", plural(listed, "session", "sessions"))
		}
		for _, n := range notes {
			fmt.Fprintln(e.stdout, n)
		}
	}
	if failed > 0 {
		return errFailed
	}
	return nil
}

// encodeCursor writes a store's cursor as list prints it: base64url, so
// that any bytes an id holds survive a command line.
func encodeCursor(c string) string { return base64.RawURLEncoding.EncodeToString([]byte(c)) }

// decodeCursor reads -after.
func decodeCursor(s string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return "", usagef("-after %q is not a cursor list printed", s)
	}
	return string(b), nil
}

// pager returns the function that lists a page of st's sessions: the
// store's own (adapters.PageLister), or, for a store that can only list
// them all (adapters.Lister), pages of one full listing read once.
func pager(ctx context.Context, st adapters.Store, dsn string) (func(cursor string, limit int) ([]string, string, error), error) {
	if pl, ok := st.(adapters.PageLister); ok {
		return func(cursor string, limit int) ([]string, string, error) {
			return pl.ListSessionsPage(ctx, cursor, limit)
		}, nil
	}
	l, ok := st.(adapters.Lister)
	if !ok {
		return nil, fmt.Errorf("%s cannot list its sessions", redactDSN(dsn))
	}
	all, err := l.ListSessions(ctx)
	if err != nil {
		return nil, err
	}
	return func(cursor string, limit int) ([]string, string, error) {
		return adapters.PageOf(all, cursor, limit)
	}, nil
}

// summarizePage returns list's rows for ids, and how many of them failed.
// A store that summarizes a page at once (adapters.Summarizer) does, unless
// keys were given (decrypting reads each session) or the summary failed;
// otherwise each session is read on its own, with its errors in its row.
func summarizePage(ctx context.Context, st adapters.Store, keys keyring, corrupt *driver.CorruptLog, ids []string) ([]listSession, int, error) {
	if sm, ok := st.(adapters.Summarizer); ok && keys.opts == nil && len(ids) > 0 {
		envelopes := map[string]int{}
		sums, err := sm.SummarizeSessions(ctx, ids, func(id string, it session.Item) {
			if isEnvelope(it) {
				envelopes[id]++
			}
		})
		if err == nil {
			rows := make([]listSession, len(sums))
			for i, s := range sums {
				rows[i] = summaryRow(s, envelopes[s.ID])
			}
			return rows, 0, nil
		}
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
	}
	rows := make([]listSession, 0, len(ids))
	failed := 0
	for _, id := range ids {
		ls, f, err := readSession(ctx, st, keys, corrupt, id)
		if err != nil {
			return nil, 0, err
		}
		rows = append(rows, ls)
		failed += f
	}
	return rows, failed, nil
}

// summaryRow is list's row for a store's summary of a session.
func summaryRow(s adapters.SessionSummary, envelopes int) listSession {
	ls := listSession{SessionID: s.ID, Items: s.Items, Bytes: int(s.Bytes), CorruptRecords: s.Unreadable, Encrypted: envelopes}
	if !s.Updated.IsZero() {
		ls.UpdatedAt = s.Updated.UTC().Format(time.RFC3339)
	}
	cps := make([]storedCheckpoint, 0, len(s.Checkpoints))
	for _, c := range s.Checkpoints {
		cps = append(cps, loadCheckpoint(c.Name, c.Version, c.Document, c.Err))
	}
	setCheckpoints(&ls, cps)
	return ls
}

// setCheckpoints sets the checkpoint fields of ls.
func setCheckpoints(ls *listSession, cps []storedCheckpoint) {
	ls.Checkpoint = summarizeCheckpoints(cps)
	for _, c := range cps {
		ls.Checkpoints = append(ls.Checkpoints, listCheckpoint{Name: c.name, Version: c.version, State: c.state(), Bytes: c.size,
			nextJSON: toNextJSON(c), Error: c.errText(), text: c.briefText()})
	}
}

// readSession is list's row for session id, read on its own: its items
// (with keys, decrypted), its checkpoints and its times. failed counts
// what could not be read (the items, the checkpoints); err is the
// context's, when it ended.
func readSession(ctx context.Context, st adapters.Store, keys keyring, corrupt *driver.CorruptLog, id string) (ls listSession, failed int, err error) {
	ls = listSession{SessionID: id, Checkpoint: cpAbsent}
	var items []session.Item
	s, serr := keys.session(st, id)
	err = serr
	if err == nil {
		items, err = session.All(ctx, s)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ls, 0, ctx.Err()
		}
		ls.Error = err.Error()
		failed++
	}
	ls.Items = len(items)
	ls.Encrypted = countEnvelopes(items)
	for _, it := range items {
		ls.Bytes += len(it.Bytes())
	}
	ls.CorruptRecords = len(corrupt.Reports(id))
	corrupt.Reset(id)
	if serr == nil {
		cps, _, err := readCheckpoints(ctx, s)
		switch {
		case err != nil && ctx.Err() != nil:
			return ls, 0, ctx.Err()
		case err != nil:
			ls.Checkpoint, ls.CheckpointError = cpUnreadable, err.Error()
			failed++
		default:
			setCheckpoints(&ls, cps)
		}
	}
	if ts, ok := st.(adapters.Timestamps); ok {
		if t, found, err := ts.SessionTimes(ctx, id); err == nil && found && !t.Updated.IsZero() {
			ls.UpdatedAt = t.Updated.UTC().Format(time.RFC3339)
		}
	}
	return ls, failed, nil
}

// listWriter prints list's rows as they come: a table, or with -json one
// document whose sessions array is written a page at a time.
type listWriter struct {
	e     *env
	w     *bufio.Writer // flushed after each page
	buf   bytes.Buffer  // a row's JSON
	enc   *json.Encoder // into buf
	json  bool
	store string
	n     int // sessions written
	err   error
}

func newListWriter(e *env, asJSON bool, store string) *listWriter {
	w := &listWriter{e: e, w: bufio.NewWriterSize(e.stdout, 64<<10), json: asJSON, store: store}
	w.enc = json.NewEncoder(&w.buf)
	w.enc.SetIndent("    ", "  ")
	w.enc.SetEscapeHTML(false)
	if asJSON {
		name, _ := json.Marshal(store)
		fmt.Fprintf(w.w, "{\n  \"store\": %s,\n  \"sessions\": [", name)
	} else {
		fmt.Fprintf(w.w, "%-40s %8s %10s  %-20s  %-15s  %s\n", "SESSION", "ITEMS", "BYTES", "UPDATED", "CHECKPOINT", "NOTES")
	}
	return w
}

// sessions writes rows.
func (w *listWriter) sessions(rows []listSession) {
	defer w.flush()
	for _, ls := range rows {
		if w.json {
			w.buf.Reset()
			if err := w.enc.Encode(ls); err != nil {
				w.err = err
				return
			}
			sep := ",\n    "
			if w.n == 0 {
				sep = "\n    "
			}
			w.w.WriteString(sep)
			w.w.Write(bytes.TrimRight(w.buf.Bytes(), "\n"))
		} else {
			w.w.WriteString(tableRow(ls))
			w.w.WriteByte('\n')
		}
		w.n++
	}
}

// end finishes the output: with -json, the cursor that resumes a listing
// -limit cut, or the error that stopped it.
func (w *listWriter) end(next string, stopped error) error {
	if !w.json {
		w.flush()
		return w.err
	}
	var b strings.Builder
	if w.n > 0 {
		b.WriteString("\n  ")
	}
	b.WriteString("]")
	for _, f := range []struct{ name, v string }{{"next_cursor", encodeCursorIf(next)}, {"error", errText(stopped)}} {
		if f.v != "" {
			v, _ := json.Marshal(f.v)
			fmt.Fprintf(&b, ",\n  %q: %s", f.name, v)
		}
	}
	b.WriteString("\n}\n")
	w.w.WriteString(b.String())
	w.flush()
	return w.err
}

// flush writes what w holds, keeping the first error.
func (w *listWriter) flush() {
	if err := w.w.Flush(); err != nil && w.err == nil {
		w.err = err
	}
}

func encodeCursorIf(c string) string {
	if c == "" {
		return ""
	}
	return encodeCursor(c)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// tableRow is ls as a line of list's table.
func tableRow(ls listSession) string {
	var notes []string
	if ls.CorruptRecords > 0 {
		notes = append(notes, plural(ls.CorruptRecords, "unreadable record", "unreadable records")+" (run doctor)")
	}
	if ls.Encrypted > 0 {
		notes = append(notes, plural(ls.Encrypted, "encrypted item", "encrypted items")+" ("+keysHint+")")
	}
	if n := unreadableCheckpoints(ls.Checkpoints); n > 0 {
		notes = append(notes, plural(n, "unreadable checkpoint", "unreadable checkpoints")+" (run inspect)")
	}
	for _, c := range ls.Checkpoints {
		switch c.Next {
		case nextInDoubt, nextApproval, nextModel:
			notes = append(notes, quoteID(c.Name)+" "+c.text)
		case cpOpaque:
			notes = append(notes, fmt.Sprintf("%s opaque (%d bytes, version %d)", quoteID(c.Name), c.Bytes, c.Version))
		}
	}
	if ls.CheckpointError != "" {
		notes = append(notes, "cannot list checkpoints: "+oneLine(ls.CheckpointError))
	}
	if ls.Error != "" {
		notes = []string{"cannot read: " + oneLine(ls.Error)}
	}
	updated := ls.UpdatedAt
	if updated == "" {
		updated = "-"
	}
	line := fmt.Sprintf("%-40s %8d %10d  %-20s  %-15s  %s", quoteID(truncate(ls.SessionID, 38)), ls.Items, ls.Bytes, updated, ls.Checkpoint, strings.Join(notes, "; "))
	return strings.TrimRight(line, " ")
}

// unreadableCheckpoints counts the unreadable checkpoints of a session.
func unreadableCheckpoints(cps []listCheckpoint) int {
	n := 0
	for _, c := range cps {
		if c.State == cpUnreadable {
			n++
		}
	}
	return n
}

// otherStore is, for a Redis URL, the store of the other key layout
// ("python" for a native URL, "native" for ?layout=python), opened with its
// default key_prefix, read to tell which listed sessions it holds too
// (holds: no second scan of the keyspace). It
// finds nothing for other backends, for Redis Cluster (which refuses the
// Python layout), and when the other layout cannot be opened.
type otherStore struct {
	layout  string
	st      adapters.Store
	corrupt *driver.CorruptLog
	timeout time.Duration
}

func openOtherLayout(ctx context.Context, dsn string, timeout time.Duration) *otherStore {
	o := &otherStore{timeout: timeout}
	u, err := url.Parse(dsn)
	if err != nil {
		return o
	}
	switch strings.ToLower(u.Scheme) {
	case "redis", "rediss", "unix", "redis+sentinel", "rediss+sentinel":
	default:
		return o
	}
	q := u.Query()
	layout := "python"
	if strings.EqualFold(q.Get("layout"), "python") {
		layout = "native"
	}
	q.Set("layout", layout)
	q.Del("key_prefix")
	u.RawQuery = q.Encode()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	o.corrupt = &driver.CorruptLog{}
	st, err := adapters.OpenWith(cctx, u.String(), adapters.Options{ReadOnly: true, OnCorrupt: o.corrupt.Handler()})
	if err != nil {
		return o
	}
	o.layout, o.st = layout, st
	return o
}

// holds returns which of ids the other layout holds a session of: with
// one pipeline of existence checks when the store offers them (Redis), or
// one summary of the page when it summarizes pages, else with a latest-1
// read of each.
func (o *otherStore) holds(ctx context.Context, ids []string) map[string]bool {
	found := map[string]bool{}
	if o.st == nil || len(ids) == 0 {
		return found
	}
	if ex, ok := o.st.(interface {
		SessionsExist(context.Context, []string) ([]bool, error)
	}); ok {
		cctx, cancel := context.WithTimeout(ctx, o.timeout)
		defer cancel()
		if exist, err := ex.SessionsExist(cctx, ids); err == nil {
			for i, ok := range exist {
				if ok {
					found[ids[i]] = true
				}
			}
			return found
		}
	}
	if sm, ok := o.st.(adapters.Summarizer); ok {
		cctx, cancel := context.WithTimeout(ctx, o.timeout)
		defer cancel()
		if sums, err := sm.SummarizeSessions(cctx, ids, nil); err == nil {
			for _, s := range sums {
				if s.Items > 0 || s.Unreadable > 0 {
					found[s.ID] = true
				}
			}
			return found
		}
	}
	for _, id := range ids {
		if o.has(ctx, id) {
			found[id] = true
		}
	}
	return found
}

// has reports whether the other layout holds session id.
func (o *otherStore) has(ctx context.Context, id string) bool {
	if o.st == nil {
		return false
	}
	s, err := o.st.Session(id)
	if err != nil {
		return false // an id the other layout refuses has no session there
	}
	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	items, err := session.Latest(cctx, s, 1)
	found := err == nil && (len(items) > 0 || len(o.corrupt.Reports(id)) > 0)
	o.corrupt.Reset(id)
	return found
}

func (o *otherStore) close() {
	if o.st != nil {
		_ = o.st.Close()
	}
}
