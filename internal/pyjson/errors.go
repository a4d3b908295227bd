package pyjson

import (
	"errors"
	"fmt"
)

// ErrInvalidJSON is wrapped by every error Dumps returns: the input is not
// one JSON value json.loads reads, or it is one CPython's json module cannot
// round-trip (see the package documentation for the exact rules).
var ErrInvalidJSON = errors.New("pyjson: invalid JSON")

// maxDepth is the deepest nesting of arrays and objects Dumps accepts; the
// top-level container is at depth 1. It matches encoding/json's limit and is
// far above what CPython's default recursion limit lets json.loads decode
// (below 1000).
const maxDepth = 10000

// maxIntDigits is CPython 3.11's default limit on the number of digits in an
// int/str conversion (sys.get_int_max_str_digits()).
const maxIntDigits = 4300

// syntaxError returns an error wrapping ErrInvalidJSON that names the byte
// offset of the problem.
func syntaxError(offset int, msg string) error {
	return fmt.Errorf("%w: %s at offset %d", ErrInvalidJSON, msg, offset)
}
