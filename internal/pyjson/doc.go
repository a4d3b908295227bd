// Package pyjson re-encodes JSON text byte for byte the way CPython 3.11's
// json module does for json.dumps(json.loads(raw), ...).
//
// It exists so that Go code can compute item digests exactly as the OpenAI
// Agents SDK for Python does (json.dumps(item, sort_keys=True) hashed with
// SHA-256) and can write items in the byte form Python writes them.
//
// # Decoding (json.loads)
//
// The input is one JSON value given as raw bytes, decoded as json.loads does
// for a bytes argument:
//
//   - Strict RFC 8259 grammar with JSON whitespace (space, tab, LF, CR) around
//     tokens; control characters below U+0020 must be escaped inside strings.
//   - A leading UTF-8 byte order mark is skipped (json.loads decodes bytes
//     that start with one as "utf-8-sig").
//   - The bytes are UTF-8 decoded with Python's "surrogatepass" error handler:
//     invalid UTF-8 is an error, but a raw encoded surrogate (ED A0..BF xx)
//     is accepted as a lone surrogate code point, as CPython does. An encoded
//     high+low pair therefore stays two code points (and sorts as such).
//   - \uXXXX escapes accept either hex case; a high surrogate escape directly
//     followed by a low surrogate escape is joined into one code point, any
//     other surrogate escape stays a lone surrogate code point.
//   - In an object with duplicate keys the last value wins while the key keeps
//     the position of its first occurrence, exactly like a Python dict.
//   - Numbers without fraction and exponent are Python ints of arbitrary
//     precision; "-0" is the int 0. An integer literal of more than 4300
//     digits is rejected, as CPython 3.11 rejects it with its default
//     int/str conversion limit (sys.get_int_max_str_digits()).
//   - Numbers with a fraction or exponent are Python floats, correctly rounded
//     to the nearest float64. Literals that overflow become ±Infinity, as
//     float("1e400") does; tiny ones become (signed) zero.
//   - The tokens NaN, Infinity and -Infinity, which json.loads reads by
//     default, are the floats they name. Only these exact spellings are
//     tokens: nan, -NaN, +Infinity, NaN1 and the like are errors, as in
//     CPython.
//
// Deliberate differences from json.loads, all for inputs that are not strict
// UTF-8 JSON or that CPython itself cannot round-trip:
//
//   - UTF-16 and UTF-32 input, which json.loads detects from zero bytes, is
//     rejected: only UTF-8 input is supported.
//   - Nesting deeper than 10000 levels of arrays and objects (the top-level
//     container is level 1; encoding/json has the same limit) is rejected
//     with ErrInvalidJSON, so hostile input cannot exhaust the stack. CPython
//     raises RecursionError somewhere below depth 1000 (its default recursion
//     limit, minus the caller's frames), so every document CPython can encode
//     is within the cap; documents between CPython's limit and 10000 levels
//     are encoded here although CPython would fail on them.
//   - Inputs of 2 GiB (math.MaxInt32 bytes) or more are rejected.
//
// # Encoding (json.dumps)
//
//   - Key order is insertion order, or with Options.SortKeys Python's string
//     order, i.e. code point order of the decoded keys (this equals byte
//     order of their UTF-8 form; it is not UTF-16 order).
//   - Strings escape '"', '\\', '\n', '\r', '\t', '\b' and '\f' with short
//     escapes and every other character below U+0020 as \u00XX (lowercase hex).
//     With Options.EnsureASCII, DEL (U+007F) and every non-ASCII character are
//     escaped as \uXXXX too, characters beyond the BMP as a surrogate pair
//     (\ud83d\ude00). Without it they are written as raw UTF-8, DEL included.
//     '/' is never escaped.
//   - A lone surrogate is written as its \uXXXX escape. With EnsureASCII this
//     is what CPython writes. Without it CPython returns a str holding the raw
//     surrogate, which has no UTF-8 form (encoding it fails, or needs the
//     surrogatepass handler and yields invalid UTF-8); this package writes the
//     escape instead so the output is always valid UTF-8 JSON.
//   - Ints are written as their decimal digits; floats as float.__repr__ does:
//     the shortest digits that round-trip, scientific notation iff the decimal
//     exponent is below -4 or at least 16 (1e-05, 1e+16, 1.5e-07), fixed
//     notation with a ".0" suffix for integral values (100.0, -0.0) otherwise.
//     NaN and the infinities (from the tokens, or from overflowed literals)
//     are written as NaN, Infinity and -Infinity, as json.dumps does with its
//     default allow_nan=True; that output is not strict JSON.
//   - Separators are ", " and ": " (Python's default when indent is None), or
//     "," and ":" with Options.Compact. Empty containers are {} and [].
package pyjson
