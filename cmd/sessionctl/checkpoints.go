package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// A checkpoint's state, as list's CHECKPOINT column and the -json outputs
// print it.
const (
	cpAbsent     = "-"          // the session has no checkpoint (or its store keeps none)
	cpNone       = "none"       // a checkpoint without a pending write
	cpPending    = "pending"    // an ordinary pending write: an append registered, landed or not
	cpHeld       = "held"       // a held write: a batch withheld from the session, awaiting approval
	cpTerminal   = "terminal"   // terminal_unrecoverable: the run is never resumed
	cpUnreadable = "unreadable" // the store could not read the document, or runstate.Load refused it
)

// cpStateOrder is the order in which list names the states of a session's
// checkpoints: the most urgent first.
var cpStateOrder = []string{cpUnreadable, cpTerminal, cpHeld, cpPending, cpNone}

// storedCheckpoint is one checkpoint a session keeps, as read (read-only)
// and loaded with runstate.Load. The document's bytes are not kept: only
// what Load made of them is ever printed.
type storedCheckpoint struct {
	name    string
	version int64
	size    int                  // the document's length in bytes
	cp      *runstate.Checkpoint // nil when unreadable
	readErr error                // LoadCheckpoint failed
	loadErr error                // runstate.Load refused the document
}

// state returns the checkpoint's state (cpNone … cpUnreadable).
func (c storedCheckpoint) state() string {
	switch {
	case c.cp == nil:
		return cpUnreadable
	case c.cp.Terminal:
		return cpTerminal
	case c.cp.Pending == nil:
		return cpNone
	case c.cp.Pending.Held:
		return cpHeld
	}
	return cpPending
}

// errText says why an unreadable checkpoint is unreadable: the store's
// error, or Load's.
func (c storedCheckpoint) errText() string {
	if c.readErr != nil {
		return "cannot read: " + c.readErr.Error()
	}
	if c.loadErr != nil {
		return c.loadErr.Error()
	}
	return ""
}

// readCheckpoints returns the checkpoints s keeps, sorted by name. ok is
// false when s does not keep checkpoints (no session.CheckpointStore). It
// only reads. A checkpoint the store cannot read, or whose document Load
// refuses, is in the list (unreadable), not an error; err is the listing's
// failure.
func readCheckpoints(ctx context.Context, s session.Session) (cps []storedCheckpoint, ok bool, err error) {
	cs, ok := s.(session.CheckpointStore)
	if !ok {
		return nil, false, nil
	}
	names, err := cs.ListCheckpoints(ctx)
	if err != nil {
		return nil, true, err
	}
	for _, name := range names {
		doc, version, err := cs.LoadCheckpoint(ctx, name)
		if errors.Is(err, session.ErrNoCheckpoint) {
			continue // deleted since it was listed
		}
		if err != nil && ctx.Err() != nil {
			return nil, true, ctx.Err()
		}
		cps = append(cps, loadCheckpoint(name, version, doc, err))
	}
	return cps, true, nil
}

// loadCheckpoint returns the checkpoint name as read: readErr why the
// store could not read it, else doc at version, loaded with runstate.Load.
func loadCheckpoint(name string, version int64, doc []byte, readErr error) storedCheckpoint {
	c := storedCheckpoint{name: name, version: version, size: len(doc), readErr: readErr}
	if readErr == nil {
		c.cp, c.loadErr = runstate.Load(doc)
		if it, ierr := session.NewItem(doc); c.loadErr != nil && ierr == nil && isEnvelope(it) {
			// An encrypted document read without a key: say so, not
			// what Load makes of an envelope.
			c.loadErr = errors.New("an encrypted document, not read: " + keysHint)
		}
	}
	return c
}

// summarizeCheckpoints returns list's CHECKPOINT value for a session: "-"
// without a checkpoint, else the states of its checkpoints, most urgent
// first, comma-separated ("held", "unreadable,pending").
func summarizeCheckpoints(cps []storedCheckpoint) string {
	if len(cps) == 0 {
		return cpAbsent
	}
	seen := map[string]bool{}
	for _, c := range cps {
		seen[c.state()] = true
	}
	var out []string
	for _, st := range cpStateOrder {
		if seen[st] {
			out = append(out, st)
		}
	}
	return strings.Join(out, ",")
}

// recordKind names a pending write: "held" or "ordinary".
func recordKind(held bool) string {
	if held {
		return "held"
	}
	return "ordinary"
}

// stepName names a step kind for a terminal ("none" for no step).
func stepName(k runstate.StepKind) string {
	if k == runstate.StepNone {
		return "none"
	}
	return string(k)
}

// callList writes call ids for a terminal: "c1, c2", or "none".
func callList(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = sanitize(id)
	}
	return strings.Join(out, ", ")
}

// checkpointItem is one item of a checkpoint's record in inspect's -json
// output; item is its JSON text exactly, as a string.
type checkpointItem struct {
	Index  int    `json:"index"`
	Type   string `json:"type"`
	Role   string `json:"role,omitempty"`
	CallID string `json:"call_id,omitempty"`
	Item   string `json:"item"`
}

// recordJSON is a checkpoint's pending write in inspect's -json output.
type recordJSON struct {
	Held           bool             `json:"held"`
	SessionID      string           `json:"session_id"`
	Items          []checkpointItem `json:"items"`
	PersistedCount int              `json:"persisted_count"`
	BeforeSet      bool             `json:"before_set"`
	Before         []string         `json:"before"` // the tail digests, null when not set
}

// checkpointJSON is one checkpoint in inspect's -json output.
type checkpointJSON struct {
	Name           string      `json:"name"`
	Version        int64       `json:"version"`
	State          string      `json:"state"`
	Bytes          int         `json:"bytes"`
	Schema         string      `json:"schema,omitempty"`
	Step           string      `json:"step,omitempty"`
	PendingCallIDs []string    `json:"pending_call_ids"`
	PersistedCount int         `json:"persisted_count"`
	Terminal       bool        `json:"terminal"`
	Record         *recordJSON `json:"record"`
	Error          string      `json:"error,omitempty"`
}

func toCheckpointJSON(c storedCheckpoint) checkpointJSON {
	j := checkpointJSON{Name: c.name, Version: c.version, State: c.state(), Bytes: c.size,
		PendingCallIDs: []string{}, Error: c.errText()}
	if c.cp == nil {
		return j
	}
	j.Schema, j.Step, j.PersistedCount, j.Terminal = c.cp.Schema, stepName(c.cp.Step.Kind), c.cp.PersistedCount, c.cp.Terminal
	if ids := c.cp.Step.PendingCallIDs; ids != nil {
		j.PendingCallIDs = ids
	}
	if w := c.cp.Pending; w != nil {
		r := &recordJSON{Held: w.Held, SessionID: w.SessionID, Items: make([]checkpointItem, len(w.Items)),
			PersistedCount: w.PersistedCount, BeforeSet: w.Before != nil, Before: w.Before}
		for i, it := range w.Items {
			r.Items[i] = checkpointItem{Index: i, Type: it.Type(), Role: it.Role(), CallID: it.CallID(), Item: string(it.Bytes())}
		}
		j.Record = r
	}
	return j
}

// printCheckpoints writes inspect's checkpoint section: each checkpoint's
// name, version, schema label, step and the calls awaiting approval, then
// its record with the record's items one line each (as inspect prints the
// history's items, escaped and cut to width), and a summary line. A
// session without checkpoints gets no section.
func printCheckpoints(w io.Writer, id string, cps []storedCheckpoint, width int) {
	if len(cps) == 0 {
		return // -json says "checkpoints": [] and the capabilities "checkpoints"
	}
	unreadable := 0
	for _, c := range cps {
		if c.cp == nil {
			unreadable++
			fmt.Fprintf(w, "checkpoint %s version %d: unreadable (%d bytes, left in the store): %s\n", quoteID(c.name), c.version, c.size, oneLine(c.errText()))
			continue
		}
		cp := c.cp
		fmt.Fprintf(w, "checkpoint %s version %d: schema %s, step %s, awaiting approval: %s\n",
			quoteID(c.name), c.version, sanitize(cp.Schema), sanitize(stepName(cp.Step.Kind)), callList(cp.Step.PendingCallIDs))
		if cp.Terminal {
			fmt.Fprintf(w, "  terminal: the run is never resumed (terminal_unrecoverable)\n")
		}
		pw := cp.Pending
		if pw == nil {
			fmt.Fprintf(w, "  no pending write (persisted count %d)\n", cp.PersistedCount)
			continue
		}
		kind := recordKind(pw.Held)
		owner := ""
		if pw.SessionID != id {
			owner = fmt.Sprintf(" of session %s, not this one", quoteID(pw.SessionID))
		}
		before := "before digests not set (no append attempted)"
		switch {
		case pw.Before != nil:
			before = fmt.Sprintf("before digests set (%s)", plural(len(pw.Before), "digest", "digests"))
		case pw.Held:
			before = "before digests not set (a held write has none)"
		}
		fmt.Fprintf(w, "  %s record%s: %s, persisted count %d, %s\n", kind, owner, plural(len(pw.Items), "item", "items"), pw.PersistedCount, before)
		for i, it := range pw.Items {
			fmt.Fprintf(w, "  %5d  %-24s %s\n", i, label(it), sanitize(truncate(it.String(), width)))
		}
	}
	fmt.Fprintf(w, "%s, %d unreadable\n", plural(len(cps), "checkpoint", "checkpoints"), unreadable)
}

// Doctor's checkpoint finding kinds.
const (
	findingUnreadable   = "unreadable-checkpoint"     // error
	findingNoList       = "checkpoints-unreadable"    // error: the session's checkpoints cannot be listed
	findingAmbiguous    = "pending-write-ambiguous"   // error: the tail neither confirms nor refutes the write
	findingUnchecked    = "pending-write-unchecked"   // error: the tail could not be read or digested
	findingLanded       = "pending-write-landed"      // note
	findingNotLanded    = "pending-write-not-landed"  // note
	findingNotStarted   = "pending-write-not-started" // note
	findingHeld         = "held-write"                // note
	findingTerminal     = "terminal"                  // note
	findingOtherSession = "pending-write-other-session"
)

// Severities of doctor's checkpoint findings; an error counts as doctor's
// errors do (exit status 1).
const (
	sevError   = "error"
	sevWarning = "warning"
	sevNote    = "note"
)

// checkpointFinding is one finding about a checkpoint in doctor's -json
// output.
type checkpointFinding struct {
	Checkpoint string `json:"checkpoint"`
	Version    int64  `json:"version"`
	Kind       string `json:"kind"`
	Severity   string `json:"severity"`
	Severe     bool   `json:"severe"`
	Message    string `json:"message"`
}

func finding(c storedCheckpoint, kind, severity, format string, args ...any) checkpointFinding {
	return checkpointFinding{Checkpoint: c.name, Version: c.version, Kind: kind, Severity: severity,
		Severe: severity == sevError, Message: fmt.Sprintf(format, args...)}
}

// diagnoseCheckpoint says what the next resume of c would do with its
// pending write, by the rule runstate's recovery uses, reading the
// session's tail (and writing nothing). It returns no finding for a
// checkpoint without a pending write.
func diagnoseCheckpoint(ctx context.Context, s session.Session, c storedCheckpoint) (checkpointFinding, bool, error) {
	if c.cp == nil {
		return finding(c, findingUnreadable, sevError, "unreadable (%d bytes, left in the store): %s", c.size, c.errText()), true, nil
	}
	cp, w := c.cp, c.cp.Pending
	if cp.Terminal {
		if w != nil {
			return finding(c, findingTerminal, sevNote, "terminal: the run is never resumed (its %s write of %s is never settled)", recordKind(w.Held), plural(len(w.Items), "item", "items")), true, nil
		}
		return finding(c, findingTerminal, sevNote, "terminal: the run is never resumed"), true, nil
	}
	if w == nil {
		return checkpointFinding{}, false, nil
	}
	n := plural(len(w.Items), "item", "items")
	if w.SessionID != s.SessionID() {
		return finding(c, findingOtherSession, sevWarning, "pending write of %s belongs to session %s; a resume with this session refuses it (not checked against this session's tail)", n, quoteID(w.SessionID)), true, nil
	}
	if w.Held {
		return finding(c, findingHeld, sevNote, "held write of %s, awaiting approval of %s", n, callList(cp.Step.PendingCallIDs)), true, nil
	}
	if w.Before == nil {
		return finding(c, findingNotStarted, sevNote, "pending write of %s not started, the next resume appends it", n), true, nil
	}
	ignoreIDs := session.Probe(s).Has(session.CapIgnoresIDs)
	digests, err := history.Digests(w.Items, ignoreIDs)
	if err != nil {
		return finding(c, findingUnchecked, sevError, "pending write of %s cannot be checked: digest its items: %v", n, err), true, nil
	}
	expected := append(slices.Clone(w.Before), digests...)
	tail, err := session.Latest(ctx, s, len(expected))
	if err != nil {
		if ctx.Err() != nil {
			return checkpointFinding{}, false, ctx.Err()
		}
		return finding(c, findingUnchecked, sevError, "pending write of %s cannot be checked: read the session tail: %v", n, err), true, nil
	}
	observed, err := history.Digests(tail, ignoreIDs)
	if err != nil {
		return finding(c, findingUnchecked, sevError, "pending write of %s cannot be checked: digest the session tail: %v", n, err), true, nil
	}
	committed := slices.Equal(observed, expected)
	unchanged := len(observed) == 0
	if k := len(w.Before); k > 0 {
		unchanged = len(observed) >= k && slices.Equal(observed[len(observed)-k:], w.Before)
	}
	switch {
	case committed == unchanged:
		return finding(c, findingAmbiguous, sevError,
			"pending write can be neither confirmed nor refuted: the session's newest %s match neither its %d before digests followed by its %s nor its before digests alone; the next resume refuses it (repair the session first; do not rerun the completed tool)",
			plural(len(tail), "item", "items"), len(w.Before), n), true, nil
	case committed:
		return finding(c, findingLanded, sevNote, "pending write of %s landed, the next resume accepts it", n), true, nil
	}
	return finding(c, findingNotLanded, sevNote, "pending write of %s not landed, the next resume appends it", n), true, nil
}

// diagnoseCheckpoints returns doctor's findings about the checkpoints s
// keeps (none when its store keeps none). It only reads; err is an
// interrupt.
func diagnoseCheckpoints(ctx context.Context, s session.Session) ([]checkpointFinding, error) {
	cps, _, err := readCheckpoints(ctx, s)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return []checkpointFinding{{Kind: findingNoList, Severity: sevError, Severe: true,
			Message: "cannot list checkpoints: " + err.Error()}}, nil
	}
	out := []checkpointFinding{}
	for _, c := range cps {
		f, ok, err := diagnoseCheckpoint(ctx, s, c)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, f)
		}
	}
	return out, nil
}
