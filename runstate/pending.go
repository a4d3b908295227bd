package runstate

import (
	"encoding/json"

	"github.com/agentsessions/sessions/session"
)

// Member is one raw member of a JSON object.
type Member struct {
	Key   string
	Value json.RawMessage
}

// PendingWrite is the one pending Session write a checkpoint may carry
// (Python's RunState._pending_session_write).
//
// An ordinary record is a batch whose append is registered and may or may
// not have committed: Before is nil until the first append attempt reads
// the tail. A held record (Held) is a batch withheld from the Session under
// the output-guardrail gate; its Before is always nil.
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
	// ResponseID is the response the held batch belongs to (held only).
	ResponseID Opt[string]
	// Store is the store setting that response was produced under (held
	// only).
	Store Opt[bool]
	// ReasoningItemIDPolicy is the policy the held batch was converted
	// under; folds convert under it (held only).
	ReasoningItemIDPolicy Opt[Policy]
	// Extra holds the members of the record's variant that this package
	// does not model (main-line compaction metadata, pending_input,
	// current_response), written back unchanged.
	Extra []Member

	variant string // key-table row the record was loaded under
	heldKey bool   // "held": false was present
}

// Variant returns the name of the key-table row the record was loaded
// under, or "" for a record made in this process.
func (w *PendingWrite) Variant() string { return w.variant }

// Clone returns a deep copy of w.
func (w *PendingWrite) Clone() *PendingWrite {
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
	c.ResponseID = w.ResponseID.clone()
	c.Store = w.Store.clone()
	c.ReasoningItemIDPolicy = w.ReasoningItemIDPolicy.clone()
	if w.Extra != nil {
		c.Extra = make([]Member, len(w.Extra))
		for i, m := range w.Extra {
			c.Extra[i] = Member{Key: m.Key, Value: append(json.RawMessage(nil), m.Value...)}
		}
	}
	return &c
}
