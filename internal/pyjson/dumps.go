package pyjson

import "sync"

// state holds the reusable working memory of one Dumps call.
type state struct {
	p parser
	e encoder
}

// statePool recycles parse trees and scratch space between calls, so a call
// allocates little more than its output.
var statePool = sync.Pool{New: func() any { return new(state) }}

// Pooled states whose buffers grew beyond these sizes are dropped rather
// than kept alive by the pool.
const (
	maxPooledNodes   = 1 << 18
	maxPooledBuf     = 1 << 22
	maxPooledScratch = 1 << 12
)

// Dumps parses raw (one JSON value, normally an object) the way json.loads
// does and re-encodes it the way json.dumps does with opts.
//
// It returns an error wrapping ErrInvalidJSON when raw is not one JSON value
// json.loads reads (strict JSON plus the NaN, Infinity and -Infinity tokens)
// or is one CPython cannot round-trip; the package documentation lists the
// rules and the few deliberate differences from CPython (non-UTF-8 input is
// rejected, nesting is capped at 10000 levels, lone surrogates are always
// escaped). raw is not
// retained, and the result does not share memory with it.
func Dumps(raw []byte, opts Options) ([]byte, error) {
	s := statePool.Get().(*state)
	defer s.release()
	s.p.src = raw
	if err := s.p.run(); err != nil {
		return nil, err
	}
	e := &s.e
	e.p = &s.p
	e.opts = opts
	e.quote, e.comma, e.colon = &quoteUnicode, ", ", ": "
	if opts.EnsureASCII {
		e.quote = &quoteASCII
	}
	if opts.Compact {
		e.comma, e.colon = ",", ":"
	}
	e.out = make([]byte, 0, len(raw)+len(raw)/8+16)
	e.value(0, true)
	out := e.out
	e.out = nil
	return out, nil
}

// release clears references to caller memory and returns s to the pool
// unless its buffers grew too large to keep.
func (s *state) release() {
	s.p.src = nil
	s.e.p, s.e.opts, s.e.out = nil, Options{}, nil
	clear(s.e.scratch[:cap(s.e.scratch)]) // drop key slices into src
	s.e.scratch = s.e.scratch[:0]
	if cap(s.p.nodes) > maxPooledNodes || cap(s.p.buf) > maxPooledBuf || cap(s.e.scratch) > maxPooledScratch {
		return
	}
	statePool.Put(s)
}
