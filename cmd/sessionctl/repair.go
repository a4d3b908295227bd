package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// quarantineType is the type of the items repair writes to a quarantine
// session: each one holds what repair removed from a session (an item,
// byte for byte, or an unreadable record's raw bytes) and why.
const quarantineType = "sessionctl_quarantine"

// quarantineSuffix names a session's default quarantine session.
const quarantineSuffix = "#quarantine"

// repairHookAfterQuarantine, when set (by tests), runs after the
// quarantine batch is written and before the session is replaced: an
// error there stops repair as a crash between the two steps would.
var repairHookAfterQuarantine func() error

// removal is one item repair takes out of a session.
type removal struct {
	Index  int    `json:"index"`
	Reason string `json:"reason"`
	Item   string `json:"item"` // the stored JSON text, exactly
}

// repairReport is repair's -json output.
type repairReport struct {
	Store              string        `json:"store"`
	SessionID          string        `json:"session_id"`
	QuarantineSession  string        `json:"quarantine_session"`
	RepairID           string        `json:"repair_id"`
	Applied            bool          `json:"applied"`
	ItemsBefore        int           `json:"items_before"`
	ItemsAfter         int           `json:"items_after"`
	Removed            []removal     `json:"removed"`
	UnreadableRecords  []corruptJSON `json:"unreadable_records"`
	AlreadyQuarantined bool          `json:"already_quarantined"`
	Backup             string        `json:"backup,omitempty"`
}

// runRepair takes a session's orphan and duplicate outputs (and, with
// -drop-unanswered, its unanswered calls) and its unreadable records out
// of it, so the conversation works again, and moves them to a quarantine
// session, so nothing is lost.
//
// Without -apply it prints the exact change and opens the store
// read-only. With -apply it writes a backup file of everything it read,
// then the quarantine batch (one atomic append), then replaces the
// session's history (one atomic replace on stores with the replace
// capability). The two writes cannot be one transaction across sessions;
// the order makes a crash between them harmless: the session is still
// whole, the quarantine holds copies marked with the repair id (a digest
// of what was read), and running repair again finds them, writes nothing
// twice, and finishes the replace.
//
// Run it while no agent writes to the session: it re-reads the history
// just before replacing and refuses if it changed, but cannot fence a
// writer racing that last moment.
func runRepair(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "repair", "URL SESSION_ID")
	sf := addStoreFlags(fs)
	apply := fs.Bool("apply", false, "apply the change (default: print it and change nothing)")
	dry := fs.Bool("dry-run", false, "print the change and change nothing (the default)")
	unanswered := fs.Bool("drop-unanswered", false, "also move calls that never got an output (and the reasoning before them)")
	qid := fs.String("quarantine", "", "the session that receives what is removed (default: SESSION_ID"+quarantineSuffix+")")
	backup := fs.String("backup", "", "with -apply, also write the history as read to this JSON-lines file (default: sessionctl-repair-<time>.jsonl; \"-\" for none)")
	width := fs.Int("width", 0, "truncate each printed item to this many characters (0: whole)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want a store URL and a session id")
	}
	if *apply && *dry {
		return usagef("-apply and -dry-run exclude each other")
	}
	dsn, id := pos[0], pos[1]
	if *qid == "" {
		*qid = id + quarantineSuffix
	}
	if *qid == id {
		return usagef("-quarantine must name another session")
	}
	mode := readOnly
	if *apply {
		mode = readWrite
	}
	e.setStatus("opening %s; nothing changed", redactDSN(dsn))
	st, corrupt, err := openStore(ctx, dsn, mode, *sf.connectTimeout)
	if err != nil {
		return err
	}
	defer st.Close()
	s, err := st.Session(id)
	if err != nil {
		return err
	}
	e.setStatus("reading session %s; nothing changed", quoteID(id))
	items, err := session.All(ctx, s)
	if err != nil {
		return err
	}
	bad := corrupt.Reports(id)
	fixed, removed := plan(items, *unanswered)
	rid := repairID(id, items, bad)
	rep := repairReport{Store: redactDSN(dsn), SessionID: id, QuarantineSession: *qid, RepairID: rid,
		ItemsBefore: len(items), ItemsAfter: len(fixed), Removed: removed, UnreadableRecords: toCorruptJSONs(bad)}
	if !*sf.json {
		for _, r := range removed {
			fmt.Fprintf(e.stdout, "move item %d (%s) to %s: %s\n", r.Index, r.Reason, quoteID(*qid), sanitize(truncate(string(r.Item), *width)))
		}
		for _, r := range bad {
			fmt.Fprintf(e.stdout, "move unreadable record at %s (%d bytes, kept exactly) to %s: %s\n", sanitize(r.Position), len(r.Raw), quoteID(*qid), quoteRaw(r.Raw, *width))
		}
	}
	if len(removed) == 0 && len(bad) == 0 {
		if *sf.json {
			return writeJSON(e, rep)
		}
		fmt.Fprintf(e.stdout, "session %s: nothing to repair\n", quoteID(id))
		return nil
	}
	records, err := quarantineRecords(id, rid, removed, bad)
	if err != nil {
		return err
	}
	if !*apply {
		if *sf.json {
			return writeJSON(e, rep)
		}
		fmt.Fprintf(e.stdout, "dry run: %d of %d items would remain; %s would go to %s; nothing changed (add -apply to apply)\n",
			len(fixed), len(items), plural(len(records), "record", "records"), quoteID(*qid))
		return nil
	}

	q, err := st.Session(*qid)
	if err != nil {
		return fmt.Errorf("quarantine session %s: %w (nothing changed)", quoteID(*qid), err)
	}
	held, err := session.All(ctx, q)
	if err != nil {
		return fmt.Errorf("quarantine session %s: %w (nothing changed)", quoteID(*qid), err)
	}
	have := 0
	for _, it := range held {
		if it.Type() != quarantineType {
			return fmt.Errorf("session %s holds items repair did not write: name another quarantine session with -quarantine (nothing changed)", quoteID(*qid))
		}
		if r, _ := it.StringField("repair_id"); r == rid {
			have++
		}
	}
	if *backup != "-" {
		path := *backup
		if path == "" {
			path = fmt.Sprintf("sessionctl-repair-%d.jsonl", time.Now().UnixNano())
		}
		if err := writeBackup(path, id, items, bad); err != nil {
			return fmt.Errorf("backup: %w (nothing changed)", err)
		}
		rep.Backup = path
	}
	switch {
	case have == len(records):
		// An earlier run wrote the quarantine and stopped before the
		// replace: the copies are there, write them no second time.
		rep.AlreadyQuarantined = true
	case have == 0:
		e.setStatus("writing the quarantine session %s; session %s unchanged", quoteID(*qid), quoteID(id))
		if err := session.Append(ctx, q, records); err != nil {
			return fmt.Errorf("quarantine session %s: %w (nothing changed)", quoteID(*qid), err)
		}
	default:
		return fmt.Errorf("quarantine session %s holds %d of this repair's %d records (repair id %s): it was changed by hand; nothing changed", quoteID(*qid), have, len(records), rid)
	}
	e.setStatus("the quarantine session %s holds copies of what repair removes (repair id %s); session %s unchanged: run repair -apply again to finish", quoteID(*qid), rid, quoteID(id))
	if repairHookAfterQuarantine != nil {
		if err := repairHookAfterQuarantine(); err != nil {
			return err
		}
	}
	corrupt.Reset(id)
	again, err := session.All(ctx, s)
	if err != nil {
		return fmt.Errorf("re-read: %w (the quarantine %s holds copies, repair id %s; the session is unchanged)", err, quoteID(*qid), rid)
	}
	if !sameItems(items, again) || !sameRaw(bad, corrupt.Reports(id)) {
		return fmt.Errorf("session %s changed while repairing: it is unchanged; the quarantine %s holds copies of what was read (repair id %s); run repair again when no agent writes to it", quoteID(id), quoteID(*qid), rid)
	}
	created := sessionCreated(ctx, st, id)
	if err := session.Replace(ctx, s, fixed); err != nil {
		return fmt.Errorf("replace: %w (the quarantine %s holds copies, repair id %s; run repair -apply again)", err, quoteID(*qid), rid)
	}
	if !created.IsZero() {
		// A repaired conversation is the same conversation: it keeps when it
		// began; its updated_at is the repair's.
		if err := st.(adapters.Timestamps).SetSessionTimes(ctx, id, adapters.SessionTimes{Created: created}); err != nil {
			return fmt.Errorf("repaired, but keeping created_at failed: %w", err)
		}
	}
	e.setStatus("done")
	rep.Applied = true
	if *sf.json {
		return writeJSON(e, rep)
	}
	note := ""
	if rep.AlreadyQuarantined {
		note = " (written by an earlier run that stopped before the replace)"
	}
	fmt.Fprintf(e.stdout, "session %s repaired: %d of %d items remain; %s in %s%s, repair id %s",
		quoteID(id), len(fixed), len(items), plural(len(records), "record", "records"), quoteID(*qid), note, rid)
	if rep.Backup != "" {
		fmt.Fprintf(e.stdout, "; backup at %s", rep.Backup)
	}
	fmt.Fprintln(e.stdout)
	return nil
}

// plan returns the history repair leaves and the items it removes, each
// with its reason: the problems RepairHistory removed, and the reasoning
// items right before a removed unanswered call. The kept items are
// checked against RepairHistory's result; should the two ever disagree,
// the removed items are found by matching its result against the history.
func plan(items []session.Item, dropUnanswered bool) ([]session.Item, []removal) {
	fixed, problems := history.RepairHistory(items, dropUnanswered)
	why := map[int]string{}
	for _, p := range problems {
		why[p.Index] = string(p.Kind)
		if p.Kind == history.ProblemUnansweredCall {
			for k := p.Index - 1; k >= 0 && items[k].Type() == "reasoning"; k-- {
				if _, ok := why[k]; !ok {
					why[k] = "reasoning-before-removed-call"
				}
			}
		}
	}
	var kept []session.Item
	for i, it := range items {
		if _, gone := why[i]; !gone {
			kept = append(kept, it)
		}
	}
	if !sameItems(kept, fixed) {
		why = map[int]string{}
		j := 0
		for i, it := range items {
			if j < len(fixed) && fixed[j].Equal(it) {
				j++
				continue
			}
			why[i] = "removed-by-repair"
		}
	}
	removed := []removal{}
	for i, it := range items {
		if r, gone := why[i]; gone {
			removed = append(removed, removal{Index: i, Reason: r, Item: string(it.Bytes())})
		}
	}
	return fixed, removed
}

// repairID is a digest of what repair read: the session id, every item
// and every unreadable record, in order. Two runs over an unchanged
// session share it.
// sessionCreated returns session id's created_at where the store keeps it,
// the zero time otherwise.
func sessionCreated(ctx context.Context, st adapters.Store, id string) time.Time {
	ts, ok := st.(adapters.Timestamps)
	if !ok {
		return time.Time{}
	}
	t, ok, err := ts.SessionTimes(ctx, id)
	if err != nil || !ok {
		return time.Time{}
	}
	return t.Created
}

func repairID(id string, items []session.Item, bad []driver.CorruptRecord) string {
	h := sha256.New()
	put := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	put([]byte(id))
	for _, it := range items {
		put(it.Bytes())
	}
	for _, r := range bad {
		put([]byte(r.Position))
		put(r.Raw)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// quarantineRecords returns the items repair writes to the quarantine
// session: one per removed item (the item embedded byte for byte) and one
// per unreadable record (its bytes in base64, and as text when valid
// UTF-8).
func quarantineRecords(id, rid string, removed []removal, bad []driver.CorruptRecord) ([]session.Item, error) {
	type head struct {
		Type      string `json:"type"`
		RepairID  string `json:"repair_id"`
		SessionID string `json:"session_id"`
		Reason    string `json:"reason"`
		Index     *int   `json:"index,omitempty"`
		corruptFields
	}
	var out []session.Item
	for _, r := range removed {
		b, err := json.Marshal(head{Type: quarantineType, RepairID: rid, SessionID: id, Reason: r.Reason, Index: &r.Index})
		if err != nil {
			return nil, err
		}
		// encoding/json would compact a RawMessage: splice the item's
		// bytes in as they are stored.
		b = append(append(append(b[:len(b)-1], `,"item":`...), r.Item...), '}')
		it, err := session.NewItem(b)
		if err != nil {
			return nil, fmt.Errorf("quarantine record for item %d: %w", r.Index, err)
		}
		out = append(out, it)
	}
	for _, r := range bad {
		c := toCorruptJSON(r)
		b, err := json.Marshal(head{Type: quarantineType, RepairID: rid, SessionID: id, Reason: "unreadable-record",
			corruptFields: corruptFields{Position: c.Position, Error: c.Error, RawBase64: c.RawBase64, RawText: c.RawText}})
		if err != nil {
			return nil, err
		}
		it, err := session.NewItem(b)
		if err != nil {
			return nil, fmt.Errorf("quarantine record for %s: %w", r.Position, err)
		}
		out = append(out, it)
	}
	return out, nil
}

// corruptFields are an unreadable record's members in a quarantine record.
type corruptFields struct {
	Position  string `json:"position,omitempty"`
	Error     string `json:"error,omitempty"`
	RawBase64 string `json:"raw_base64,omitempty"`
	RawText   string `json:"raw_text,omitempty"`
}

// writeBackup writes one JSON line per item read, the item's stored bytes
// exactly (in item_base64 when they hold a line break), and one per
// unreadable record, its bytes in raw_base64 (and raw_text when valid
// UTF-8). Never U+FFFD in place of a byte.
func writeBackup(path, id string, items []session.Item, bad []driver.CorruptRecord) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	idJSON, err := json.Marshal(id)
	if err != nil {
		f.Close()
		return err
	}
	for i, it := range items {
		b := it.Bytes()
		fmt.Fprintf(&buf, `{"session_id":%s,"index":%d,`, idJSON, i)
		if bytes.ContainsAny(b, "\r\n") {
			fmt.Fprintf(&buf, `"item_base64":"%s"}`+"\n", base64.StdEncoding.EncodeToString(b))
		} else {
			buf.WriteString(`"item":`)
			buf.Write(b)
			buf.WriteString("}\n")
		}
	}
	for _, r := range bad {
		b, err := json.Marshal(toCorruptJSON(r))
		if err != nil {
			f.Close()
			return err
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func sameItems(a, b []session.Item) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

func sameRaw(a, b []driver.CorruptRecord) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Position != b[i].Position || !bytes.Equal(a[i].Raw, b[i].Raw) {
			return false
		}
	}
	return true
}
