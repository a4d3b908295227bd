package driver

import (
	"unsafe"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/internal/owned"
)

// maxBlock bounds the Items whose bookkeeping one Decoder allocation holds.
const maxBlock = 64

// A Decoder decodes the records of one read as DecodeStored and
// DecodeStoredString do, but allocates the bookkeeping of many Items at
// once (up to 64) instead of one allocation each: a read of n records
// costs n/64 allocations instead of n. Items it returned share those
// blocks: keeping one keeps its block's bookkeeping (64 bytes per Item)
// alive, never the other Items' bytes.
//
// The zero Decoder is ready to use, and a nil *Decoder decodes each record
// on its own, as DecodeStored does. A Decoder is not safe for concurrent
// use; it is meant to live on the stack of one read.
type Decoder struct {
	block any // from owned.Block
	left  int // room left in block
	want  int // records still expected (Expect), 0 if unknown
	size  int // the last block's size, when want is unknown
}

// Expect tells d that about n more records follow, so that its next block
// is sized for them; without it, blocks grow from 8 to 64.
func (d *Decoder) Expect(n int) {
	if d != nil {
		d.want = max(n, 0)
	}
}

// Decode is DecodeStored through d.
func (d *Decoder) Decode(b []byte) (session.Item, error) {
	if d == nil {
		return DecodeStored(b)
	}
	if d.left == 0 {
		n := d.want
		if n == 0 {
			d.size = min(max(2*d.size, 8), maxBlock)
			n = d.size
		}
		n = min(n, maxBlock)
		d.block, d.left = owned.Block(n), n
	}
	d.left--
	if d.want > 0 {
		d.want--
	}
	v, err := owned.InBlock(d.block, b)
	return v.(session.Item), err
}

// DecodeString is DecodeStoredString through d, with the same rule: use it
// only on a string allocated for this read.
func (d *Decoder) DecodeString(s string) (session.Item, error) {
	if s == "" {
		return d.Decode(nil)
	}
	return d.Decode(unsafe.Slice(unsafe.StringData(s), len(s)))
}
