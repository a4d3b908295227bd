package pyjson

import (
	"bytes"
	"cmp"
	"slices"
)

// entry is one member of the object being encoded. pos is its index among
// the object's kept members; val is the value node, or -1 once the member is
// dropped as a duplicate.
type entry struct {
	key []byte
	val int32
	pos int32
}

// encoder writes the parsed tree as json.dumps does.
type encoder struct {
	p       *parser
	opts    Options
	quote   *[256]byte
	comma   string
	colon   string
	out     []byte
	scratch []entry // members of the objects being encoded, used as a stack
}

// smallObject is the member count up to which duplicate keys of an unsorted
// object are found by comparing every pair instead of sorting a copy.
const smallObject = 8

func (e *encoder) value(i int32, top bool) {
	n := &e.p.nodes[i]
	switch n.kind {
	case kindNull:
		e.out = append(e.out, "null"...)
	case kindFalse:
		e.out = append(e.out, "false"...)
	case kindTrue:
		e.out = append(e.out, "true"...)
	case kindInt:
		e.out = appendInt(e.out, e.p.text(n))
	case kindFloat:
		e.out = appendFloat(e.out, parseFloat(e.p.text(n)))
	case kindString:
		e.out = appendQuoted(e.out, e.p.text(n), e.quote)
	case kindArray:
		e.array(i)
	case kindObject:
		e.object(i, top)
	}
}

func (e *encoder) array(i int32) {
	end := e.p.nodes[i].next
	if i+1 == end {
		e.out = append(e.out, '[', ']')
		return
	}
	e.out = append(e.out, '[')
	for j := i + 1; j < end; j = e.p.nodes[j].next {
		if j != i+1 {
			e.out = append(e.out, e.comma...)
		}
		e.value(j, false)
	}
	e.out = append(e.out, ']')
}

func (e *encoder) dropped(key []byte) bool {
	for _, d := range e.opts.DropTopLevel {
		if string(key) == d {
			return true
		}
	}
	return false
}

func (e *encoder) object(i int32, top bool) {
	nodes := e.p.nodes
	end := nodes[i].next
	base := len(e.scratch)
	for j := i + 1; j < end; {
		key := e.p.text(&nodes[j])
		v := j + 1
		j = nodes[v].next
		if top && e.dropped(key) {
			continue
		}
		e.scratch = append(e.scratch, entry{key: key, val: v, pos: int32(len(e.scratch) - base)})
	}
	count := len(e.scratch) - base
	if count == 0 {
		e.out = append(e.out, '{', '}')
		return
	}
	e.arrange(base, count)
	e.out = append(e.out, '{')
	first := true
	for k := base; k < base+count; k++ {
		// Read through e.scratch each time: nested objects may grow it.
		ent := e.scratch[k]
		if ent.val < 0 {
			continue
		}
		if !first {
			e.out = append(e.out, e.comma...)
		}
		first = false
		e.out = appendQuoted(e.out, ent.key, e.quote)
		e.out = append(e.out, e.colon...)
		e.value(ent.val, false)
	}
	e.out = append(e.out, '}')
	e.scratch = e.scratch[:base]
}

func compareEntries(a, b entry) int {
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c
	}
	return cmp.Compare(a.pos, b.pos)
}

// arrange puts the count members at e.scratch[base:] in output order and
// resolves duplicate keys the way a Python dict does: the first occurrence
// keeps its place, the last occurrence's value wins, the others are dropped.
func (e *encoder) arrange(base, count int) {
	if count < 2 {
		return
	}
	ents := e.scratch[base : base+count]
	if e.opts.SortKeys {
		// Byte order of the decoded text is code point order.
		slices.SortFunc(ents, compareEntries)
		for g := 0; g < count; {
			h := g + 1
			for h < count && bytes.Equal(ents[h].key, ents[g].key) {
				h++
			}
			if h-g > 1 {
				// Equal keys sort by position: the last occurrence is last.
				ents[g].val = ents[h-1].val
				for d := g + 1; d < h; d++ {
					ents[d].val = -1
				}
			}
			g = h
		}
		return
	}
	if count <= smallObject {
		for a := 0; a < count; a++ {
			if ents[a].val < 0 {
				continue
			}
			for b := a + 1; b < count; b++ {
				if bytes.Equal(ents[a].key, ents[b].key) {
					ents[a].val = ents[b].val
					ents[b].val = -1
				}
			}
		}
		return
	}
	// Larger unsorted object: find duplicates on a sorted copy, then mark
	// them on the members in insertion order.
	e.scratch = append(e.scratch, ents...)
	ents = e.scratch[base : base+count]
	sorted := e.scratch[base+count:]
	slices.SortFunc(sorted, compareEntries)
	for g := 0; g < count; {
		h := g + 1
		for h < count && bytes.Equal(sorted[h].key, sorted[g].key) {
			h++
		}
		if h-g > 1 {
			ents[sorted[g].pos].val = sorted[h-1].val
			for _, d := range sorted[g+1 : h] {
				ents[d.pos].val = -1
			}
		}
		g = h
	}
	e.scratch = e.scratch[:base+count]
}
