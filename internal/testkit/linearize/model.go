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
)

var kindNames = [...]string{AddItems: "AddItems", Items: "Items", Latest: "Latest", PopItem: "PopItem", Clear: "Clear",
	Follow: "Follow", AppendOnce: "AppendOnce", Commit: "Commit", LoadCheckpoint: "LoadCheckpoint"}

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

// CheckpointName is the name of the one checkpoint that Commit saves and
// LoadCheckpoint reads.
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
	// Version is the checkpoint version Commit expects stored (0: none),
	// and Doc the document it saves (ID.Doc).
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
	// result (true: this call appended), Commit's (true: it committed;
	// false: session.ErrCheckpointConflict) and LoadCheckpoint's (true: it
	// found the checkpoint; false: session.ErrNoCheckpoint).
	Popped ID   `json:"p,omitempty"`
	OK     bool `json:"ok,omitempty"`
	// Version is the version a Commit that committed returned, or that
	// LoadCheckpoint found, and Doc the document LoadCheckpoint found
	// (ParseDoc).
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
// that Clear keeps), and the checkpoint CheckpointName: its version (0:
// none) and document (Clear keeps it too: session.CheckpointStore). It is
// never modified once made; Step returns new states.
type state struct {
	items   []ID
	ops     []int
	version int64
	doc     ID
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
	case Commit:
		if s.version != i.Version {
			// A conflict writes nothing, whether or not it was reported.
			return o.Unknown || !o.OK, s
		}
		if !o.Unknown && (!o.OK || o.Version != s.version+1) {
			return false, s
		}
		next := s.appended(i.Batch)
		next.version, next.doc = s.version+1, i.Doc
		return true, next
	case LoadCheckpoint:
		if o.Unknown {
			return false, s
		}
		if s.version == 0 {
			return !o.OK, s
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
		call = "Commit(" + describeIDs(in.Batch) + ", doc " + in.Doc.String() + ", at v" + strconv.FormatInt(in.Version, 10) + ")"
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
	case Commit:
		if !out.OK {
			return call + " -> conflict"
		}
		return call + " -> v" + strconv.FormatInt(out.Version, 10)
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
		return slices.Equal(x.items, y.items) && slices.Equal(x.ops, y.ops) && x.version == y.version && x.doc == y.doc
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
		if s.version > 0 {
			d += " checkpoint: v" + strconv.FormatInt(s.version, 10) + " doc " + s.doc.String()
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
