package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

func init() {
	commands["inspect"] = command{"print a session's history, its health and its checkpoints (read-only)", runInspect}
}

// problemCallBeforeWindow marks, in a window read with -limit, an output
// whose call is not in the window: it is older than the window (healthy)
// or missing (an orphan), which only a read of the whole history tells.
// ModelInput leaves such an output out of a model call over this window.
const problemCallBeforeWindow = "call-before-window"

// inspectItem is one item in inspect's -json output; item is the stored
// JSON text exactly, as a string (encoding/json would reformat it as a
// value).
type inspectItem struct {
	Index    int      `json:"index"`
	Type     string   `json:"type"`
	Role     string   `json:"role,omitempty"`
	CallID   string   `json:"call_id,omitempty"`
	Marks    []string `json:"marks"`
	InWindow bool     `json:"in_model_input"`
	Item     string   `json:"item"` // the stored JSON text, exactly
	// Encrypted marks an envelope read without a key.
	Encrypted bool `json:"encrypted,omitempty"`
}

// inspectReport is inspect's -json output.
type inspectReport struct {
	Store          string        `json:"store"`
	SessionID      string        `json:"session_id"`
	Capabilities   string        `json:"capabilities"`
	Limit          int           `json:"limit"`
	Window         bool          `json:"window"`
	Items          []inspectItem `json:"items"`
	Problems       []problemJSON `json:"problems"`
	CorruptRecords []corruptJSON `json:"corrupt_records"`
	// EncryptedItems counts the envelopes read without a key; the history
	// is then not diagnosed (problems is empty) and the exit status is 1.
	EncryptedItems int `json:"encrypted_items"`
	// Checkpoints are the session's run-state checkpoints, by name; null
	// when the store keeps none (no checkpoints capability).
	Checkpoints []checkpointJSON `json:"checkpoints"`
	// CheckpointError is why the checkpoints could not be listed (exit
	// status 1).
	CheckpointError string `json:"checkpoint_error,omitempty"`
}

func runInspect(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "inspect", "URL SESSION_ID")
	sf := addStoreFlags(fs)
	limit := fs.Int("limit", 0, "show only the newest N items (0: all); the diagnosis then knows it sees a window")
	width := fs.Int("width", 100, "truncate each item to this many characters (0: no limit)")
	keysFile := addKeysFlag(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want a store URL and a session id")
	}
	if *limit < 0 {
		return usagef("-limit must not be negative")
	}
	dsn, id := pos[0], pos[1]
	keys, err := loadKeys(*keysFile)
	if err != nil {
		return err
	}
	e.setStatus("opening %s read-only; nothing changed", redactDSN(dsn))
	st, corrupt, err := openStore(ctx, dsn, readOnly, *sf.connectTimeout)
	if err != nil {
		return err
	}
	defer st.Close()
	s, err := keys.session(st, id)
	if err != nil {
		return err
	}
	e.setStatus("reading session %s; nothing changed (inspect is read-only)", quoteID(id))
	var items []session.Item
	if *limit > 0 {
		items, err = session.Latest(ctx, s, *limit)
	} else {
		items, err = session.All(ctx, s)
	}
	if err != nil {
		return err
	}
	window := *limit > 0 && len(items) == *limit // a shorter read is the whole history
	// Envelopes read without a key hide their calls and outputs: the
	// history is not diagnosed at all (a diagnosis of the rest would
	// report what it cannot see as healthy, or as orphans).
	encrypted := countEnvelopes(items)
	problems := diagnoseWindow(items, window)
	if encrypted > 0 {
		problems = nil
	}
	kept := make([]bool, len(items))
	for i := range kept {
		kept[i] = true
	}
	if window {
		kept = history.PruneOrphans(items, history.PruneOptions{DropOrphanOutputs: true})
	}
	bad := corrupt.Reports(id)
	cps, keepsCheckpoints, cpErr := readCheckpoints(ctx, s)
	if cpErr != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	unlisted := ""
	if len(items) == 0 && len(bad) == 0 && len(cps) == 0 && cpErr == nil {
		canList, err := requireListed(ctx, st, id, dsn)
		if err != nil {
			return err
		}
		if !canList {
			unlisted = " " + cannotListNote
		}
	}
	severe := 0
	for _, p := range problems {
		if isSevere(p.Kind) {
			severe++
		}
	}
	// A diagnosis that found errors exits 1, as doctor's does: a severe
	// problem, an unreadable record, an unreadable checkpoint.
	status := error(nil)
	errs := severe + len(bad) + encrypted
	for _, c := range cps {
		if c.state() == cpUnreadable {
			errs++
		}
	}
	if errs > 0 {
		status = errFailed
	}
	marks := map[int][]string{}
	for _, p := range problems {
		marks[p.Index] = append(marks[p.Index], string(p.Kind))
	}

	if *sf.json {
		rep := inspectReport{Store: redactDSN(dsn), SessionID: id, Capabilities: session.Probe(s).String(),
			Limit: *limit, Window: window, Items: make([]inspectItem, len(items)),
			Problems: toProblemJSON(problems), CorruptRecords: toCorruptJSONs(bad), EncryptedItems: encrypted}
		if keepsCheckpoints {
			rep.Checkpoints = make([]checkpointJSON, len(cps))
			for i, c := range cps {
				rep.Checkpoints[i] = toCheckpointJSON(c)
			}
		}
		if cpErr != nil {
			rep.CheckpointError = cpErr.Error()
			if err := writeJSON(e, rep); err != nil {
				return err
			}
			return errFailed
		}
		for i, it := range items {
			m := marks[i]
			if m == nil {
				m = []string{}
			}
			rep.Items[i] = inspectItem{Index: i, Type: it.Type(), Role: it.Role(), CallID: it.CallID(),
				Marks: m, InWindow: kept[i], Item: string(it.Bytes()), Encrypted: isEnvelope(it)}
		}
		if err := writeJSON(e, rep); err != nil {
			return err
		}
		return status
	}
	what := plural(len(items), "item", "items")
	if window {
		what = fmt.Sprintf("the newest %s (a window: an output whose call is not in it is marked %s)", what, problemCallBeforeWindow)
	}
	fmt.Fprintf(e.stdout, "session %s: %s (capabilities: %s)%s\n", quoteID(id), what, session.Probe(s), unlisted)
	for i, it := range items {
		mark := ""
		if ks := marks[i]; len(ks) > 0 {
			mark = "  <- " + strings.Join(ks, ", ")
		}
		fmt.Fprintf(e.stdout, "%5d  %-24s %s%s\n", i, label(it), sanitize(truncate(it.String(), *width)), mark)
	}
	for _, r := range bad {
		fmt.Fprintf(e.stdout, "unreadable record at %s (%d bytes, left in the store): %s: %s\n", sanitize(r.Position), len(r.Raw), quoteRaw(r.Raw, *width), oneLine(fmt.Sprint(r.Err)))
	}
	if encrypted > 0 {
		fmt.Fprintf(e.stdout, "%s not diagnosed; %s; %s\n", plural(encrypted, "encrypted item", "encrypted items"), keysHint, plural(len(bad), "unreadable record", "unreadable records"))
	} else {
		fmt.Fprintf(e.stdout, "%s (%d severe), %s\n", plural(len(problems), "problem", "problems"), severe, plural(len(bad), "unreadable record", "unreadable records"))
	}
	if cpErr != nil {
		fmt.Fprintf(e.stdout, "cannot list checkpoints: %s\n", oneLine(cpErr.Error()))
		return errFailed
	}
	if keepsCheckpoints {
		printCheckpoints(e.stdout, id, cps, *width)
	}
	return status
}

// diagnoseWindow is history.Diagnose for a history, or for a window of the
// newest items of one: there an output whose call is absent from the
// window is not known to be an orphan (its call may be older), so it is
// reported as call-before-window, a warning. An output whose call comes
// later in the window is an orphan all the same.
func diagnoseWindow(items []session.Item, window bool) []history.Problem {
	problems := history.Diagnose(items)
	if !window {
		return problems
	}
	calls := map[history.PairKey]bool{}
	for _, it := range items {
		if k, ok := history.CallKey(it); ok {
			calls[k] = true
		}
	}
	for i, p := range problems {
		if p.Kind == history.ProblemOrphanOutput && !calls[p.Key] {
			problems[i].Kind = problemCallBeforeWindow
		}
	}
	return problems
}

// isSevere is ProblemKind.Severe, knowing call-before-window, which is not.
func isSevere(k history.ProblemKind) bool { return k != problemCallBeforeWindow && k.Severe() }

// label names an item by its type, or its role for a bare message, with
// stored values escaped for a terminal.
func label(it session.Item) string {
	if isEnvelope(it) {
		kid, _ := it.StringField("kid")
		return "encrypted " + sanitize(truncate(kid, 14))
	}
	t := it.Type()
	if t == "" {
		t = "message"
	}
	t = sanitize(t)
	if r := it.Role(); r != "" {
		return t + "/" + sanitize(r)
	}
	if id := it.CallID(); id != "" {
		return t + " " + sanitize(truncate(id, 12))
	}
	return t
}

func truncate(s string, n int) string {
	if n <= 0 || len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
