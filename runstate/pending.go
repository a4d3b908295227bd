package runstate

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

// member is one raw member of a JSON object.
type member struct {
	Key   string
	Value json.RawMessage
}

// PendingWrite is the one pending Session write a checkpoint may carry
// (Python's RunState._pending_session_write).
//
// An ordinary record is a batch whose append is registered and may or may
// not have committed: Before is nil until the first append attempt reads
// the tail. While that append runs, the tail's digests may still be
// pending: they are computed when the record is encoded (so a checkpoint
// persisted from inside AddItems, as WrapSaveBeforeAppend does, carries
// them) and before a call returns with the record still on the checkpoint.
// A held record (Held) is a batch withheld from the Session under the
// output-guardrail gate; its Before is always nil.
type PendingWrite struct {
	// SessionID is the id of the session the batch belongs to.
	SessionID string
	// Items is the batch, in append order; never empty.
	Items []session.Item
	// Before holds the digests of the session tail (len(Items)+1 items)
	// read just before the append; nil encodes as JSON null (no append
	// attempted yet), an empty non-nil slice as [].
	Before []string
	// PersistedCount is the current turn's persisted item count once the
	// batch has landed.
	PersistedCount int
	// Held marks a held record (semantics §3.5).
	Held bool
	// The held record's optional members (held only), each absent, null
	// or set (see the accessors below): the response the batch belongs
	// to, the store setting it was produced under, and the policy it was
	// converted under (folds convert under it).
	responseID opt[string]
	store      opt[bool]
	policy     opt[Policy]
	// extra holds the members of the record's variant that this package
	// does not model (main-line compaction metadata, pending_input,
	// current_response), written back unchanged.
	extra []member

	// tail is the session tail an append attempt read for Before, kept
	// undigested while the append runs (see digestTail); tailRead says it
	// is there.
	tail          []session.Item
	tailRead      bool
	tailIgnoreIDs bool
	// prefetched is the tail the save that registered the record read just
	// before, with nothing written since; the first append attempt uses it
	// instead of reading the tail again.
	prefetched *sessionTail

	variant string // key-table row the record was loaded under
	label   string // that row's label: the least a record with extra needs
	heldKey bool   // "held": false was present
}

// ResponseID returns the response the held batch belongs to; ok is false
// when the record names none (absent or null).
func (w *PendingWrite) ResponseID() (id string, ok bool) { return w.responseID.Get() }

// StoreSetting returns the store setting the held batch's response was
// produced under, or nil when the record names none.
func (w *PendingWrite) StoreSetting() *bool { return w.store.Ptr() }

// Policy returns the reasoning-item id policy the held batch was converted
// under, or nil when the record names none.
func (w *PendingWrite) Policy() *Policy { return w.policy.Ptr() }

// Variant returns the shape the record was loaded as ("ordinary",
// "held", "compaction-metadata" or "pending-input"), or "" for a
// record made in this process.
func (w *PendingWrite) Variant() string { return w.variant }

// started reports whether an append of the batch was attempted (Before is
// set, or its tail is read and not digested yet).
func (w *PendingWrite) started() bool { return w.Before != nil || w.tailRead }

// digestTail sets Before from the tail an append attempt read, if its
// digests are not computed yet. They are computed only when the record
// outlives the append (it is encoded, or left on the checkpoint), never
// for a batch that lands and is dropped: that saves a digest per tail item
// on every ordinary save.
func (w *PendingWrite) digestTail() error {
	if w == nil || !w.tailRead {
		return nil
	}
	before, err := history.Digests(w.tail, w.tailIgnoreIDs)
	if err != nil {
		return fmt.Errorf("runstate: digest session tail: %w", err)
	}
	w.Before, w.tail, w.tailRead = before, nil, false
	return nil
}

// prefetch records a tail the registering save read (nil: none).
func (w *PendingWrite) prefetch(t *sessionTail, ignoreIDs bool) {
	if t != nil && t.items != nil {
		w.prefetched = t
		w.tailIgnoreIDs = ignoreIDs
	}
}

// takePrefetched returns the last n items of the prefetched tail when it
// holds them (or the whole history), and forgets it either way.
func (w *PendingWrite) takePrefetched(n int) ([]session.Item, bool) {
	t := w.prefetched
	w.prefetched = nil
	if t == nil || (len(t.items) < n && !t.whole) {
		return nil, false
	}
	return t.items[max(0, len(t.items)-n):], true
}

// clone returns a deep copy of w.
func (w *PendingWrite) clone() *PendingWrite {
	if w == nil {
		return nil
	}
	c := *w
	c.Items = make([]session.Item, len(w.Items))
	for i, it := range w.Items {
		c.Items[i] = it.Clone()
	}
	if w.Before != nil {
		c.Before = append([]string{}, w.Before...)
	}
	c.tail = slices.Clone(w.tail) // Items never change: no deep copy
	c.prefetched = nil
	c.responseID = w.responseID.clone()
	c.store = w.store.clone()
	c.policy = w.policy.clone()
	if w.extra != nil {
		c.extra = make([]member, len(w.extra))
		for i, m := range w.extra {
			c.extra[i] = member{Key: m.Key, Value: append(json.RawMessage(nil), m.Value...)}
		}
	}
	return &c
}
