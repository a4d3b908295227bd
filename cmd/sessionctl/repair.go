package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
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

// repairAttempts is how many times repair -apply reads, plans and
// conditionally replaces a session a writer keeps changing before it
// gives up.
const repairAttempts = 5

// repairHookBeforeReplace, when set (by tests), runs just before the
// conditional replace of each attempt, with its number (from 1): a test
// appends there as a live writer would.
var repairHookBeforeReplace func(attempt int)

// repairRead is one consistent read of a session: its version (when the
// session has one), its items and its unreadable records.
type repairRead struct {
	version string
	items   []session.Item
	bad     []driver.CorruptRecord
}

// readConsistent reads a session's version, its history and its version
// again, until the two versions agree (a writer appended in between
// otherwise), at most repairAttempts times. Without versioned it reads the
// history once.
func readConsistent(ctx context.Context, s session.Session, corrupt *driver.CorruptLog, id string, versioned bool) (repairRead, error) {
	for i := 0; ; i++ {
		var r repairRead
		var err error
		if versioned {
			if r.version, err = session.Version(ctx, s); err != nil {
				return r, fmt.Errorf("reading the history's version: %w", err)
			}
		}
		corrupt.Reset(id)
		if r.items, err = session.All(ctx, s); err != nil {
			return r, err
		}
		r.bad = corrupt.Reports(id)
		if !versioned {
			return r, nil
		}
		again, err := session.Version(ctx, s)
		if err != nil {
			return r, fmt.Errorf("reading the history's version: %w", err)
		}
		if again == r.version {
			return r, nil
		}
		if i+1 == repairAttempts {
			return r, fmt.Errorf("%w: session %s changed during each of %d reads (a writer is appending; run repair again when it pauses)", session.ErrHistoryChanged, quoteID(id), repairAttempts)
		}
		if err := pause(ctx, i); err != nil {
			return r, err
		}
	}
}

// pause waits a little longer at each retry, so that a writer's burst can
// pass.
func pause(ctx context.Context, attempt int) error {
	t := time.NewTimer(time.Duration(5*(attempt+1)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// runRepair takes a session's orphan and duplicate outputs (and, with
// -drop-unanswered, its unanswered calls) and its unreadable records out
// of it, so the conversation works again, and moves them to a quarantine
// session, so nothing is lost.
//
// Without -apply it prints the exact change and opens the store
// read-only. With -apply it writes a backup file of everything it read,
// then the quarantine batch (one atomic append), then replaces the
// session's history only if it is unchanged since it was read
// (session.ReplaceIf), so that an agent appending beside it loses
// nothing: when the history changed, repair reads and plans again, a few
// times, then gives up saying so. The two writes cannot be one
// transaction across sessions; the order makes a crash between them
// harmless: the session is still whole, the quarantine holds copies marked
// with the repair id (a digest of what is removed and the history up to
// it), and running repair again finds them, writes nothing twice, and
// finishes the replace.
//
// A session without the versioned-replace capability cannot be replaced
// safely beside a writer: -apply refuses it unless -offline says no writer
// runs.
func runRepair(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "repair", "URL SESSION_ID")
	sf := addStoreFlags(fs)
	keysFile := addKeysFlag(fs)
	apply := fs.Bool("apply", false, "apply the change (default: print it and change nothing)")
	dry := fs.Bool("dry-run", false, "print the change and change nothing (the default)")
	offline := fs.Bool("offline", false, "with -apply, on a store without the versioned-replace capability: replace the history unconditionally; you assert that nothing writes to the session meanwhile")
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
	if *offline && !*apply {
		return usagef("-offline goes with -apply")
	}
	dsn, id := pos[0], pos[1]
	if *qid == "" {
		*qid = id + quarantineSuffix
	}
	if *qid == id {
		return usagef("-quarantine must name another session")
	}
	if why := volatile(dsn); *apply && why != "" {
		return usagef("refusing repair -apply on %s: %s, so the repaired history and its quarantine would vanish with it; repair the store that keeps the session", redactDSN(dsn), why)
	}
	keys, err := loadKeys(*keysFile)
	if err != nil {
		return err
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
	s, err := keys.session(st, id)
	if err != nil {
		return err
	}
	versioned := session.Probe(s).Has(session.CapVersionedReplace)
	if *apply && !versioned && !*offline {
		return fmt.Errorf("refusing repair -apply: %s cannot replace a history only if it is unchanged (its sessions lack the versioned-replace capability), so an agent's append during the repair would be lost; stop every writer of session %s and add -offline, or wait for the store's adapter to gain it; nothing changed", redactDSN(dsn), quoteID(id))
	}
	rep := repairReport{Store: redactDSN(dsn), SessionID: id, QuarantineSession: *qid}
	var q session.Session
	written := "" // the repair id whose records this run appended to the quarantine
	var writtenVersion string
	var heldBefore []session.Item
	// giveUp is the end of a run beside a writer too busy to let it
	// finish: it withdraws the quarantine records this run wrote (they
	// copy items the session still holds), so that the next run, whose
	// problems and repair id may differ, writes no second copy.
	giveUp := func(err error) error {
		if written == "" {
			return fmt.Errorf("%w; nothing changed", err)
		}
		if werr := withdraw(ctx, q, writtenVersion, heldBefore); werr != nil {
			return fmt.Errorf("%w; the quarantine %s holds copies of what the last attempt would remove (repair id %s: %v), which a later run with the same problems reuses", err, quoteID(*qid), written, werr)
		}
		return fmt.Errorf("%w; nothing changed (the quarantine records this run wrote were withdrawn)", err)
	}
	for attempt := 1; ; attempt++ {
		e.setStatus("reading session %s; nothing changed", quoteID(id))
		r, err := readConsistent(ctx, s, corrupt, id, versioned && *apply)
		if errors.Is(err, session.ErrHistoryChanged) {
			return giveUp(err)
		}
		if err != nil {
			return err
		}
		items, bad := r.items, r.bad
		if attempt == 1 && len(items) == 0 && len(bad) == 0 {
			canList, err := requireListed(ctx, st, id, dsn)
			if err != nil {
				return err
			}
			if !canList && !*sf.json {
				fmt.Fprintf(e.stdout, "session %s reads as empty %s\n", quoteID(id), cannotListNote)
			}
		}
		if n := countEnvelopes(items); n > 0 && keys.opts == nil {
			return fmt.Errorf("session %s holds %s, whose calls and outputs repair cannot see: %s; nothing changed", quoteID(id), plural(n, "encrypted item", "encrypted items"), keysHint)
		}
		fixed, removed := plan(items, *unanswered)
		rid := repairID(id, items, removed, bad)
		rep.RepairID, rep.ItemsBefore, rep.ItemsAfter = rid, len(items), len(fixed)
		rep.Removed, rep.UnreadableRecords, rep.AlreadyQuarantined = removed, toCorruptJSONs(bad), false
		printPlan := func() {
			if *sf.json {
				return
			}
			for _, r := range removed {
				fmt.Fprintf(e.stdout, "move item %d (%s) to %s: %s\n", r.Index, r.Reason, quoteID(*qid), sanitize(truncate(string(r.Item), *width)))
			}
			for _, r := range bad {
				fmt.Fprintf(e.stdout, "move unreadable record at %s (%d bytes, kept exactly) to %s: %s\n", sanitize(r.Position), len(r.Raw), quoteID(*qid), quoteRaw(r.Raw, *width))
			}
		}
		if written != "" && written != rid {
			// The previous attempt's plan is not this one: take its records
			// out of the quarantine again (they copy items the session still
			// holds), so that the quarantine holds each removed item once.
			if err := withdraw(ctx, q, writtenVersion, heldBefore); err != nil {
				return fmt.Errorf("session %s changed while repairing and its problems with it; the quarantine %s holds copies from the attempt that was not applied (repair id %s), which could not be withdrawn: %w; the session is unchanged, nothing lost", quoteID(id), quoteID(*qid), written, err)
			}
			written = ""
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
			printPlan()
			fmt.Fprintf(e.stdout, "dry run: %d of %d items would remain; %s would go to %s; nothing changed (add -apply to apply)\n",
				len(fixed), len(items), plural(len(records), "record", "records"), quoteID(*qid))
			return nil
		}

		if q == nil {
			if q, err = keys.session(st, *qid); err != nil {
				return fmt.Errorf("quarantine session %s: %w (nothing changed)", quoteID(*qid), err)
			}
		}
		held, qVersion, err := readQuarantine(ctx, q, corrupt, *qid)
		if err != nil {
			return err
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
			if *backup == "" {
				*backup = fmt.Sprintf("sessionctl-repair-%d.jsonl", time.Now().UnixNano())
			}
			// A retry rewrites the backup it wrote: it holds what the
			// attempt that is applied read.
			backupItems := items
			if keys.opts != nil {
				// The backup holds what is stored, envelopes as they are:
				// the plaintext never reaches the disk.
				if backupItems, err = storedItems(ctx, st, id); err != nil {
					return fmt.Errorf("backup: reading the stored envelopes: %w (nothing changed)", err)
				}
			}
			if err := writeBackup(*backup, id, backupItems, bad, rep.Backup != ""); err != nil {
				return fmt.Errorf("backup: %w (nothing changed)", err)
			}
			rep.Backup = *backup
		}
		switch {
		case have == len(records):
			// An earlier run (or attempt) wrote the quarantine and stopped
			// before the replace: the copies are there, write them no second
			// time.
			rep.AlreadyQuarantined = written != rid
		case have == 0:
			e.setStatus("writing the quarantine session %s; session %s unchanged", quoteID(*qid), quoteID(id))
			if err := session.Append(ctx, q, records); err != nil {
				return fmt.Errorf("quarantine session %s: %w (nothing changed)", quoteID(*qid), err)
			}
			written, heldBefore, writtenVersion = rid, held, ""
			if qVersion != "" {
				// The version that holds exactly held and these records, for
				// withdrawing them should the plan change.
				writtenVersion = quarantineVersionAfter(ctx, q, corrupt, *qid, append(append([]session.Item(nil), held...), records...))
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
		created := sessionCreated(ctx, st, id)
		if repairHookBeforeReplace != nil {
			repairHookBeforeReplace(attempt)
		}
		if versioned {
			err = session.ReplaceIf(ctx, s, r.version, fixed)
		} else {
			err = replaceOffline(ctx, s, corrupt, id, items, bad, fixed)
		}
		if errors.Is(err, session.ErrHistoryChanged) {
			if attempt < repairAttempts {
				if err := pause(ctx, attempt); err != nil {
					return err
				}
				continue
			}
			return giveUp(fmt.Errorf("session %s changed before each of %d replaces (a writer is appending; run repair -apply again when it pauses): it is unchanged, nothing lost", quoteID(id), repairAttempts))
		}
		if err != nil {
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
		printPlan()
		note := ""
		if rep.AlreadyQuarantined {
			note = " (written by an earlier run that stopped before the replace)"
		}
		retried := ""
		if attempt > 1 {
			retried = fmt.Sprintf(" (attempt %d: a writer changed the session before the earlier ones)", attempt)
		}
		fmt.Fprintf(e.stdout, "session %s repaired%s: %d of %d items remain; %s in %s%s, repair id %s",
			quoteID(id), retried, len(fixed), len(items), plural(len(records), "record", "records"), quoteID(*qid), note, rid)
		if rep.Backup != "" {
			fmt.Fprintf(e.stdout, "; backup at %s", rep.Backup)
		}
		fmt.Fprintln(e.stdout)
		return nil
	}
}

// storedItems reads session id of st as it is stored, without the
// keyring: an encrypted session's envelopes.
func storedItems(ctx context.Context, st adapters.Store, id string) ([]session.Item, error) {
	s, err := st.Session(id)
	if err != nil {
		return nil, err
	}
	return session.All(ctx, s)
}

// readQuarantine reads the quarantine session and, when it has one, its
// version (consistent with what was read). A quarantine with unreadable
// records is read all the same; its version is then "" (repair never
// rewrites it).
func readQuarantine(ctx context.Context, q session.Session, corrupt *driver.CorruptLog, qid string) ([]session.Item, string, error) {
	versioned := session.Probe(q).Has(session.CapVersionedReplace)
	r, err := readConsistent(ctx, q, corrupt, qid, versioned)
	if err != nil {
		return nil, "", fmt.Errorf("quarantine session %s: %w (nothing changed)", quoteID(qid), err)
	}
	if len(r.bad) > 0 {
		r.version = ""
	}
	return r.items, r.version, nil
}

// quarantineVersionAfter returns the quarantine's version if it holds
// exactly want, and "" otherwise (someone else wrote to it too: repair
// then never takes anything out of it).
func quarantineVersionAfter(ctx context.Context, q session.Session, corrupt *driver.CorruptLog, qid string, want []session.Item) string {
	r, err := readConsistent(ctx, q, corrupt, qid, true)
	if err != nil || len(r.bad) > 0 || !sameItems(r.items, want) {
		return ""
	}
	return r.version
}

// withdraw puts the quarantine back to before, if it is still at version
// (holding before and one attempt's records, nothing else).
func withdraw(ctx context.Context, q session.Session, version string, before []session.Item) error {
	if version == "" {
		return errors.New("the quarantine cannot be rewritten conditionally, or someone else wrote to it")
	}
	return session.ReplaceIf(ctx, q, version, before)
}

// replaceOffline is -offline's replace, on a session without the
// versioned-replace capability: it reads the history again and replaces it
// if it is what was read, which narrows but cannot close the window in
// which a writer's append is lost (the operator asserted there is none).
func replaceOffline(ctx context.Context, s session.Session, corrupt *driver.CorruptLog, id string, items []session.Item, bad []driver.CorruptRecord, fixed []session.Item) error {
	corrupt.Reset(id)
	again, err := session.All(ctx, s)
	if err != nil {
		return fmt.Errorf("re-read: %w", err)
	}
	if !sameItems(items, again) || !sameRaw(bad, corrupt.Reports(id)) {
		return fmt.Errorf("%w (-offline, yet something wrote to it)", session.ErrHistoryChanged)
	}
	return session.Replace(ctx, s, fixed)
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

// repairID is a digest of what repair removes and where: the session id,
// the history up to the last item removed, each removal's index and
// reason, and every unreadable record. Two runs over a session that only
// grew past the last removed item share it, so that a run after a crash,
// or a retry after a writer's append, finds the copies an earlier one
// wrote to the quarantine.
func repairID(id string, items []session.Item, removed []removal, bad []driver.CorruptRecord) string {
	h := sha256.New()
	put := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	put([]byte(id))
	last := -1
	if len(removed) > 0 {
		last = removed[len(removed)-1].Index
	}
	for _, it := range items[:last+1] {
		put(it.Bytes())
	}
	for _, r := range removed {
		put([]byte(fmt.Sprintf("%d %s", r.Index, r.Reason)))
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
//
// It never overwrites a file, except with replace, its own earlier backup
// (a retry's), which it replaces whole (a new file renamed over it).
func writeBackup(path, id string, items []session.Item, bad []driver.CorruptRecord, replace bool) error {
	target := path
	if replace {
		path += ".tmp"
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if replace {
		defer func() {
			if _, err := os.Stat(path); err == nil {
				_ = os.Remove(path)
			}
		}()
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
	if err := f.Close(); err != nil {
		return err
	}
	if replace {
		return os.Rename(path, target)
	}
	return nil
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
