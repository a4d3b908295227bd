package linearize

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/agentsessions/sessions/session"
)

// Kind is the kind of a session operation.
type Kind uint8

// The operations of the model.
const (
	// AddItems appends a batch (session.Append).
	AddItems Kind = iota
	// Items reads the whole history (session.All).
	Items
	// Latest reads the newest N items (session.Latest).
	Latest
	// PopItem removes and returns the newest item (session.Pop).
	PopItem
	// Clear deletes every item (session.Clear).
	Clear
	// Follow reads the items after the client's cursor
	// (session.ReadSince), or finds the cursor lost.
	Follow
	// AppendOnce appends a batch under an operation id unless a batch with
	// that id was appended before (session.AppendOnce).
	AppendOnce
	// Commit appends a batch and saves the checkpoint CheckpointName iff
	// its stored version is the one given, else conflicts and writes
	// nothing (session.CheckpointCommitter's AppendWithCheckpoint).
	Commit
	// LoadCheckpoint reads the checkpoint CheckpointName
	// (session.CheckpointStore's LoadCheckpoint).
	LoadCheckpoint
	// SaveCheckpoint saves the checkpoint CheckpointName iff its stored
	// version is the one given (session.AnyVersion: whatever it is), else
	// conflicts and writes nothing (session.CheckpointStore's
	// SaveCheckpoint).
	SaveCheckpoint
	// DeleteCheckpoint removes the checkpoint CheckpointName iff its
	// stored version is the one given (session.AnyVersion: whatever it
	// is; 0: none, and then it removes nothing), else conflicts
	// (session.CheckpointStore's DeleteCheckpoint).
	DeleteCheckpoint
)

var kindNames = [...]string{AddItems: "AddItems", Items: "Items", Latest: "Latest", PopItem: "PopItem", Clear: "Clear",
	Follow: "Follow", AppendOnce: "AppendOnce", Commit: "Commit", LoadCheckpoint: "LoadCheckpoint",
	SaveCheckpoint: "SaveCheckpoint", DeleteCheckpoint: "DeleteCheckpoint"}

// String returns the operation's name.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// ID identifies one item a history wrote: its client in the upper 32 bits
// and the client's sequence number in the lower 32. NoID stands for an item
// that is not one of the history's (its content did not parse).
type ID int64

// NoID is the ID of an item that no client of the history wrote.
const NoID ID = -1

// MakeID returns the ID of client's seq-th item.
func MakeID(client, seq int) ID { return ID(int64(client)<<32 | int64(uint32(seq))) }

// Client returns the client that wrote the item.
func (id ID) Client() int { return int(int64(id) >> 32) }

// Seq returns the item's sequence number at its client.
func (id ID) Seq() int { return int(uint32(id)) }

// String returns "c<client>.<seq>", which is also the item's content.
func (id ID) String() string {
	if id == NoID {
		return "?"
	}
	return "c" + strconv.Itoa(id.Client()) + "." + strconv.Itoa(id.Seq())
}

// Item returns the session item whose content is id.
func (id ID) Item() session.Item {
	return session.MustItem(`{"type":"message","role":"user","content":"` + id.String() + `"}`)
}

// ParseID returns the ID an item written by Item carries, or NoID.
func ParseID(it session.Item) ID {
	s, ok := it.StringField("content")
	if !ok {
		return NoID
	}
	return parseID(s)
}

// parseID returns the ID whose String is s, or NoID.
func parseID(s string) ID {
	rest, ok := strings.CutPrefix(s, "c")
	if !ok {
		return NoID
	}
	c, q, ok := strings.Cut(rest, ".")
	if !ok {
		return NoID
	}
	client, err1 := strconv.Atoi(c)
	seq, err2 := strconv.Atoi(q)
	if err1 != nil || err2 != nil || client < 0 || seq < 0 {
		return NoID
	}
	return MakeID(client, seq)
}

// ParseIDs returns the IDs of items.
func ParseIDs(items []session.Item) []ID {
	out := make([]ID, len(items))
	for i, it := range items {
		out[i] = ParseID(it)
	}
	return out
}

// OnceClient is the client number of the items of AppendOnce batches:
// the batch of an operation id is the same whoever appends it (OnceBatch),
// so that a retry, by any client of any process, carries the same items.
const OnceClient = 1 << 20

// OnceBatch returns the batch of operation op: 1 to 3 items, by op.
func OnceBatch(op int) []ID {
	b := make([]ID, 1+op%3)
	for i := range b {
		b[i] = MakeID(OnceClient, 3*op+i)
	}
	return b
}

// OnceOpID returns the operation id (session.AppendOnce's opID) of op.
func OnceOpID(op int) string { return "op" + strconv.Itoa(op) }

// CheckpointName is the name of the one checkpoint that Commit and
// SaveCheckpoint save, DeleteCheckpoint removes and LoadCheckpoint reads.
const CheckpointName = "run"

// Doc returns the checkpoint document whose content is id.
func (id ID) Doc() []byte { return []byte(`{"doc":"` + id.String() + `"}`) }

// ParseDoc returns the ID a document written by Doc carries, or NoID.
func ParseDoc(doc []byte) ID {
	it, err := session.NewItem(doc)
	if err != nil {
		return NoID
	}
	s, ok := it.StringField("doc")
	if !ok {
		return NoID
	}
	return parseID(s)
}

// Input is what an operation was asked to do.
type Input struct {
	Kind  Kind `json:"k"`
	Batch []ID `json:"b,omitempty"` // AddItems, AppendOnce: the batch
	// N is how many items Latest reads; for Follow, how many items the
	// client's cursor stands for: the whole history as its previous Follow
	// saw it (0: the zero cursor).
	N int `json:"n,omitempty"`
	// Last is, for Follow with N > 0, the last item the cursor stands for.
	// Items are unique and never move while they stay, so the history
	// still begins with the N items the client saw exactly when its N-th
	// item is Last.
	Last ID `json:"l,omitempty"`
	// Seen is, for Follow, the N items the cursor stands for. The model
	// needs N and Last only; Minimize keeps the writes of these items.
	Seen []ID `json:"s,omitempty"`
	// Op is AppendOnce's operation (OnceOpID, OnceBatch).
	Op int `json:"op,omitempty"`
	// Version is the checkpoint version Commit, SaveCheckpoint and
	// DeleteCheckpoint expect stored (0: none; session.AnyVersion, for
	// SaveCheckpoint and DeleteCheckpoint: whatever is), and Doc the
	// document Commit and SaveCheckpoint save (ID.Doc).
	Version int64 `json:"v,omitempty"`
	Doc     ID    `json:"d,omitempty"`
}

// Output is what an operation returned.
type Output struct {
	// Unknown is set for an operation that failed: whether and what it did
	// is unknown (a write), or it showed nothing (a read; such operations
	// are left out of the history).
	Unknown bool `json:"u,omitempty"`
	// Items are what Items, Latest and Follow returned.
	Items []ID `json:"i,omitempty"`
	// Popped and OK are what PopItem returned; OK is also AppendOnce's
	// result (true: this call appended), Commit's, SaveCheckpoint's and
	// DeleteCheckpoint's (true: it succeeded; false:
	// session.ErrCheckpointConflict) and LoadCheckpoint's (true: it found
	// the checkpoint; false: session.ErrNoCheckpoint).
	Popped ID   `json:"p,omitempty"`
	OK     bool `json:"ok,omitempty"`
	// Version is the version a Commit or SaveCheckpoint that succeeded
	// returned, or that LoadCheckpoint found, and Doc the document
	// LoadCheckpoint found (ParseDoc).
	Version int64 `json:"v,omitempty"`
	Doc     ID    `json:"d,omitempty"`
	// Lost is set for a Follow that returned session.ErrCursorLost.
	Lost bool `json:"lost,omitempty"`
	// Invalid is set for a Follow that returned session.ErrInvalidCursor
	// for the cursor the session gave: never right.
	Invalid bool `json:"inv,omitempty"`
}

// state is the model's state: the session's items, oldest first, the
// operations AppendOnce carried out, sorted (they outlive Clear and
// PopItem: session.OnceAppender's documentation, "an operation that
// happened stays happened"; docs/semantics.md §2.1 keeps Redis's in a hash
// that Clear keeps), and the checkpoint CheckpointName (Clear and PopItem
// keep it too: session.CheckpointStore).
//
// The checkpoint is its version (0: none) and document. A save advances
// the version by one; the first creation is at version 1. After a delete,
// session.CheckpointStore promises a creation a version of at least 1 and
// no more: the SQL, memory and Redis stores start again at 1, while the
// Mongo store, which deletes by saving a tombstone as the next version,
// creates at the deleted version plus 2 (conformance's
// clauseCheckpointCRUD checks only "at least 1"). So removed records that
// a delete removed the checkpoint, after which a creation may return any
// version of at least 1; one whose outcome is unknown leaves the version
// unknown (unknownVersion) until a load or a save that succeeds shows it.
// not holds, sorted, the versions that it cannot be meanwhile (those that
// conflicted, and 1 after a save at session.AnyVersion).
//
// A state is never modified once made; Step returns new states.
type state struct {
	items   []ID
	ops     []int
	version int64
	doc     ID
	removed bool
	not     []int64
}

// unknownVersion is the version of a checkpoint that is there, at a
// version of at least 1 that no operation has shown yet (see state).
const unknownVersion int64 = -2

// match is whether the stored checkpoint is at the version an operation
// names: no, yes, or maybe (its version is unknown).
type match uint8

const (
	noMatch match = iota
	isMatch
	maybeMatch
)

// match reports whether the stored checkpoint is at version v
// (session.AnyVersion matches whatever is stored).
func (s state) match(v int64) match {
	switch {
	case v == session.AnyVersion:
		return isMatch
	case s.version != unknownVersion:
		if s.version == v {
			return isMatch
		}
		return noMatch
	case v < 1 || slices.Contains(s.not, v):
		return noMatch
	}
	return maybeMatch
}

// checkpointWrite steps a Commit, SaveCheckpoint or DeleteCheckpoint: one
// at the stored version (or session.AnyVersion) succeeds (a commit appends
// its batch), any other conflicts and writes nothing; one that failed may
// have succeeded, but only where it would have. A success after which the
// version is unknown must say what it is (the output of a Commit or
// SaveCheckpoint), and may not say a version the state rules out.
func checkpointWrite(s state, i Input, o Output) (bool, state) {
	m := s.match(i.Version)
	if m == noMatch {
		// A conflict writes nothing, whether or not it was reported.
		return o.Unknown || !o.OK, s
	}
	if !o.Unknown && !o.OK {
		if m == isMatch {
			return false, s
		}
		// It conflicted: the unknown version is not the one it named.
		next := s
		at, _ := slices.BinarySearch(s.not, i.Version)
		next.not = slices.Insert(slices.Clone(s.not), at, i.Version)
		return true, next
	}
	// It succeeded, or may have: it takes effect here (and a failed one
	// that did not is linearized after everything else, to no effect).
	next := s
	if i.Kind == DeleteCheckpoint {
		if s.version == 0 {
			return true, s // nothing to delete
		}
		next.version, next.doc, next.removed, next.not = 0, 0, true, nil
		return true, next
	}
	if i.Kind == Commit {
		next = s.appended(i.Batch)
	}
	next.doc, next.not = i.Doc, nil
	switch {
	case m == maybeMatch:
		// The unknown version was the one it named.
		next.version = i.Version + 1
	case s.version > 0:
		next.version = s.version + 1
	case s.version == 0 && !s.removed:
		next.version = 1
	case s.version == 0:
		next.version = unknownVersion // created again after a delete
	default:
		// At session.AnyVersion over an unknown version: the one after
		// it, which is not 1 and not one after a version ruled out.
		next.version = unknownVersion
		next.not = make([]int64, 0, len(s.not)+1)
		next.not = append(next.not, 1)
		for _, v := range s.not {
			next.not = append(next.not, v+1)
		}
	}
	if o.Unknown {
		return true, next
	}
	if next.version == unknownVersion {
		if o.Version < 1 || slices.Contains(next.not, o.Version) {
			return false, s
		}
		next.version, next.not = o.Version, nil
		return true, next
	}
	return o.Version == next.version, next
}

// with returns s with items instead of its own.
func (s state) with(items []ID) state {
	s.items = items
	return s
}

func (s state) appended(batch []ID) state {
	next := make([]ID, len(s.items), len(s.items)+len(batch))
	copy(next, s.items)
	return s.with(append(next, batch...))
}

// cursorIntact reports whether the history still begins with the n items
// a cursor stands for, the last of them last: the zero cursor is never
// lost, and any other is lost once its last item is gone (a pop of it or
// below it, a clear), even if the history grew back past it.
func (s state) cursorIntact(n int, last ID) bool {
	return n == 0 || n <= len(s.items) && s.items[n-1] == last
}

func step(st, in, out any) (bool, any) {
	s := st.(state)
	i := in.(Input)
	o := out.(Output)
	switch i.Kind {
	case AddItems:
		return true, s.appended(i.Batch)
	case Items:
		return !o.Unknown && slices.Equal(s.items, o.Items), s
	case Latest:
		from := max(0, len(s.items)-i.N)
		return !o.Unknown && slices.Equal(s.items[from:], o.Items), s
	case Follow:
		if o.Unknown || o.Invalid {
			return false, s
		}
		intact := s.cursorIntact(i.N, i.Last)
		if o.Lost {
			return !intact, s
		}
		return intact && slices.Equal(s.items[i.N:], o.Items), s
	case PopItem:
		n := len(s.items)
		if o.Unknown {
			if n == 0 {
				return true, s
			}
			return true, s.with(s.items[:n-1])
		}
		if !o.OK {
			return n == 0, s
		}
		if n == 0 || s.items[n-1] != o.Popped {
			return false, s
		}
		return true, s.with(s.items[:n-1])
	case Clear:
		return true, s.with(nil)
	case AppendOnce:
		at, done := slices.BinarySearch(s.ops, i.Op)
		if done {
			// A retry: it appends nothing and reports false, even if
			// its outcome is unknown.
			return o.Unknown || !o.OK, s
		}
		if !o.Unknown && !o.OK {
			return false, s
		}
		next := s.appended(i.Batch)
		next.ops = slices.Insert(slices.Clone(s.ops), at, i.Op)
		return true, next
	case Commit, SaveCheckpoint, DeleteCheckpoint:
		return checkpointWrite(s, i, o)
	case LoadCheckpoint:
		switch {
		case o.Unknown:
			return false, s
		case s.version == 0:
			return !o.OK, s
		case s.version == unknownVersion:
			// The load shows the version.
			if !o.OK || o.Doc != s.doc || o.Version < 1 || slices.Contains(s.not, o.Version) {
				return false, s
			}
			next := s
			next.version, next.not = o.Version, nil
			return true, next
		}
		return o.OK && o.Version == s.version && o.Doc == s.doc, s
	}
	return false, s
}

func hashState(st any) uint64 {
	s := st.(state)
	h := fnv.New64a()
	var b [8]byte
	put := func(v uint64) {
		for k := range b {
			b[k] = byte(v >> (8 * k))
		}
		_, _ = h.Write(b[:])
	}
	for _, id := range s.items {
		put(uint64(id))
	}
	put(^uint64(0))
	for _, op := range s.ops {
		put(uint64(op))
	}
	put(uint64(s.version))
	put(uint64(s.doc))
	if s.removed {
		put(1)
	}
	for _, v := range s.not {
		put(uint64(v))
	}
	return h.Sum64()
}

func describeIDs(ids []ID) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(id.String())
	}
	b.WriteByte(']')
	return b.String()
}

// describeVersion renders a version an operation names: "v3", or "any"
// for session.AnyVersion.
func describeVersion(v int64) string {
	if v == session.AnyVersion {
		return "any"
	}
	return "v" + strconv.FormatInt(v, 10)
}

// Describe renders an operation as "Kind(args) -> result".
func Describe(in Input, out Output) string {
	var call string
	switch in.Kind {
	case AddItems:
		call = "AddItems(" + describeIDs(in.Batch) + ")"
	case Latest:
		call = "Latest(" + strconv.Itoa(in.N) + ")"
	case Follow:
		call = "Follow(start)"
		if in.N > 0 {
			call = "Follow(after " + strconv.Itoa(in.N) + " items, last " + in.Last.String() + ")"
		}
	case AppendOnce:
		call = "AppendOnce(" + OnceOpID(in.Op) + ", " + describeIDs(in.Batch) + ")"
	case Commit:
		call = "Commit(" + describeIDs(in.Batch) + ", doc " + in.Doc.String() + ", at " + describeVersion(in.Version) + ")"
	case SaveCheckpoint:
		call = "SaveCheckpoint(doc " + in.Doc.String() + ", at " + describeVersion(in.Version) + ")"
	case DeleteCheckpoint:
		call = "DeleteCheckpoint(at " + describeVersion(in.Version) + ")"
	default:
		call = in.Kind.String() + "()"
	}
	if out.Unknown {
		return call + " -> error (maybe applied)"
	}
	switch in.Kind {
	case Items, Latest:
		return call + " -> " + describeIDs(out.Items)
	case Follow:
		switch {
		case out.Invalid:
			return call + " -> invalid cursor"
		case out.Lost:
			return call + " -> cursor lost"
		}
		return call + " -> " + describeIDs(out.Items)
	case AppendOnce:
		if !out.OK {
			return call + " -> false (done before)"
		}
		return call + " -> true"
	case PopItem:
		if !out.OK {
			return call + " -> empty"
		}
		return call + " -> " + out.Popped.String()
	case Commit, SaveCheckpoint:
		if !out.OK {
			return call + " -> conflict"
		}
		return call + " -> v" + strconv.FormatInt(out.Version, 10)
	case DeleteCheckpoint:
		if !out.OK {
			return call + " -> conflict"
		}
		return call + " -> ok"
	case LoadCheckpoint:
		if !out.OK {
			return call + " -> none"
		}
		return call + " -> v" + strconv.FormatInt(out.Version, 10) + " doc " + out.Doc.String()
	}
	return call + " -> ok"
}

// Model is the sequential specification of one session as a list of items.
var Model = porcupine.Model{
	Init: func() any { return state{} },
	Step: step,
	Equal: func(a, b any) bool {
		x, y := a.(state), b.(state)
		return slices.Equal(x.items, y.items) && slices.Equal(x.ops, y.ops) && x.version == y.version && x.doc == y.doc &&
			x.removed == y.removed && slices.Equal(x.not, y.not)
	},
	Hash: hashState,
	DescribeOperation: func(in, out any) string {
		return Describe(in.(Input), out.(Output))
	},
	DescribeState: func(st any) string {
		s := st.(state)
		var d string
		if len(s.items) > 12 {
			d = fmt.Sprintf("%d items, newest %s", len(s.items), describeIDs(s.items[len(s.items)-12:]))
		} else {
			d = describeIDs(s.items)
		}
		if len(s.ops) > 0 {
			ops := make([]string, len(s.ops))
			for k, op := range s.ops {
				ops[k] = OnceOpID(op)
			}
			d += " done: " + strings.Join(ops, " ")
		}
		switch {
		case s.version > 0:
			d += " checkpoint: v" + strconv.FormatInt(s.version, 10) + " doc " + s.doc.String()
		case s.version == unknownVersion:
			d += " checkpoint: v? doc " + s.doc.String()
			for k, v := range s.not {
				if k == 0 {
					d += " not"
				}
				d += " v" + strconv.FormatInt(v, 10)
			}
		case s.removed:
			d += " checkpoint: deleted"
		}
		return d
	},
	DescribeOperationMetadata: func(m any) string {
		if m == nil {
			return ""
		}
		return fmt.Sprint(m)
	},
}
