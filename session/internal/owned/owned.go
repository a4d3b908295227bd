// Package owned lets session/driver wrap bytes it owns in a session.Item
// without copying them, and without package session exporting a
// constructor that callers could misuse.
package owned

// Item is set by package session: it returns b, which the caller gives up,
// as a session.Item (the dynamic type of the result), or an error when b is
// not one JSON object.
var Item func(b []byte) (any, error)

// ValidateBatch is set by package session: it checks that every item of
// items (a []session.Item) is valid, reporting the first that is not.
var ValidateBatch func(items any) error

// Block is set by package session: it returns room for the bookkeeping of
// n Items, allocated at once, for InBlock.
var Block func(n int) any

// InBlock is set by package session: it does what Item does, keeping the
// Item's bookkeeping in block (from Block), which must have room left.
var InBlock func(block any, b []byte) (any, error)
