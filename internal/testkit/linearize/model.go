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
)

var kindNames = [...]string{AddItems: "AddItems", Items: "Items", Latest: "Latest", PopItem: "PopItem", Clear: "Clear"}

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

// Input is what an operation was asked to do.
type Input struct {
	Kind  Kind `json:"k"`
	Batch []ID `json:"b,omitempty"` // AddItems: the batch
	N     int  `json:"n,omitempty"` // Latest: how many
}

// Output is what an operation returned.
type Output struct {
	// Unknown is set for an operation that failed: whether and what it did
	// is unknown (a write), or it showed nothing (a read; such operations
	// are left out of the history).
	Unknown bool `json:"u,omitempty"`
	// Items are what Items and Latest returned.
	Items []ID `json:"i,omitempty"`
	// Popped and OK are what PopItem returned.
	Popped ID   `json:"p,omitempty"`
	OK     bool `json:"ok,omitempty"`
}

// state is the model's state: the session's items, oldest first. It is
// never modified once made; Step returns new states.
type state []ID

func step(st, in, out any) (bool, any) {
	s := st.(state)
	i := in.(Input)
	o := out.(Output)
	switch i.Kind {
	case AddItems:
		next := make(state, len(s), len(s)+len(i.Batch))
		copy(next, s)
		return true, append(next, i.Batch...)
	case Items:
		return !o.Unknown && slices.Equal(s, o.Items), s
	case Latest:
		from := max(0, len(s)-i.N)
		return !o.Unknown && slices.Equal(s[from:], o.Items), s
	case PopItem:
		if o.Unknown {
			if len(s) == 0 {
				return true, s
			}
			return true, s[:len(s)-1]
		}
		if !o.OK {
			return len(s) == 0, s
		}
		if len(s) == 0 || s[len(s)-1] != o.Popped {
			return false, s
		}
		return true, s[:len(s)-1]
	case Clear:
		return true, state(nil)
	}
	return false, s
}

func hashState(st any) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for _, id := range st.(state) {
		for k := range b {
			b[k] = byte(uint64(id) >> (8 * k))
		}
		_, _ = h.Write(b[:])
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

// Describe renders an operation as "Kind(args) -> result".
func Describe(in Input, out Output) string {
	var call string
	switch in.Kind {
	case AddItems:
		call = "AddItems(" + describeIDs(in.Batch) + ")"
	case Latest:
		call = "Latest(" + strconv.Itoa(in.N) + ")"
	default:
		call = in.Kind.String() + "()"
	}
	if out.Unknown {
		return call + " -> error (maybe applied)"
	}
	switch in.Kind {
	case Items, Latest:
		return call + " -> " + describeIDs(out.Items)
	case PopItem:
		if !out.OK {
			return call + " -> empty"
		}
		return call + " -> " + out.Popped.String()
	}
	return call + " -> ok"
}

// Model is the sequential specification of one session as a list of items.
var Model = porcupine.Model{
	Init:  func() any { return state(nil) },
	Step:  step,
	Equal: func(a, b any) bool { return slices.Equal(a.(state), b.(state)) },
	Hash:  hashState,
	DescribeOperation: func(in, out any) string {
		return Describe(in.(Input), out.(Output))
	},
	DescribeState: func(st any) string {
		s := st.(state)
		if len(s) > 12 {
			return fmt.Sprintf("%d items, newest %s", len(s), describeIDs(s[len(s)-12:]))
		}
		return describeIDs(s)
	},
	DescribeOperationMetadata: func(m any) string {
		if m == nil {
			return ""
		}
		return fmt.Sprint(m)
	},
}
