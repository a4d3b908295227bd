package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// runRepair rewrites one session without its severe problems. It writes a
// backup of everything it read (valid items and corrupt records' raw bytes)
// first, so nothing is lost, and replaces the history in one step
// (atomically on stores with the replace capability). Run it while no agent
// writes to the session: it re-reads the history just before replacing and
// refuses if it changed, but cannot fence a writer racing that last moment.
func runRepair(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "repair", "URL SESSION_ID")
	dry := fs.Bool("dry-run", false, "print what would be removed and change nothing")
	unanswered := fs.Bool("drop-unanswered", false, "also drop calls that never got an output (and the reasoning before them)")
	backup := fs.String("backup", "", "write the history as read to this JSON-lines file (default: sessionctl-repair-<time>.jsonl)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want a store URL and a session id")
	}
	st, corrupt, err := openStore(ctx, pos[0])
	if err != nil {
		return err
	}
	defer st.Close()
	id := pos[1]
	s, err := st.Session(id)
	if err != nil {
		return err
	}
	items, err := session.All(ctx, s)
	if err != nil {
		return err
	}
	bad := corrupt.Reports(id)
	fixed, removed := history.RepairHistory(items, *unanswered)
	for _, p := range removed {
		fmt.Fprintf(e.stdout, "remove item %d: %s (%s %s)\n", p.Index, p.Kind, p.Key.Type, p.Key.ID)
	}
	for _, r := range bad {
		fmt.Fprintf(e.stdout, "remove corrupt record at %s (%d bytes, kept in the backup)\n", r.Position, len(r.Raw))
	}
	if len(removed) == 0 && len(bad) == 0 {
		fmt.Fprintf(e.stdout, "session %q: nothing to repair\n", id)
		return nil
	}
	if *dry {
		fmt.Fprintf(e.stdout, "dry run: %d of %d items would remain\n", len(fixed), len(items))
		return nil
	}
	path := *backup
	if path == "" {
		path = fmt.Sprintf("sessionctl-repair-%d.jsonl", time.Now().UnixNano())
	}
	if err := writeBackup(path, id, items, bad); err != nil {
		return fmt.Errorf("backup: %w (nothing changed)", err)
	}
	again, err := session.All(ctx, s)
	if err != nil {
		return err
	}
	if !sameItems(items, again) {
		return fmt.Errorf("session %q changed while repairing; nothing changed, run repair again when no agent writes to it", id)
	}
	if err := session.Replace(ctx, s, fixed); err != nil {
		return fmt.Errorf("replace: %w (the backup is at %s)", err, path)
	}
	fmt.Fprintf(e.stdout, "session %q repaired: %d of %d items remain; backup at %s\n", id, len(fixed), len(items), path)
	return nil
}

func writeBackup(path, id string, items []session.Item, bad []driver.CorruptRecord) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for i, it := range items {
		if err := enc.Encode(map[string]any{"session_id": id, "index": i, "item": it}); err != nil {
			f.Close()
			return err
		}
	}
	for _, r := range bad {
		if err := enc.Encode(map[string]any{"session_id": id, "corrupt_position": r.Position, "raw": string(r.Raw)}); err != nil {
			f.Close()
			return err
		}
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
