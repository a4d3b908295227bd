package main

import (
	"context"
	"fmt"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

func init() {
	commands["doctor"] = command{"diagnose sessions: orphan outputs, duplicate outputs, unanswered calls, corrupt records", runDoctor}
	commands["repair"] = command{"drop orphan and duplicate outputs from a session, atomically, after a backup", runRepair}
}

func runDoctor(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "doctor", "URL")
	var ids multiFlag
	fs.Var(&ids, "session", "diagnose this session (repeatable; default: every session the store lists)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one store URL")
	}
	st, corrupt, err := openStore(ctx, pos[0])
	if err != nil {
		return err
	}
	defer st.Close()
	list, err := sessionIDs(ctx, st, ids, pos[0])
	if err != nil {
		return err
	}
	sick := 0
	for _, id := range list {
		s, err := st.Session(id)
		if err != nil {
			return err
		}
		items, err := session.All(ctx, s)
		if err != nil {
			return fmt.Errorf("session %q: %w", id, err)
		}
		severe := 0
		for _, p := range history.Diagnose(items) {
			tag := "warning"
			if p.Kind.Severe() {
				tag, severe = "error", severe+1
			}
			fmt.Fprintf(e.stdout, "%s: session %q item %d: %s (%s %s)\n", tag, id, p.Index, p.Kind, p.Key.Type, p.Key.ID)
		}
		for _, r := range corrupt.Reports(id) {
			severe++
			fmt.Fprintf(e.stdout, "error: session %q: corrupt record at %s: %v\n", id, r.Position, r.Err)
		}
		if severe > 0 {
			sick++
		}
	}
	fmt.Fprintf(e.stdout, "%s checked, %d with errors\n", plural(len(list), "session", "sessions"), sick)
	if sick > 0 {
		return errFailed
	}
	return nil
}
