package pyjson

import (
	"math"
)

// kind is the Python type a decoded JSON value becomes.
type kind uint8

const (
	kindNull kind = iota
	kindFalse
	kindTrue
	kindInt    // lo:hi is the literal in src
	kindFloat  // lo:hi is the literal in src
	kindString // lo:hi is the decoded text in src, or in buf when inBuf
	kindArray  // children follow the node, up to next
	kindObject // key and value nodes alternate after the node, up to next
)

// node is one decoded value. Nodes are laid out in pre-order, so the
// children of a container start right after it and its subtree ends at next.
// Decoded string text uses Python's code points encoded one by one with the
// UTF-8 bit pattern (lone surrogates as 3-byte ED A0..BF sequences), so byte
// order equals code point order.
type node struct {
	kind  kind
	inBuf bool
	next  int32
	lo    int32
	hi    int32
}

// parser is a hand-written recursive descent parser for one JSON value.
type parser struct {
	src   []byte
	pos   int
	depth int
	nodes []node
	buf   []byte // decoded text of strings that contain escapes
}

// utf8BOM is the byte order mark json.loads skips at the start of bytes.
const utf8BOM = "\xef\xbb\xbf"

// parse decodes src as json.loads does (see the package documentation).
func parse(src []byte) (*parser, error) {
	p := &parser{src: src}
	if err := p.run(); err != nil {
		return nil, err
	}
	return p, nil
}

// run parses p.src into p.nodes and p.buf, reusing their capacity.
func (p *parser) run() error {
	if len(p.src) > math.MaxInt32 {
		return syntaxError(0, "input larger than 2 GiB")
	}
	p.pos, p.depth = 0, 0
	p.nodes, p.buf = p.nodes[:0], p.buf[:0]
	if len(p.src) >= 3 && string(p.src[:3]) == utf8BOM {
		p.pos = 3
	}
	if want := len(p.src)/8 + 4; cap(p.nodes) < want {
		// A rough guess that avoids most regrowth for typical payloads.
		p.nodes = make([]node, 0, want)
	}
	if err := p.value(); err != nil {
		return err
	}
	p.skipSpace()
	if p.pos != len(p.src) {
		return syntaxError(p.pos, "extra data after the JSON value")
	}
	return nil
}

// text returns the decoded bytes of a string node or the literal of a number.
func (p *parser) text(n *node) []byte {
	if n.inBuf {
		return p.buf[n.lo:n.hi]
	}
	return p.src[n.lo:n.hi]
}

func (p *parser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses one value at p.pos, after optional whitespace.
func (p *parser) value() error {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return syntaxError(p.pos, "expecting value, found end of input")
	}
	switch c := p.src[p.pos]; c {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		return p.str()
	case 't':
		return p.literal("true", kindTrue)
	case 'f':
		return p.literal("false", kindFalse)
	case 'n':
		return p.literal("null", kindNull)
	case 'N':
		return p.token("NaN")
	case 'I':
		return p.token("Infinity")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return p.number()
		}
		return syntaxError(p.pos, "expecting value")
	}
}

func (p *parser) literal(word string, k kind) error {
	end := p.pos + len(word)
	if end > len(p.src) || string(p.src[p.pos:end]) != word {
		return syntaxError(p.pos, "expecting value")
	}
	idx := len(p.nodes)
	p.nodes = append(p.nodes, node{kind: k, next: int32(idx + 1)})
	p.pos = end
	return nil
}

// token parses one of the non-finite float tokens json.loads reads (NaN,
// Infinity, -Infinity) as a float node whose literal is the token, which
// parseFloat reads as the same value.
func (p *parser) token(word string) error {
	end := p.pos + len(word)
	if end > len(p.src) || string(p.src[p.pos:end]) != word {
		return syntaxError(p.pos, "expecting value")
	}
	idx := len(p.nodes)
	p.nodes = append(p.nodes, node{kind: kindFloat, next: int32(idx + 1), lo: int32(p.pos), hi: int32(end)})
	p.pos = end
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return syntaxError(p.pos, "nesting deeper than 10000 levels")
	}
	return nil
}

func (p *parser) array() error {
	if err := p.enter(); err != nil {
		return err
	}
	idx := len(p.nodes)
	p.nodes = append(p.nodes, node{kind: kindArray})
	p.pos++ // '['
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
	} else {
		for {
			if err := p.value(); err != nil {
				return err
			}
			p.skipSpace()
			if p.pos >= len(p.src) {
				return syntaxError(p.pos, "expecting ',' or ']', found end of input")
			}
			c := p.src[p.pos]
			p.pos++
			if c == ']' {
				break
			}
			if c != ',' {
				return syntaxError(p.pos-1, "expecting ',' or ']'")
			}
		}
	}
	p.nodes[idx].next = int32(len(p.nodes))
	p.depth--
	return nil
}

func (p *parser) object() error {
	if err := p.enter(); err != nil {
		return err
	}
	idx := len(p.nodes)
	p.nodes = append(p.nodes, node{kind: kindObject})
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
	} else {
		for {
			p.skipSpace()
			if p.pos >= len(p.src) || p.src[p.pos] != '"' {
				return syntaxError(p.pos, "expecting property name enclosed in double quotes")
			}
			if err := p.str(); err != nil {
				return err
			}
			p.skipSpace()
			if p.pos >= len(p.src) || p.src[p.pos] != ':' {
				return syntaxError(p.pos, "expecting ':' delimiter")
			}
			p.pos++
			if err := p.value(); err != nil {
				return err
			}
			p.skipSpace()
			if p.pos >= len(p.src) {
				return syntaxError(p.pos, "expecting ',' or '}', found end of input")
			}
			c := p.src[p.pos]
			p.pos++
			if c == '}' {
				break
			}
			if c != ',' {
				return syntaxError(p.pos-1, "expecting ',' or '}'")
			}
		}
	}
	p.nodes[idx].next = int32(len(p.nodes))
	p.depth--
	return nil
}
