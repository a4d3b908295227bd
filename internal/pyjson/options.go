package pyjson

// Options selects json.dumps keyword arguments.
//
// The zero value corresponds to json.dumps(obj, ensure_ascii=False); set
// EnsureASCII to get Python's default output.
type Options struct {
	// SortKeys sorts object keys by code point order, like sort_keys=True.
	SortKeys bool
	// EnsureASCII escapes DEL and every non-ASCII character, like
	// ensure_ascii=True (Python's default).
	EnsureASCII bool
	// Compact uses separators=(",", ":") instead of Python's default
	// (", ", ": ").
	Compact bool
	// DropTopLevel lists keys removed from a top-level object before encoding
	// (the SDK's metadata keys, and "id" when ids are ignored). Keys are
	// compared with the decoded key text. It has no effect when the value is
	// not an object, and nested objects are never affected.
	DropTopLevel []string
}
