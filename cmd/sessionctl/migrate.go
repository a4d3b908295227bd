package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

func init() {
	commands["migrate"] = command{"copy sessions and their checkpoints between stores or layouts, atomically per session, resumable", runMigrate}
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
	offline := fs.Bool("offline", false, "on a destination without the versioned-replace capability: write each session unconditionally; you assert that nothing writes to the destination meanwhile")
	keysFile := addKeysFlag(fs)
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
	if why := volatile(*to); why != "" {
		return usagef("refusing --to %s: %s, so the copy would vanish with it; migrate to a store that keeps what it is given", redactDSN(*to), why)
	}
	keys, err := loadKeys(*keysFile)
	if err != nil {
		return err
	}
	e.setStatus("opening the stores; nothing copied")
	src, corrupt, err := openStore(ctx, *from, readOnly, *sf.connectTimeout)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer src.Close()
	dst, dstCorrupt, err := openStore(ctx, *to, create, *sf.connectTimeout)
	if err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	defer dst.Close()
	list, err := sessionIDs(ctx, src, ids, *from)
	if err != nil {
		return err
	}
	if !dst.Declared().Has(session.CapVersionedReplace) && !*offline {
		return fmt.Errorf("refusing to write to %s: its sessions cannot replace a history only if it is unchanged (no versioned-replace capability), so an append made there during the copy would be lost; stop every writer of the destination and add -offline; nothing copied", redactDSN(*to))
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
		res, cpres, err := migrateOne(ctx, migration{src: src, dst: dst, dstCorrupt: dstCorrupt, keys: keys, overwrite: *overwrite, offline: *offline}, id)
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
			rep.CheckpointsPresent += cpres.present
		default:
			rep.Copied++
			rep.CheckpointsCopied += cpres.copied
			rep.CheckpointsPresent += cpres.present
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
		fmt.Fprintf(e.stdout, "%s: %d copied, %d already present, %d failed; %s: %d copied, %d already present\n",
			plural(len(list), "session", "sessions"), rep.Copied, rep.AlreadyPresent, len(rep.Failures),
			plural(rep.CheckpointsCopied+rep.CheckpointsPresent, "checkpoint", "checkpoints"), rep.CheckpointsCopied, rep.CheckpointsPresent)
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
	// CheckpointsCopied and CheckpointsPresent count the checkpoints of
	// the sessions copied or already present: saved at the destination by
	// this run, or found there byte for byte. A failed session's are not
	// counted.
	CheckpointsCopied  int `json:"checkpoints_copied"`
	CheckpointsPresent int `json:"checkpoints_already_present"`
}

// migrateFailure is a session migrate could not copy.
type migrateFailure struct {
	SessionID string `json:"session_id"`
	Error     string `json:"error"`
}

// migrateHookAfterWrite, when set (by tests), runs after a session's copy
// is written and before the source is checked again: a test appends to
// the source there, as a live writer would.
var migrateHookAfterWrite func(id string)

// migration is what migrateOne needs of a migrate run.
type migration struct {
	src, dst           adapters.Store
	dstCorrupt         *driver.CorruptLog
	keys               keyring
	overwrite, offline bool
}

// errSourceChanged reports a source session that changed while it was
// copied: the copy holds the history as read.
var errSourceChanged = errors.New("the source changed during the copy")

// migrateOne copies one session. The source is only read: its version
// (where it has one) is read before and after the copy, and a change means
// an append made during the copy is not in it (errSourceChanged; a rerun
// copies it). The destination is written with a conditional replace
// (session.ReplaceIf) against the version of what was read there, so that
// a writer of the destination loses nothing; a destination without the
// capability is written unconditionally only with -offline.
//
// The session's checkpoints go with it (planCheckpoints), their documents
// byte for byte: a destination that cannot keep them, or that holds a
// different checkpoint under one of their names, is refused before
// anything is written.
func migrateOne(ctx context.Context, m migration, id string) (string, cpResult, error) {
	var cpres cpResult
	s, err := m.keys.session(m.src, id)
	if err != nil {
		return "", cpres, err
	}
	d, err := m.keys.session(m.dst, id)
	if err != nil {
		return "", cpres, err
	}
	cpc, err := planCheckpoints(ctx, m, id)
	if err != nil {
		return "", cpres, err
	}
	srcVersioned := session.Probe(s).Has(session.CapVersionedReplace)
	dstVersioned := session.Probe(d).Has(session.CapVersionedReplace)
	if !dstVersioned && !m.offline {
		return "", cpres, errors.New("the destination cannot replace a history only if it is unchanged (no versioned-replace capability), so an append made there during the copy would be lost; stop every writer of the destination and add -offline; nothing written")
	}
	var before string
	if srcVersioned {
		if before, err = session.Version(ctx, s); err != nil {
			return "", cpres, fmt.Errorf("read the source's version: %w", err)
		}
	}
	items, err := session.All(ctx, s)
	if err != nil {
		return "", cpres, fmt.Errorf("read: %w", err)
	}
	dr, err := readConsistent(ctx, d, m.dstCorrupt, id, dstVersioned)
	if err != nil {
		return "", cpres, fmt.Errorf("read destination: %w", err)
	}
	have := dr.items
	res := "copied"
	switch {
	case sameItems(items, have) && len(dr.bad) == 0:
		res = "skipped"
	case len(have) > 0 && !m.overwrite && !(len(dr.bad) == 0 && isPrefix(have, items)):
		// A destination holding a prefix of the source is an earlier copy
		// the source has grown past: completing it overwrites nothing.
		return "", cpres, fmt.Errorf("the destination holds %s that differ from the source; use --overwrite to replace them", plural(len(have), "item", "items"))
	case dstVersioned:
		if err := session.ReplaceIf(ctx, d, dr.version, items); errors.Is(err, session.ErrHistoryChanged) {
			return "", cpres, errors.New("the destination session changed while it was being written (something writes to it): nothing written; run migrate again")
		} else if err != nil {
			return "", cpres, fmt.Errorf("write: %w", err)
		}
	default:
		if err := session.Replace(ctx, d, items); err != nil {
			return "", cpres, fmt.Errorf("write: %w", err)
		}
	}
	if cpres, err = cpc.save(ctx); err != nil {
		return "", cpres, err
	}
	if res == "skipped" && cpres.copied > 0 {
		res = "copied"
	}
	if migrateHookAfterWrite != nil {
		migrateHookAfterWrite(id)
	}
	// Both checks run: a checkpoint that moved has its copies deleted
	// again even when the history moved too.
	errItems := sourceUnchanged(ctx, s, srcVersioned, before, items)
	if err := cpc.sourceUnchanged(ctx); err != nil && errItems == nil {
		errItems = err
	}
	if errItems != nil {
		return "", cpres, errItems
	}
	return res, cpres, copyTimes(ctx, m.src, m.dst, id)
}

// sourceUnchanged reports errSourceChanged when the source session is not
// what was copied any more: its version moved, or, without versions, a
// second read differs.
func sourceUnchanged(ctx context.Context, s session.Session, versioned bool, before string, items []session.Item) error {
	changed := false
	if versioned {
		after, err := session.Version(ctx, s)
		if err != nil {
			return fmt.Errorf("read the source's version after the copy: %w", err)
		}
		changed = after != before
	} else {
		again, err := session.All(ctx, s)
		if err != nil {
			return fmt.Errorf("read the source again after the copy: %w", err)
		}
		changed = !sameItems(items, again)
	}
	if changed {
		return fmt.Errorf("%w: the destination holds the %s read; what was written to the source since is not copied (run migrate again to copy it)", errSourceChanged, plural(len(items), "item", "items"))
	}
	return nil
}

// isPrefix reports whether a is a prefix of b.
func isPrefix(a, b []session.Item) bool {
	return len(a) <= len(b) && sameItems(a, b[:len(a)])
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
