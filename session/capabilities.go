package session

import (
	"context"
	"strings"
	"time"
)

// LatestReader is implemented by sessions that read the newest n items
// without reading the whole history.
//
// If a Session does not implement LatestReader, Latest reads every item and
// keeps the newest n locally, with the same result.
type LatestReader interface {
	Session
	// LatestItems returns the newest n items, oldest first. n > 0 gives at
	// most n items, n == 0 gives none, n < 0 is ErrInvalidLimit.
	LatestItems(ctx context.Context, n int) ([]Item, error)
}

// RunContextAware is implemented by sessions that want the agent run's
// context object (Python's RunContextWrapper) on every call. The run context
// travels on the context.Context (see WithRunContext); the package-level
// functions pass it to a session only when AcceptsRunContext reports true,
// and then to every call, never to some calls only.
//
// If a Session does not implement RunContextAware, or reports false, it is
// called with the run context removed from its context.Context.
type RunContextAware interface {
	Session
	// AcceptsRunContext reports whether the session wants the run context.
	// Wrappers report what the session they wrap reports.
	AcceptsRunContext() bool
}

// Replacer is implemented by sessions that replace their whole history in
// one atomic step, as compaction needs.
//
// If a Session does not implement Replacer, Replace clears the session and
// appends the new history, and on failure restores the previous history
// (best effort, not atomic: a concurrent reader may see the gap).
type Replacer interface {
	Session
	// ReplaceItems atomically replaces the whole history with items.
	ReplaceItems(ctx context.Context, items []Item) error
}

// VersionedReplacer is implemented by sessions that replace their history
// only if it is unchanged since the caller read it, so that an operator's
// rewrite (sessionctl repair, migrate) never loses an append made beside it.
//
// A version covers every stored record of the session, readable or not.
// Equal versions mean an equal history: a version never comes back after
// the history changed, unless the history came back too. The recipe is to
// read the version, read the history, read the version again (equal, or
// start over), then ReplaceItemsIf with it.
//
// There is no fallback: without this capability a rewrite beside live
// writers cannot be made safe, and ReplaceIf returns ErrUnsupported.
type VersionedReplacer interface {
	Replacer
	// HistoryVersion returns an opaque version of the stored history.
	HistoryVersion(ctx context.Context) (string, error)
	// ReplaceItemsIf atomically replaces the whole history with items if
	// its version is still version, and otherwise returns
	// ErrHistoryChanged and writes nothing.
	ReplaceItemsIf(ctx context.Context, version string, items []Item) error
}

// Expirer is implemented by sessions whose data expire after a time to live.
// Every key or row of a session expires together: never part of a batch,
// never the items without their metadata.
//
// If a Session does not implement Expirer, its data never expire and Touch
// is a no-op.
type Expirer interface {
	Session
	// TTL returns the configured time to live; 0 means no expiry.
	TTL() time.Duration
	// ExpiresIn returns how long until the session's data expire; ok is
	// false when the session has no data or no expiry.
	ExpiresIn(ctx context.Context) (d time.Duration, ok bool, err error)
	// Touch restarts the session's expiry clock.
	Touch(ctx context.Context) error
}

// CompactionMode chooses how a compaction sends history to the model.
type CompactionMode string

// Compaction modes (semantics §2.5).
const (
	CompactionAuto               CompactionMode = "auto"
	CompactionPreviousResponseID CompactionMode = "previous_response_id"
	CompactionInput              CompactionMode = "input"
)

// CompactionArgs are the arguments of one compaction request.
type CompactionArgs struct {
	ResponseID string         // the response the compaction follows; may be empty
	Mode       CompactionMode // empty means CompactionAuto
	Store      *bool          // whether that response was stored; nil if unknown
	Force      bool           // compact even if the trigger says no
}

// CompactionAware is implemented by sessions that compact their own history
// after a turn is saved.
//
// If a Session does not implement CompactionAware, the runner never
// compacts it.
type CompactionAware interface {
	Session
	// RunCompaction compacts the history as args ask.
	RunCompaction(ctx context.Context, args CompactionArgs) error
}

// CompactionDeferrer is implemented by compaction-aware sessions that can
// postpone a compaction: after a save that carries a locally produced tool
// output, compacting would separate that output from its response chain, so
// the runner calls DeferCompaction instead and the next compaction is forced.
//
// If a CompactionAware session does not implement CompactionDeferrer, a save
// that would defer skips compaction for that response.
type CompactionDeferrer interface {
	CompactionAware
	// DeferCompaction records that compaction for responseID is due later.
	DeferCompaction(ctx context.Context, responseID string, store *bool) error
	// DeferredCompaction returns the response id of a pending deferral.
	DeferredCompaction() (responseID string, ok bool)
}

// IDInsensitive is implemented by sessions whose backend rewrites item ids
// (the Python SDK's Conversations session): digests of their items ignore
// the top-level "id" when IgnoreIDsForMatching reports true.
type IDInsensitive interface {
	IgnoreIDsForMatching() bool
}

// Capability names one optional capability.
type Capability uint16

// The optional capabilities.
const (
	CapLatest             Capability = 1 << iota // LatestReader
	CapRunContext                                // RunContextAware reporting true
	CapReplace                                   // Replacer
	CapTTL                                       // Expirer
	CapCompaction                                // CompactionAware
	CapCompactionDeferral                        // CompactionDeferrer
	CapIgnoresIDs                                // IDInsensitive reporting true
	CapCheckpoints                               // CheckpointStore
	CapCheckpointCommit                          // CheckpointCommitter
	CapVersionedReplace                          // VersionedReplacer
	CapFollow                                    // Follower
	CapAppendOnce                                // OnceAppender
)

var capabilityNames = []struct {
	c    Capability
	name string
}{
	{CapLatest, "latest"},
	{CapRunContext, "run-context"},
	{CapReplace, "replace"},
	{CapTTL, "ttl"},
	{CapCompaction, "compaction"},
	{CapCompactionDeferral, "compaction-deferral"},
	{CapIgnoresIDs, "ignores-ids"},
	{CapCheckpoints, "checkpoints"},
	{CapCheckpointCommit, "checkpoint-commit"},
	{CapVersionedReplace, "versioned-replace"},
	{CapFollow, "follow"},
	{CapAppendOnce, "append-once"},
}

// Capabilities is a set of capabilities.
type Capabilities Capability

// Caps returns the set holding cs.
func Caps(cs ...Capability) Capabilities {
	var s Capabilities
	for _, c := range cs {
		s |= Capabilities(c)
	}
	return s
}

// Has reports whether c is in the set.
func (s Capabilities) Has(c Capability) bool { return s&Capabilities(c) != 0 }

// List returns the capabilities in the set, in a stable order.
func (s Capabilities) List() []Capability {
	var out []Capability
	for _, n := range capabilityNames {
		if s.Has(n.c) {
			out = append(out, n.c)
		}
	}
	return out
}

// String lists the set's names, comma-separated, or "none".
func (s Capabilities) String() string {
	var names []string
	for _, c := range s.List() {
		names = append(names, c.String())
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// String returns the capability's name.
func (c Capability) String() string {
	for _, n := range capabilityNames {
		if n.c == c {
			return n.name
		}
	}
	return "unknown"
}

// Probe reports which optional capabilities s implements.
func Probe(s Session) Capabilities {
	var c Capabilities
	if _, ok := s.(LatestReader); ok {
		c |= Capabilities(CapLatest)
	}
	if acceptsRunContext(s) {
		c |= Capabilities(CapRunContext)
	}
	if _, ok := s.(Replacer); ok {
		c |= Capabilities(CapReplace)
	}
	if _, ok := s.(Expirer); ok {
		c |= Capabilities(CapTTL)
	}
	if _, ok := s.(CompactionAware); ok {
		c |= Capabilities(CapCompaction)
	}
	if _, ok := s.(CompactionDeferrer); ok {
		c |= Capabilities(CapCompactionDeferral)
	}
	if i, ok := s.(IDInsensitive); ok && i.IgnoreIDsForMatching() {
		c |= Capabilities(CapIgnoresIDs)
	}
	if _, ok := s.(CheckpointStore); ok {
		c |= Capabilities(CapCheckpoints)
	}
	if _, ok := s.(CheckpointCommitter); ok {
		c |= Capabilities(CapCheckpointCommit)
	}
	if _, ok := s.(VersionedReplacer); ok {
		c |= Capabilities(CapVersionedReplace)
	}
	if _, ok := s.(Follower); ok {
		c |= Capabilities(CapFollow)
	}
	if _, ok := s.(OnceAppender); ok {
		c |= Capabilities(CapAppendOnce)
	}
	return c
}
