package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

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
	cpOpaque     = "opaque"     // not a JSON document (eino's gob bytes, …): kept, not read
)

// What a process that loads a checkpoint must do next with its run
// (runstate's Checkpoint.Next), as list's CHECKPOINT column names it,
// with unreadable and opaque.
const (
	nextInDoubt  = "in-doubt" // NextResolve: claimed calls whose tools may have run
	nextApproval = "approval" // NextApproval: calls await a human
	nextRecover  = "recover"  // NextRecover: a pending batch the next Open lands
	nextSettle   = "settle"   // NextSettle: every awaited call answered; the turn awaits its settle
	nextOutput   = "output"   // NextOutput (a stored checkpoint never says it)
	nextModel    = "model"    // NextModel: settled, the run waits for its model call
	nextIdle     = "idle"     // NextInput: nothing in progress
	nextDone     = "done"     // NextDone (a stored checkpoint never says it)
)

// cpNextOrder is the order in which list names the states of a session's
// checkpoints: the most urgent first.
var cpNextOrder = []string{cpUnreadable, cpTerminal, nextInDoubt, nextApproval, nextRecover, nextSettle, nextOutput, nextModel, nextIdle, nextDone, cpOpaque}

// nextWords maps runstate's next kinds to the column's words.
var nextWords = map[runstate.NextKind]string{
	runstate.NextResolve: nextInDoubt, runstate.NextApproval: nextApproval, runstate.NextRecover: nextRecover,
	runstate.NextSettle: nextSettle, runstate.NextOutput: nextOutput, runstate.NextModel: nextModel,
	runstate.NextInput: nextIdle, runstate.NextTerminal: cpTerminal, runstate.NextDone: nextDone,
}

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
	opaque  bool                 // the document is not JSON: another loop's (eino's gob bytes)
}

// state returns the checkpoint's state (cpNone … cpUnreadable, cpOpaque).
func (c storedCheckpoint) state() string {
	switch {
	case c.opaque:
		return cpOpaque
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

// next returns what a process that loads the checkpoint must do next with
// its run (every claim on it is in doubt), and the column's word for it:
// unreadable and opaque documents have no next step.
func (c storedCheckpoint) next() (runstate.Next, string) {
	switch {
	case c.opaque:
		return runstate.Next{}, cpOpaque
	case c.cp == nil:
		return runstate.Next{}, cpUnreadable
	}
	n := c.cp.Next()
	w, ok := nextWords[n.Kind]
	if !ok {
		w = sanitize(string(n.Kind))
	}
	return n, w
}

// claimsOf returns the claims of c (in doubt, for every process but the
// one that made them) by call id.
func (c storedCheckpoint) claimsOf() map[string]runstate.Claim {
	out := map[string]runstate.Claim{}
	if c.cp == nil {
		return out
	}
	for _, cl := range c.cp.Claims() {
		out[cl.CallID] = cl
	}
	return out
}

// nextText says in words what comes next for c: "awaiting approval of
// c1", "in doubt: c1 (claimed 2026-12-06T10:00:00Z by host:42)", …
func (c storedCheckpoint) nextText() string {
	n, w := c.next()
	switch w {
	case cpOpaque:
		return fmt.Sprintf("opaque: %d bytes not in runstate's format (another loop's, e.g. eino's), left as they are", c.size)
	case cpUnreadable:
		return "unreadable"
	case nextInDoubt:
		return "in doubt: " + claimList(n.CallIDs, c.claimsOf()) + "; their tools may have run: resolve each (Output with what the tool's system reports, Reclaim, or Abandon)"
	case nextApproval:
		return "awaiting approval of " + callList(n.CallIDs)
	case nextRecover:
		return "a pending batch the next Open lands"
	case nextSettle:
		return "every awaited call answered; the turn awaits its settle"
	case nextOutput:
		return "running " + callList(n.CallIDs)
	case nextModel:
		if n.ResponseID == "" {
			return "settled, waiting for its model call"
		}
		return "settled, waiting for its model call (after response " + sanitize(n.ResponseID) + ")"
	case nextIdle:
		return "idle: nothing in progress"
	case cpTerminal:
		return "terminal: the run is never resumed"
	}
	return w
}

// briefText is nextText without advice: list's NOTES.
func (c storedCheckpoint) briefText() string {
	if n, w := c.next(); w == nextInDoubt {
		return "in doubt: " + claimList(n.CallIDs, c.claimsOf())
	}
	return c.nextText()
}

// claimList writes call ids with their claims for a terminal: "c1
// (claimed 2026-12-06T10:00:00Z by host:42), c2".
func claimList(ids []string, claims map[string]runstate.Claim) string {
	if len(ids) == 0 {
		return "none"
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = sanitize(id)
		if cl, ok := claims[id]; ok {
			out[i] += " (claimed " + claimTime(cl) + " by " + sanitize(cl.By) + ")"
		}
	}
	return strings.Join(out, ", ")
}

// claimTime writes when a claim was made, RFC 3339 in UTC ("unknown"
// when the document does not say).
func claimTime(cl runstate.Claim) string {
	if cl.At.IsZero() {
		return "at an unknown time"
	}
	return cl.At.UTC().Format(time.RFC3339)
}

// claimJSON is a claim in the -json outputs.
type claimJSON struct {
	CallID    string `json:"call_id"`
	ClaimedAt string `json:"claimed_at,omitempty"` // RFC 3339, UTC
	By        string `json:"by"`
}

// nextJSON is what comes next for a checkpoint in the -json outputs.
type nextJSON struct {
	Next       string      `json:"next"`                  // the CHECKPOINT column's word
	CallIDs    []string    `json:"call_ids,omitempty"`    // awaiting approval, or in doubt
	Claims     []claimJSON `json:"claims,omitempty"`      // every claim (in doubt unless its process still runs)
	ResponseID string      `json:"response_id,omitempty"` // the previous response, for model
}

func toNextJSON(c storedCheckpoint) nextJSON {
	n, w := c.next()
	j := nextJSON{Next: w, CallIDs: n.CallIDs, ResponseID: n.ResponseID}
	if c.cp != nil {
		for _, cl := range c.cp.Claims() {
			cj := claimJSON{CallID: cl.CallID, By: cl.By}
			if !cl.At.IsZero() {
				cj.ClaimedAt = cl.At.UTC().Format(time.RFC3339)
			}
			j.Claims = append(j.Claims, cj)
		}
	}
	return j
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
		if c.loadErr != nil && !json.Valid(doc) {
			// Not JSON at all: a document of another loop (eino keeps
			// gob bytes under "eino"), not a damaged run state.
			c.cp, c.loadErr, c.opaque = nil, nil, true
		}
	}
	return c
}

// summarizeCheckpoints returns list's CHECKPOINT value for a session: "-"
// without a checkpoint, else what comes next for each of its checkpoints
// (or unreadable, opaque), most urgent first, comma-separated
// ("approval", "unreadable,model").
func summarizeCheckpoints(cps []storedCheckpoint) string {
	if len(cps) == 0 {
		return cpAbsent
	}
	seen := map[string]bool{}
	for _, c := range cps {
		_, w := c.next()
		seen[w] = true
	}
	var out []string
	for _, st := range cpNextOrder {
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
	nextJSON
	Error string `json:"error,omitempty"`
}

func toCheckpointJSON(c storedCheckpoint) checkpointJSON {
	j := checkpointJSON{Name: c.name, Version: c.version, State: c.state(), Bytes: c.size,
		PendingCallIDs: []string{}, nextJSON: toNextJSON(c), Error: c.errText()}
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
	unreadable, opaque := 0, 0
	for _, c := range cps {
		if c.opaque {
			opaque++
			fmt.Fprintf(w, "checkpoint %s version %d: opaque, %d bytes: not a run-state document (another loop's, e.g. eino's gob bytes); left as they are\n", quoteID(c.name), c.version, c.size)
			continue
		}
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
			printNext(w, c)
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
		printNext(w, c)
	}
	fmt.Fprintf(w, "%s, %d unreadable", plural(len(cps), "checkpoint", "checkpoints"), unreadable)
	if opaque > 0 {
		fmt.Fprintf(w, ", %d opaque", opaque)
	}
	fmt.Fprintln(w)
}

// printNext writes what comes next for a readable checkpoint that is not
// terminal: inspect's line "  next: …", with the claims of calls in doubt.
func printNext(w io.Writer, c storedCheckpoint) {
	if c.cp == nil || c.cp.Terminal {
		return
	}
	fmt.Fprintf(w, "  next: %s\n", c.nextText())
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
	findingInDoubt      = "claims-in-doubt"   // warning: an operator must resolve each claimed call
	findingOpaque       = "opaque-checkpoint" // note: not a run-state document (eino's), not diagnosed
	findingRunState     = "run-"              // note: run-<next> (run-model, run-idle, …), for a checkpoint without a pending write
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
	if c.opaque {
		return finding(c, findingOpaque, sevNote, "%s; not diagnosed", c.nextText()), true, nil
	}
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
		if next, _ := c.next(); next.Kind == runstate.NextResolve {
			return finding(c, findingHeld, sevNote, "held write of %s, whose claimed calls are in doubt", n), true, nil
		}
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
		_, next := c.next()
		if next == nextInDoubt {
			// Not corruption: a tool may have run, and only an operator
			// (or the tool's own system) can say whether it did.
			out = append(out, finding(c, findingInDoubt, sevWarning, "%s; needs an operator", c.nextText()))
		}
		switch {
		case ok:
			out = append(out, f)
		case c.cp != nil && next != nextInDoubt:
			out = append(out, finding(c, findingRunState+next, sevNote, "%s", c.nextText()))
		}
	}
	return out, nil
}

// needsOperator reports whether findings name calls in doubt.
func needsOperator(fs []checkpointFinding) bool {
	for _, f := range fs {
		if f.Kind == findingInDoubt {
			return true
		}
	}
	return false
}
