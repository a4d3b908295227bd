package main

import (
	"context"
	"fmt"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
)

func init() {
	commands["migrate"] = command{"copy sessions between stores or layouts, atomically per session, resumable", runMigrate}
}

// runMigrate copies sessions from one store to another. Each session lands
// with one atomic replace (every adapter has the replace capability), so it
// is either fully present at the destination or not at all; a session whose
// destination already holds exactly the source's items is skipped, which
// makes an interrupted migration resumable by running it again. A
// destination session holding other items is refused unless --overwrite.
func runMigrate(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "migrate", "--from URL --to URL [--session ID…]")
	sf := addStoreFlags(fs)
	from := fs.String("from", "", "source store URL (opened read-only)")
	to := fs.String("to", "", "destination store URL")
	overwrite := fs.Bool("overwrite", false, "replace destination sessions that hold different items")
	var ids multiFlag
	fs.Var(&ids, "session", "migrate this session (repeatable; default: every session the source lists)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("unexpected arguments %q (use --from, --to and --session)", pos)
	}
	if *from == "" || *to == "" {
		return usagef("both --from and --to are required")
	}
	e.setStatus("opening the stores; nothing copied")
	src, corrupt, err := openStore(ctx, *from, readOnly, *sf.connectTimeout)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer src.Close()
	dst, _, err := openStore(ctx, *to, readWrite, *sf.connectTimeout)
	if err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	defer dst.Close()
	list, err := sessionIDs(ctx, src, ids, *from)
	if err != nil {
		return err
	}
	if !dst.Declared().Has(session.CapReplace) {
		fmt.Fprintf(e.stderr, "warning: %s has no atomic replace; a session interrupted mid-copy may be partial until migrate runs again\n", redactDSN(*to))
	}
	p := newProgress(e, "done", len(list))
	rep := migrateReport{From: redactDSN(*from), To: redactDSN(*to), Sessions: len(list), Failures: []migrateFailure{}, Unreadable: []corruptJSON{}}
	for i, id := range list {
		if err := ctx.Err(); err != nil {
			p.done()
			return err
		}
		e.setStatus("%d of %d sessions done (%d copied, %d already present, %d failed); each session is copied whole or not at all: run migrate again to resume",
			i, len(list), rep.Copied, rep.AlreadyPresent, len(rep.Failures))
		res, err := migrateOne(ctx, src, dst, id, *overwrite)
		bad := corrupt.Reports(id)
		switch {
		case err != nil && ctx.Err() != nil:
			p.done()
			return ctx.Err()
		case err != nil:
			rep.Failures = append(rep.Failures, migrateFailure{id, err.Error()})
			p.logf("session %s: %s", quoteID(id), oneLine(err.Error()))
		case len(bad) > 0:
			// The readable items were copied, but the session is not whole
			// in the destination: it fails, this run and every rerun, until
			// the source is repaired, and is never "already present".
			msg := fmt.Sprintf("%s not copied (left in the source; sessionctl repair quarantines them)", plural(len(bad), "unreadable record", "unreadable records"))
			rep.Failures = append(rep.Failures, migrateFailure{id, msg})
		case res == "skipped":
			rep.AlreadyPresent++
		default:
			rep.Copied++
		}
		if len(bad) > 0 {
			rep.Unreadable = append(rep.Unreadable, toCorruptJSONs(bad)...)
			for _, r := range bad {
				p.logf("session %s: unreadable record at %s (%d bytes) left in the source, not copied: %s", quoteID(id), sanitize(r.Position), len(r.Raw), quoteRaw(r.Raw, 120))
			}
		}
		p.step(i + 1)
	}
	p.done()
	if *sf.json {
		if err := writeJSON(e, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "%s: %d copied, %d already present, %d failed\n",
			plural(len(list), "session", "sessions"), rep.Copied, rep.AlreadyPresent, len(rep.Failures))
	}
	if len(rep.Failures) > 0 {
		return errFailed
	}
	return nil
}

// migrateReport is migrate's -json output.
type migrateReport struct {
	From           string           `json:"from"`
	To             string           `json:"to"`
	Sessions       int              `json:"sessions"`
	Copied         int              `json:"copied"`
	AlreadyPresent int              `json:"already_present"`
	Failures       []migrateFailure `json:"failures"`
	Unreadable     []corruptJSON    `json:"unreadable_records"` // left in the source, not copied
}

// migrateFailure is a session migrate could not copy.
type migrateFailure struct {
	SessionID string `json:"session_id"`
	Error     string `json:"error"`
}

func migrateOne(ctx context.Context, src, dst adapters.Store, id string, overwrite bool) (string, error) {
	s, err := src.Session(id)
	if err != nil {
		return "", err
	}
	d, err := dst.Session(id)
	if err != nil {
		return "", err
	}
	items, err := session.All(ctx, s)
	if err != nil {
		return "", fmt.Errorf("read: %w", err)
	}
	have, err := session.All(ctx, d)
	if err != nil {
		return "", fmt.Errorf("read destination: %w", err)
	}
	if sameItems(items, have) {
		return "skipped", copyTimes(ctx, src, dst, id)
	}
	if len(have) > 0 && !overwrite {
		return "", fmt.Errorf("the destination holds %s that differ from the source; use --overwrite to replace them", plural(len(have), "item", "items"))
	}
	if err := session.Replace(ctx, d, items); err != nil {
		return "", fmt.Errorf("write: %w", err)
	}
	return "copied", copyTimes(ctx, src, dst, id)
}

// copyTimes gives the destination's copy of session id the source's
// created_at and updated_at, where both stores keep them (a copy is the
// same conversation, not a new one). A rerun sets them again, so a session
// copied before an interruption gets them too.
func copyTimes(ctx context.Context, src, dst adapters.Store, id string) error {
	from, ok1 := src.(adapters.Timestamps)
	to, ok2 := dst.(adapters.Timestamps)
	if !ok1 || !ok2 {
		return nil
	}
	t, ok, err := from.SessionTimes(ctx, id)
	if err != nil || !ok {
		return err
	}
	if err := to.SetSessionTimes(ctx, id, t); err != nil {
		return fmt.Errorf("copy created_at/updated_at: %w", err)
	}
	return nil
}
