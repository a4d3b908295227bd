package runstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/internal/pyjson"
	"github.com/agentsessions/sessions/session"
)

// StepKind is the kind of a checkpoint's current step.
type StepKind string

// The step kinds. A handoff is normalised to StepRunAgain (the target agent
// is committed by then; semantics §3.3), so it never appears as a kind.
const (
	// StepNone is a checkpoint without a resumable step (JSON null).
	StepNone StepKind = ""
	// StepInterruption waits for tool approvals.
	StepInterruption StepKind = "next_step_interruption"
	// StepRunAgain continues with another model call.
	StepRunAgain StepKind = "next_step_run_again"
	// StepFinalOutput ended the run. Python never serialises it: it is
	// written as null, like StepNone.
	StepFinalOutput StepKind = "next_step_final_output"
)

// stepHandoff is the Python type of a handoff step, read as StepRunAgain.
const stepHandoff = "next_step_handoff"

// Step is a checkpoint's current step.
type Step struct {
	// Kind is the step's kind.
	Kind StepKind
	// PendingCallIDs are the call ids (or MCP request ids) still awaiting
	// approval on an interruption step. Load fills them from the
	// interruptions' raw items; the pairing guard lets these calls settle
	// without outputs.
	PendingCallIDs []string
	// Raw is the step's JSON object, written back unchanged while its
	// "type" matches Kind (an interruption's data rides here). Nil writes
	// {"type": Kind}.
	Raw json.RawMessage
}

// newStep returns a step of kind k, mapping Python's handoff type to
// StepRunAgain.
func newStep(k StepKind) Step {
	if k == stepHandoff {
		k = StepRunAgain
	}
	return Step{Kind: k}
}

// Checkpoint is the persistence part of an agent run's checkpoint, plus
// every other member of the Python RunState document it was loaded from.
//
// A Checkpoint is not safe for concurrent use; the in-progress guard only
// catches re-entrant settles of the same value, and independently loaded
// copies are not interlocked (semantics §3.4: the application serialises access
// to a Session).
type Checkpoint struct {
	// Schema is the label the document was loaded with, or 1.17 for New.
	// MarshalJSON writes Schema, raised only as far as a record or the
	// terminal marker needs (1.17 for an ordinary record or the marker,
	// 1.18 for a held one); it never writes an older label.
	Schema string
	// Step is the current step.
	Step Step
	// PersistedCount is how many of the current turn's items already
	// reached the Session (current_turn_persisted_item_count).
	PersistedCount int
	// Pending is the pending Session write, or nil.
	Pending *PendingWrite
	// Terminal marks a run that must never be resumed
	// (terminal_unrecoverable).
	Terminal bool

	members    []member                 // the whole document, in order
	inProgress bool                     // live guard, never serialised
	folded     map[history.PairKey]bool // call keys folded into the held batch this turn
	claimed    *PendingWrite            // a held record TakeHeld claimed and no save settled yet
	atomic     bool                     // appends commit with the checkpoint (a Run's atomic store): no tail digests
	memo       *encoded                 // the last document MarshalJSON wrote
	run        runMeta                  // the Run's own member (claims, open turn, response id)
	runLaid    *laidMember              // its last layout
}

// resumable reports whether a step can carry a pending write (rule 2).
func (k StepKind) resumable() bool { return k == StepRunAgain || k == StepInterruption }

// known reports whether k is one of the step kinds.
func (k StepKind) known() bool {
	switch k {
	case StepNone, StepInterruption, StepRunAgain, StepFinalOutput:
		return true
	}
	return false
}

// New returns an empty checkpoint labelled 1.17, the label the Python SDK
// writes for a run state without a held record.
func New() *Checkpoint { return &Checkpoint{Schema: pendingWriteSchema} }

// Load reads a whole RunState JSON document. Every refusal is a *LoadError
// wrapping ErrInvalidDocument, ErrInvalidPendingWrite,
// ErrInvalidTerminalMarker or ErrUnsupportedSchema.
func Load(data []byte) (*Checkpoint, error) {
	cp := &Checkpoint{}
	if err := cp.load(data); err != nil {
		return nil, err
	}
	return cp, nil
}

// UnmarshalJSON is Load into cp. On error cp is left unchanged.
func (cp *Checkpoint) UnmarshalJSON(data []byte) error {
	var fresh Checkpoint
	if err := fresh.load(data); err != nil {
		return err
	}
	*cp = fresh
	return nil
}

// modelled lists the top-level members the Checkpoint fields own.
var modelled = []string{keySchema, keyStep, keyCount, keyPending, keyTerminal, keyRun}

const (
	keySchema   = "$schemaVersion"
	keyStep     = "current_step"
	keyCount    = "current_turn_persisted_item_count"
	keyPending  = "pending_session_write"
	keyTerminal = "terminal_unrecoverable"
)

func (cp *Checkpoint) load(data []byte) error {
	// The document must be one strict JSON object that Python's json module
	// can write back (the same parser MarshalJSON uses).
	py, err := pyjson.Dumps(data, pyjson.Options{Compact: true})
	if err != nil {
		return loadErr(ErrInvalidDocument, ruleDocument, "not valid JSON: %v", err)
	}
	if bytes.Count(finiteCopy(py), []byte("1e000000")) != bytes.Count(finiteCopy(data), []byte("1e000000")) {
		// A float literal beyond float64 reads as infinity, which Python
		// would write back as the token Infinity: not the document given.
		return loadErr(ErrInvalidDocument, ruleDocument, "a number is out of range")
	}
	ms, err := members(data)
	if err != nil {
		return loadErr(ErrInvalidDocument, ruleDocument, "the document is not one JSON object: %v", err)
	}
	cp.members = ms

	// $schemaVersion.
	raw, ok := lookup(ms, keySchema)
	label, isStr := jsonString(raw)
	switch {
	case !ok:
		return loadErr(ErrUnsupportedSchema, ruleSchema, "missing $schemaVersion; supported: %s", strings.Join(supportedSchemas(), ", "))
	case !isStr || !supported(label):
		return loadErr(ErrUnsupportedSchema, ruleSchema, "unsupported $schemaVersion %s; supported: %s", clip(raw), strings.Join(supportedSchemas(), ", "))
	}
	cp.Schema = label

	// current_step.
	if raw, ok := lookup(ms, keyStep); ok {
		step, err := decodeStep(raw)
		if err != nil {
			return err
		}
		cp.Step = step
	}

	// current_turn_persisted_item_count (0 when missing).
	if raw, ok := lookup(ms, keyCount); ok {
		n, ok := jsonInt(raw)
		if !ok || n < 0 {
			return loadErr(ErrInvalidDocument, rulePersistedItemCount, "must be a non-negative int, got %s", clip(raw))
		}
		cp.PersistedCount = n
	}

	// terminal_unrecoverable: only true, only from 1.17 on.
	if raw, ok := lookup(ms, keyTerminal); ok {
		if string(raw) != "true" {
			return loadErr(ErrInvalidTerminalMarker, ruleTerminalMarker, "must be true, got %s", clip(raw))
		}
		if compareSchemas(label, pendingWriteSchema) < 0 {
			return loadErr(ErrInvalidTerminalMarker, ruleTerminalMarker, "needs schema %s or newer, the document is %s", pendingWriteSchema, label)
		}
		cp.Terminal = true
	}

	// The Run's own member.
	if raw, ok := lookup(ms, keyRun); ok {
		m, err := decodeRunMeta(raw)
		if err != nil {
			return err
		}
		cp.run = m
	}

	// pending_session_write (null means none).
	if raw, ok := lookup(ms, keyPending); ok && !isNull(raw) {
		w, err := decodePending(label, ruleStepFor(cp.Step.Kind, cp.Terminal), raw)
		if err != nil {
			return err
		}
		cp.Pending = w
	}
	return nil
}

// ruleStepFor is the step rule 2 judges a record by. A terminal checkpoint
// may carry the record of the settle it died in under a step that cannot
// resume (a final output's): MarshalJSON writes such a checkpoint as
// terminal, so that Load reads it back for inspection and repair while
// Resume refuses it. Python's loader refuses it, as it refuses the same
// checkpoint without the marker: both fail closed.
func ruleStepFor(k StepKind, terminal bool) StepKind {
	if terminal {
		return StepRunAgain
	}
	return k
}

// decodeStep reads current_step: null, or an object whose "type" is one of
// Python's step types. A handoff becomes run-again.
func decodeStep(raw json.RawMessage) (Step, error) {
	if isNull(raw) {
		return Step{}, nil
	}
	ms, err := members(raw)
	if err != nil {
		return Step{}, loadErr(ErrInvalidDocument, ruleStep, "must be null or an object, got %s", clip(raw))
	}
	t, _ := lookup(ms, "type")
	typ, _ := jsonString(t)
	switch typ {
	case string(StepRunAgain):
		return Step{Kind: StepRunAgain, Raw: raw}, nil
	case stepHandoff:
		return Step{Kind: StepRunAgain}, nil
	case string(StepFinalOutput):
		return Step{Kind: StepFinalOutput, Raw: raw}, nil
	case string(StepInterruption):
		return Step{Kind: StepInterruption, Raw: raw, PendingCallIDs: interruptionIDs(ms)}, nil
	}
	return Step{}, loadErr(ErrInvalidDocument, ruleStep, "unknown step type %s", clip(t))
}

// interruptionIDs collects the call ids and ids of an interruption step's
// raw items (Python's _pending_approval_call_ids).
func interruptionIDs(step []member) []string {
	data, _ := lookup(step, "data")
	dm, err := members(data)
	if err != nil {
		return nil
	}
	list, _ := lookup(dm, "interruptions")
	elems, _ := jsonArray(list)
	var ids []string
	for _, e := range elems {
		em, err := members(e)
		if err != nil {
			continue
		}
		rawItem, _ := lookup(em, "raw_item")
		rm, err := members(rawItem)
		if err != nil {
			continue
		}
		for _, k := range []string{"call_id", "id"} {
			v, _ := lookup(rm, k)
			if s, ok := jsonString(v); ok && s != "" && !slices.Contains(ids, s) {
				ids = append(ids, s)
			}
		}
	}
	return ids
}

// writeSchema returns the label MarshalJSON writes: the lowest label that
// can carry what the document holds, and never older than Schema (the label
// it was loaded with), so a newer document is never mislabelled older:
//
//   - nothing new: Schema, unchanged (a Python document written back keeps
//     its label);
//   - a four-key pending write or the terminal marker: at least 1.17;
//   - a held record (or a record carrying a "held" key): at least 1.18;
//   - a record of a later variant (main-line compaction metadata, pending
//     input, 1.19's current_response): at least the label it was loaded
//     under.
func (cp *Checkpoint) writeSchema(w *PendingWrite, terminal bool) string {
	label := cp.Schema
	raise := func(l string) {
		if compareSchemas(label, l) < 0 {
			label = l
		}
	}
	if terminal || w != nil {
		raise(pendingWriteSchema)
	}
	if w != nil {
		if w.Held || w.heldKey {
			raise(heldSchema)
		}
		if len(w.extra) > 0 {
			raise(w.label)
		}
	}
	return label
}

// MarshalJSON writes the document: every member it was loaded with, the
// modelled ones rewritten, in Python's json.dumps(indent=2, sort_keys=True)
// layout with a trailing newline. The label written is the lowest that can
// carry what the document holds (see the package documentation, "Labels"):
// a document loaded and written back without a new record keeps its label,
// a four-key pending write or the terminal marker needs 1.17 and a held
// record 1.18; a label is never lowered. Writing is idempotent.
//
// A final-output step is written as null, as Python does; a record still
// standing with it therefore makes a document Load refuses (fail closed).
func (cp *Checkpoint) MarshalJSON() ([]byte, error) {
	doc, shared, err := cp.marshal()
	if shared {
		doc = bytes.Clone(doc)
	}
	return doc, err
}

// marshal is MarshalJSON without the copy of a document taken from the
// memo: shared says doc is the memo's, to be read and never kept.
func (cp *Checkpoint) marshal() (doc []byte, shared bool, err error) {
	w := cp.Pending
	if w == nil {
		w = cp.claimed // a claimed batch is on the checkpoint until a save settles it
	}
	terminal := cp.Terminal || w != nil && !cp.Step.Kind.resumable()
	label := cp.writeSchema(w, terminal)
	if !supported(label) {
		return nil, false, fmt.Errorf("%w: unsupported schema %q", ErrInvalidState, label)
	}
	if !cp.Step.Kind.known() {
		return nil, false, fmt.Errorf("%w: unknown step kind %q", ErrInvalidState, cp.Step.Kind)
	}
	if cp.PersistedCount < 0 {
		return nil, false, fmt.Errorf("%w: negative persisted count %d", ErrInvalidState, cp.PersistedCount)
	}
	if brokenWriter {
		doc, err := cp.marshalUnchecked(w, terminal, label)
		return doc, false, err
	}
	step := cp.Step.encode()
	// A copy of the members, room made for the modelled ones: members are
	// replaced below, never changed in place. A Run's document fits on
	// the stack.
	var buf [8]member
	ms := buf[:0]
	if n := len(cp.members) + len(modelled); n > len(buf) {
		ms = make([]member, 0, n)
	}
	ms = append(ms, cp.members...)
	ms = setMember(ms, keySchema, labelJSON(label))
	ms = setMember(ms, keyStep, step)
	ms = setMember(ms, keyCount, countJSON(cp.PersistedCount))
	if w != nil {
		raw, err := w.encode()
		if err != nil {
			return nil, false, err
		}
		// The record must be one Load accepts, by Load's own rules.
		if _, err := checkPending(label, ruleStepFor(cp.Step.Kind, terminal), raw, w.Items); err != nil {
			return nil, false, fmt.Errorf("%w: %w", ErrInvalidState, err)
		}
		ms = setMember(ms, keyPending, raw)
	} else {
		ms = deleteMember(ms, keyPending)
	}
	if terminal {
		ms = setMember(ms, keyTerminal, json.RawMessage("true"))
	} else {
		ms = deleteMember(ms, keyTerminal)
	}
	// The Run's member changes with every turn (its response id): the
	// rest of the document is laid out (or taken from the memo) without
	// it, and the member spliced in.
	ms = deleteMember(ms, keyRun)
	run := cp.run.encode(cp.pendingIDs())
	var out []byte
	if m := cp.memo; w == nil && m != nil && sameMembers(m.ms, ms) {
		out, shared = m.out, true
	} else {
		var err error
		if out, err = pythonLayout(encodeObject(ms)); err != nil {
			return nil, false, fmt.Errorf("runstate: encode checkpoint: %w", err)
		}
		if w == nil { // small: no batch on it
			cp.memo = &encoded{ms: cloneMembers(ms), out: bytes.Clone(out)}
		}
	}
	if run == nil {
		return out, shared, nil
	}
	if spliced, ok := cp.splice(out, run); ok {
		return spliced, false, nil
	}
	out, err = pythonLayout(encodeObject(setMember(ms, keyRun, run)))
	if err != nil {
		return nil, false, fmt.Errorf("runstate: encode checkpoint: %w", err)
	}
	return out, false, nil
}

// splice is spliceMember of the Run's member, its layout kept from the
// last call (a Run writes the same member before and after each commit).
func (cp *Checkpoint) splice(doc []byte, run json.RawMessage) ([]byte, bool) {
	if l := cp.runLaid; l == nil || !bytes.Equal(l.raw, run) {
		lay, err := pythonLayout(encodeObject([]member{{Key: keyRun, Value: run}}))
		if err != nil {
			return nil, false
		}
		cp.runLaid = &laidMember{raw: bytes.Clone(run), lay: lay}
	}
	return spliceLaid(doc, keyRun, cp.runLaid.lay)
}

// laidMember is a top-level member and its layout as a one-member document.
type laidMember struct {
	raw, lay []byte
}

// spliceMember returns doc, a document in Python's layout, with the
// top-level member key (absent from doc) inserted where Python's sort_keys
// puts it: the same bytes as laying out the document with the member. ok
// is false when it cannot tell where (a key it would have to decode, or no
// key sorting after it); the caller then lays out the whole document.
func spliceMember(doc []byte, key string, value json.RawMessage) ([]byte, bool) {
	lay, err := pythonLayout(encodeObject([]member{{Key: key, Value: value}}))
	if err != nil {
		return nil, false
	}
	return spliceLaid(doc, key, lay)
}

// spliceLaid is spliceMember given the member's layout as a one-member
// document.
func spliceLaid(doc []byte, key string, lay []byte) ([]byte, bool) {
	if len(lay) < 4 {
		return nil, false
	}
	text := lay[1 : len(lay)-3] // "\n  \"key\": value", without the braces
	for i := 0; ; {
		j := bytes.Index(doc[i:], []byte("\n  \""))
		if j < 0 {
			return nil, false
		}
		p := i + j
		end := bytes.IndexByte(doc[p+4:], '"')
		if end < 0 {
			return nil, false
		}
		k := doc[p+4 : p+4+end]
		if bytes.IndexByte(k, '\\') >= 0 {
			return nil, false
		}
		if string(k) > key {
			out := make([]byte, 0, len(doc)+len(text)+1)
			out = append(out, doc[:p]...)
			out = append(out, text...)
			out = append(out, ',')
			return append(out, doc[p:]...), true
		}
		i = p + 4 + end
	}
}

// encoded is the last document without a pending write MarshalJSON wrote
// and the members it was laid out from: the layout is a function of the members alone, so the
// same members give the same document without laying it out again (a Run
// encodes the same document before and after each commit).
type encoded struct {
	ms  []member
	out []byte
}

// sameMembers reports whether a and b hold the same members, in order,
// byte for byte.
func sameMembers(a, b []member) bool {
	return slices.EqualFunc(a, b, func(x, y member) bool {
		return x.Key == y.Key && bytes.Equal(x.Value, y.Value)
	})
}

// brokenWriter is a test hook: MarshalJSON as it was before it checked
// what it writes, for the property test's negative control.
var brokenWriter bool

func (cp *Checkpoint) marshalUnchecked(w *PendingWrite, terminal bool, label string) ([]byte, error) {
	ms := setMember(cloneMembers(cp.members), keySchema, encodeString(cp.Schema))
	ms = setMember(ms, keyStep, cp.Step.encode())
	ms = setMember(ms, keyCount, strconv.AppendInt(nil, int64(cp.PersistedCount), 10))
	if w != nil {
		raw, err := w.encode()
		if err != nil {
			return nil, err
		}
		ms = setMember(ms, keyPending, raw)
	}
	return pythonLayout(encodeObject(ms))
}

// The encodings MarshalJSON writes on every call, made once: the
// members it lays out are read, never changed in place, so they may share
// these (each capped at its length, so that an append copies).
var (
	nullJSON     = json.RawMessage("null")
	runAgainJSON = encodeObject([]member{{Key: "type", Value: encodeString(string(StepRunAgain))}})
	// labelsJSON are the supported labels encoded as JSON strings, in the
	// order of schemaSummaries.
	labelsJSON = func() []json.RawMessage {
		out := make([]json.RawMessage, len(schemaSummaries))
		for i, s := range schemaSummaries {
			out[i] = encodeString(s.label)
		}
		return out
	}()
	// smallCountsJSON are the persisted counts a turn usually reaches.
	smallCountsJSON = func() []json.RawMessage {
		out := make([]json.RawMessage, 256)
		for i := range out {
			out[i] = strconv.AppendInt(nil, int64(i), 10)
		}
		return out
	}()
)

// labelJSON returns label encoded as a JSON string.
func labelJSON(label string) json.RawMessage {
	if i := schemaIndex(label); i >= 0 {
		b := labelsJSON[i]
		return b[:len(b):len(b)]
	}
	return encodeString(label)
}

// countJSON returns n encoded as a JSON number.
func countJSON(n int) json.RawMessage {
	if n >= 0 && n < len(smallCountsJSON) {
		b := smallCountsJSON[n]
		return b[:len(b):len(b)]
	}
	return strconv.AppendInt(nil, int64(n), 10)
}

func (s Step) encode() json.RawMessage {
	switch s.Kind {
	case StepNone, StepFinalOutput:
		return nullJSON[:len(nullJSON):len(nullJSON)]
	case StepRunAgain:
		// The common step, written as New and SetStep leave it, or as
		// loaded back: no need to decode it.
		if s.Raw == nil || bytes.Equal(s.Raw, runAgainJSON) {
			return runAgainJSON[:len(runAgainJSON):len(runAgainJSON)]
		}
	}
	if s.Raw != nil {
		if ms, err := members(s.Raw); err == nil {
			t, _ := lookup(ms, "type")
			if typ, _ := jsonString(t); typ == string(s.Kind) {
				if s.Kind == StepInterruption {
					return syncInterruptions(s.Raw, ms, s.PendingCallIDs)
				}
				return s.Raw
			}
		}
	}
	ms := []member{{Key: "type", Value: encodeString(string(s.Kind))}}
	if s.Kind == StepInterruption {
		var list []json.RawMessage
		for _, id := range s.PendingCallIDs {
			list = append(list, encodeObject([]member{{Key: "raw_item", Value: encodeObject([]member{{Key: "call_id", Value: encodeString(id)}})}}))
		}
		if list == nil {
			list = []json.RawMessage{}
		}
		ms = append(ms, member{Key: "data", Value: encodeObject([]member{{Key: "interruptions", Value: mustJSON(list)}})})
	}
	return encodeObject(ms)
}

// encode writes the record as a compact JSON object.
func (w *PendingWrite) encode() (json.RawMessage, error) {
	if err := w.digestTail(); err != nil {
		return nil, err
	}
	if len(w.Items) == 0 {
		return nil, errors.New("runstate: a pending write must hold at least one item")
	}
	items := make([]json.RawMessage, len(w.Items))
	for i, it := range w.Items {
		if !it.Valid() {
			return nil, fmt.Errorf("runstate: pending write item %d: %w", i, session.ErrInvalidItem)
		}
		items[i] = it.Bytes()
	}
	before := json.RawMessage("null")
	if w.Before != nil {
		before = mustJSON(w.Before)
	}
	ms := []member{
		{Key: "session_id", Value: encodeString(w.SessionID)},
		{Key: "items", Value: mustJSON(items)},
		{Key: "before", Value: before},
		{Key: "persisted_count", Value: mustJSON(w.PersistedCount)},
	}
	if w.Held || w.heldKey {
		ms = append(ms, member{Key: "held", Value: mustJSON(w.Held)})
	}
	ms = appendOpt(ms, "response_id", w.responseID)
	ms = appendOpt(ms, "store", w.store)
	ms = appendOpt(ms, "reasoning_item_id_policy", w.policy)
	for _, m := range w.extra {
		if _, dup := lookup(ms, m.Key); !dup {
			ms = append(ms, m)
		}
	}
	return encodeObject(ms), nil
}

func appendOpt[T any](ms []member, key string, o opt[T]) []member {
	if !o.Present {
		return ms
	}
	if o.Value == nil {
		return append(ms, member{Key: key, Value: json.RawMessage("null")})
	}
	return append(ms, member{Key: key, Value: mustJSON(*o.Value)})
}

func cloneMembers(ms []member) []member {
	out := make([]member, len(ms))
	for i, m := range ms {
		out[i] = member{Key: m.Key, Value: append(json.RawMessage(nil), m.Value...)}
	}
	return out
}

// Clone returns a deep copy of cp with the in-progress guard reset (the
// copy a result carries, Python's _copy_for_result_checkpoint). The
// per-turn record of folded calls is not copied.
func (cp *Checkpoint) Clone() *Checkpoint {
	c := &Checkpoint{
		Schema:         cp.Schema,
		Step:           cp.Step.clone(),
		PersistedCount: cp.PersistedCount,
		Pending:        cp.Pending.clone(),
		Terminal:       cp.Terminal,
		members:        cloneMembers(cp.members),
		claimed:        cp.claimed.clone(),
		run:            cp.run.clone(),
	}
	return c
}

func (s Step) clone() Step {
	return Step{
		Kind:           s.Kind,
		PendingCallIDs: slices.Clone(s.PendingCallIDs),
		Raw:            append(json.RawMessage(nil), s.Raw...),
	}
}

// Field returns the raw value of a top-level member of the document as it
// was loaded or set (modelled members as loaded).
func (cp *Checkpoint) Field(key string) (json.RawMessage, bool) {
	v, ok := lookup(cp.members, key)
	if !ok {
		return nil, false
	}
	return append(json.RawMessage(nil), v...), true
}

// SetField sets a top-level member the package does not model; a nil value
// deletes it. Modelled members ($schemaVersion, current_step,
// current_turn_persisted_item_count, pending_session_write,
// terminal_unrecoverable) are refused: set the fields instead.
func (cp *Checkpoint) SetField(key string, value json.RawMessage) error {
	if slices.Contains(modelled, key) {
		return fmt.Errorf("runstate: %s is modelled by the Checkpoint fields", key)
	}
	if value == nil {
		cp.members = deleteMember(cp.members, key)
		return nil
	}
	if _, err := pyjson.Dumps(value, pyjson.Options{Compact: true}); err != nil {
		return fmt.Errorf("runstate: %s: %w", key, err)
	}
	cp.members = setMember(cp.members, key, compactJSON(value))
	return nil
}

// SetStep sets the current step to kind k (Python's handoff type becomes
// run-again). The calls awaiting approval stay (they are written whenever
// the step is an interruption), and so does the step's raw form while the
// kind does not change.
func (cp *Checkpoint) SetStep(k StepKind) {
	prev := cp.Step
	cp.Step = newStep(k)
	cp.Step.PendingCallIDs = prev.PendingCallIDs
	if cp.Step.Kind == prev.Kind {
		cp.Step.Raw = prev.Raw
	}
}

// StartTurn begins a new turn: the persisted count goes back to 0 and the
// record of calls folded into the held batch this turn is forgotten.
func (cp *Checkpoint) StartTurn() {
	cp.PersistedCount = 0
	cp.folded = nil
}

// checkResumable returns ErrTerminal for a terminal checkpoint. Resume
// calls it first, before any Session access.
func (cp *Checkpoint) checkResumable() error {
	if cp.Terminal {
		return ErrTerminal
	}
	return nil
}

// syncInterruptions returns an interruption step's raw form with its
// interruptions list brought to ids: an entry stays while one of its ids
// still awaits approval, and an awaited id no entry names gets an entry of
// its own. It returns raw itself when nothing changes.
func syncInterruptions(raw json.RawMessage, step []member, ids []string) json.RawMessage {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	data, _ := lookup(step, "data")
	dm, err := members(data)
	if err != nil {
		dm = nil
	}
	list, _ := lookup(dm, "interruptions")
	elems, _ := jsonArray(list)
	covered := map[string]bool{}
	var kept []json.RawMessage
	for _, e := range elems {
		eids := interruptionIDs([]member{{Key: "data", Value: encodeObject([]member{{Key: "interruptions", Value: mustJSON([]json.RawMessage{e})}})}})
		if slices.ContainsFunc(eids, func(id string) bool { return want[id] }) || len(eids) == 0 {
			kept = append(kept, e)
			for _, id := range eids {
				covered[id] = true
			}
		}
	}
	changed := len(kept) != len(elems)
	for _, id := range ids {
		if !covered[id] {
			kept = append(kept, encodeObject([]member{{Key: "raw_item", Value: encodeObject([]member{{Key: "call_id", Value: encodeString(id)}})}}))
			covered[id], changed = true, true
		}
	}
	if !changed {
		return raw
	}
	if kept == nil {
		kept = []json.RawMessage{}
	}
	dm = setMember(dm, "interruptions", mustJSON(kept))
	return encodeObject(setMember(cloneMembers(step), "data", encodeObject(dm)))
}

// answer removes calls from those awaiting approval: each id, and the
// other ids an interruption entry naming it carries (a function call's
// item id beside its call id).
func (s *Step) answer(ids []string) {
	if len(ids) == 0 || len(s.PendingCallIDs) == 0 {
		return
	}
	gone := map[string]bool{}
	for _, id := range ids {
		gone[id] = true
	}
	if ms, err := members(s.Raw); err == nil && s.Kind == StepInterruption {
		data, _ := lookup(ms, "data")
		dm, _ := members(data)
		list, _ := lookup(dm, "interruptions")
		elems, _ := jsonArray(list)
		for _, e := range elems {
			eids := interruptionIDs([]member{{Key: "data", Value: encodeObject([]member{{Key: "interruptions", Value: mustJSON([]json.RawMessage{e})}})}})
			if slices.ContainsFunc(eids, func(id string) bool { return gone[id] }) {
				for _, id := range eids {
					gone[id] = true
				}
			}
		}
	}
	s.PendingCallIDs = slices.DeleteFunc(slices.Clone(s.PendingCallIDs), func(id string) bool { return gone[id] })
}
