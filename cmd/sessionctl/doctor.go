package main

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

func init() {
	commands["doctor"] = command{"diagnose every session (read-only): orphan outputs, duplicate outputs, unanswered calls, corrupt records, checkpoints' pending writes", runDoctor}
	commands["repair"] = command{"move orphan outputs and unreadable records of a session to a quarantine session (-apply; default: show the change)", runRepair}
}

// problemJSON is one finding of history.Diagnose in the -json outputs.
type problemJSON struct {
	Index    int    `json:"index"`
	Kind     string `json:"kind"`
	Severe   bool   `json:"severe"`
	CallType string `json:"call_type"`
	CallID   string `json:"call_id"`
}

func toProblemJSON(ps []history.Problem) []problemJSON {
	out := make([]problemJSON, len(ps))
	for i, p := range ps {
		out[i] = problemJSON{p.Index, string(p.Kind), isSevere(p.Kind), p.Key.Type, p.Key.ID}
	}
	return out
}

// doctorSession is one session's findings in doctor's -json output.
type doctorSession struct {
	SessionID      string        `json:"session_id"`
	Items          int           `json:"items"`
	Problems       []problemJSON `json:"problems"`
	CorruptRecords []corruptJSON `json:"corrupt_records"`
	// Checkpoints are the findings about the session's run-state
	// checkpoints (what the next resume does with each pending write).
	Checkpoints []checkpointFinding `json:"checkpoints"`
	// Encrypted counts the envelopes read without a key: the session was
	// not diagnosed.
	Encrypted int    `json:"encrypted_items,omitempty"`
	Error     string `json:"error,omitempty"`
}

// doctorReport is doctor's -json output.
type doctorReport struct {
	Store              string `json:"store"`
	SessionsChecked    int    `json:"sessions_checked"`
	SessionsWithErrors int    `json:"sessions_with_errors"`
	SessionsUnreadable int    `json:"sessions_unreadable"`
	// SessionsNotDiagnosed are sessions holding encrypted items read
	// without a key (EncryptedItems in all); exit status 1.
	SessionsNotDiagnosed int `json:"sessions_not_diagnosed"`
	EncryptedItems       int `json:"encrypted_items"`
	// SessionsNeedingOperator are sessions with claimed calls in doubt
	// (findings claims-in-doubt): not errors, but only an operator can
	// resolve them.
	SessionsNeedingOperator int             `json:"sessions_needing_operator"`
	Sessions                []doctorSession `json:"sessions"` // only those with findings
}

// runDoctor diagnoses every session (or those named) and reports them all:
// a session that cannot be read is one finding, not the end of the run.
func runDoctor(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "doctor", "URL")
	sf := addStoreFlags(fs)
	keysFile := addKeysFlag(fs)
	var ids multiFlag
	fs.Var(&ids, "session", "diagnose this session (repeatable; default: every session the store lists)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	keys, err := loadKeys(*keysFile)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one store URL")
	}
	dsn := pos[0]
	e.setStatus("opening %s read-only; nothing changed", redactDSN(dsn))
	st, corrupt, err := openStore(ctx, dsn, readOnly, *sf.connectTimeout)
	if err != nil {
		return err
	}
	defer st.Close()
	list, total, listed, err := doctorSessions(ctx, st, dsn, ids)
	if err != nil {
		return err
	}
	rep := doctorReport{Store: redactDSN(dsn), Sessions: []doctorSession{}}
	p := newProgress(e, "diagnosed", total)
	i := -1
	for id, err := range list {
		i++
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			p.done()
			return err
		}
		e.setStatus("%d of %d sessions diagnosed, %d with errors so far; nothing changed (doctor is read-only)", i, total, rep.SessionsWithErrors)
		ds := doctorSession{SessionID: id, Problems: []problemJSON{}, CorruptRecords: []corruptJSON{}, Checkpoints: []checkpointFinding{}}
		var items []session.Item
		s, serr := keys.session(st, id)
		err := serr
		if err == nil {
			items, err = session.All(ctx, s)
		}
		if err != nil && ctx.Err() != nil {
			p.done()
			return ctx.Err()
		}
		severe := 0
		if err != nil {
			ds.Error = err.Error()
			rep.SessionsUnreadable++
			severe++
			if !*sf.json {
				p.printf("error: session %s: cannot read: %s", quoteID(id), oneLine(err.Error()))
			}
		}
		ds.Items = len(items)
		if n := countEnvelopes(items); n > 0 {
			// Without the key an envelope's call or output is invisible: a
			// diagnosis of the rest would pass what it cannot see.
			ds.Encrypted = n
			rep.SessionsNotDiagnosed++
			rep.EncryptedItems += n
			if !*sf.json {
				p.printf("error: session %s: %s not diagnosed; %s", quoteID(id), plural(n, "encrypted item", "encrypted items"), keysHint)
			}
			items = nil
		}
		problems := history.Diagnose(items)
		ds.Problems = toProblemJSON(problems)
		for _, pr := range problems {
			tag := "warning"
			if pr.Kind.Severe() {
				tag, severe = "error", severe+1
			}
			if !*sf.json {
				p.printf("%s: session %s item %d: %s (%s %s)", tag, quoteID(id), pr.Index, pr.Kind, sanitize(pr.Key.Type), sanitize(pr.Key.ID))
			}
		}
		bad := corrupt.Reports(id)
		ds.CorruptRecords = toCorruptJSONs(bad)
		for _, r := range bad {
			severe++
			if !*sf.json {
				p.printf("error: session %s: unreadable record at %s (%d bytes, left in the store): %s", quoteID(id), sanitize(r.Position), len(r.Raw), oneLine(fmt.Sprint(r.Err)))
			}
		}
		if listed != nil && !listed[id] && len(items) == 0 && len(bad) == 0 && err == nil && !hasCheckpoints(ctx, s) {
			ds.Error = errNoSuchSession.Error()
			severe++
			if !*sf.json {
				p.printf("error: session %s: no such session (the store does not list it)", quoteID(id))
			}
		}
		if serr == nil {
			// After the corrupt-record reports are taken: the tail reads
			// below may report the same records again.
			fs, err := diagnoseCheckpoints(ctx, s)
			if err != nil {
				p.done()
				return err
			}
			ds.Checkpoints = fs
			if needsOperator(fs) {
				rep.SessionsNeedingOperator++
			}
			for _, f := range fs {
				if f.Severe {
					severe++
				}
				if !*sf.json {
					if f.Checkpoint == "" {
						p.printf("%s: session %s: %s", f.Severity, quoteID(id), oneLine(f.Message))
					} else {
						p.printf("%s: session %s checkpoint %s (version %d): %s", f.Severity, quoteID(id), quoteID(f.Checkpoint), f.Version, oneLine(f.Message))
					}
				}
			}
		}
		if severe > 0 {
			rep.SessionsWithErrors++
		}
		if severe > 0 || len(problems) > 0 || len(ds.Checkpoints) > 0 || ds.Encrypted > 0 {
			rep.Sessions = append(rep.Sessions, ds)
		}
		rep.SessionsChecked++
		p.step(i + 1)
	}
	p.done()
	if *sf.json {
		if err := writeJSON(e, rep); err != nil {
			return err
		}
	} else {
		if rep.SessionsNotDiagnosed > 0 {
			fmt.Fprintf(e.stdout, "%s read, %d diagnosed, %d with errors; %d not diagnosed: %s (%s)",
				plural(rep.SessionsChecked, "session", "sessions"), rep.SessionsChecked-rep.SessionsNotDiagnosed, rep.SessionsWithErrors,
				rep.SessionsNotDiagnosed, plural(rep.EncryptedItems, "encrypted item", "encrypted items"), keysHint)
		} else {
			fmt.Fprintf(e.stdout, "%s checked, %d with errors", plural(rep.SessionsChecked, "session", "sessions"), rep.SessionsWithErrors)
		}
		if rep.SessionsUnreadable > 0 {
			fmt.Fprintf(e.stdout, " (%d could not be read)", rep.SessionsUnreadable)
		}
		if rep.SessionsNeedingOperator > 0 {
			fmt.Fprintf(e.stdout, ", %d needing an operator (claimed calls in doubt)", rep.SessionsNeedingOperator)
		}
		fmt.Fprintln(e.stdout)
	}
	if rep.SessionsWithErrors > 0 || rep.SessionsNotDiagnosed > 0 {
		return errFailed
	}
	return nil
}

// doctorSessions returns the sessions doctor diagnoses and how many: ids
// when given, else every session st lists, read a page at a time (in the
// order ListSessions gives; counted first by a pass over the pages, for
// the progress line). listed, when ids are given and st can list its
// sessions, holds those of ids st lists.
func doctorSessions(ctx context.Context, st adapters.Store, dsn string, ids []string) (list iter.Seq2[string, error], total int, listed map[string]bool, err error) {
	page, canList, err := orderedPager(ctx, st, dsn)
	if len(ids) > 0 {
		if canList {
			if err != nil {
				return nil, 0, nil, fmt.Errorf("listing the sessions of %s: %w", redactDSN(dsn), err)
			}
			listed = map[string]bool{}
			named := map[string]bool{}
			for _, id := range ids {
				named[id] = true
			}
			for id, err := range eachListed(page) {
				if err != nil {
					return nil, 0, nil, fmt.Errorf("listing the sessions of %s: %w", redactDSN(dsn), err)
				}
				if named[id] {
					listed[id] = true
				}
			}
		}
		return func(yield func(string, error) bool) {
			for _, id := range ids {
				if !yield(id, nil) {
					return
				}
			}
		}, len(ids), listed, nil
	}
	if !canList {
		return nil, 0, nil, fmt.Errorf("%s cannot list its sessions: name them with --session", redactDSN(dsn))
	}
	if err != nil {
		return nil, 0, nil, err
	}
	for _, err := range eachListed(page) {
		if err != nil {
			return nil, 0, nil, err
		}
		total++
	}
	return eachListed(page), total, nil, nil
}

// writeJSON prints v as one indented JSON document.
func writeJSON(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// quoteID writes a session id for a terminal: quoted, control characters
// escaped.
func quoteID(id string) string { return `"` + sanitize(id) + `"` }

// hasCheckpoints reports whether s keeps a checkpoint (a session that the
// store does not list, having no items, may still have one).
func hasCheckpoints(ctx context.Context, s session.Session) bool {
	cps, _, err := readCheckpoints(ctx, s)
	return err != nil || len(cps) > 0
}
