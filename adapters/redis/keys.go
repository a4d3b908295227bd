package redis

import (
	"fmt"
	"strings"

	"github.com/agentsessions/sessions/session"
)

// Key suffixes of the native layout.
const (
	itemsSuffix = ":items"
	metaSuffix  = ":meta"
)

// Key suffixes of the Python layout.
const (
	pythonMessagesSuffix = ":messages"
	pythonCounterSuffix  = ":counter"
)

// checkpointsSuffix ends the key of a session's checkpoint hash in the
// native layout, <prefix>:{<escaped id>}:checkpoints, in the session's hash
// slot; pythonCheckpointsSuffix ends it in the Python layout (see
// pythonCheckpointKey). The hash holds two fields per checkpoint name:
//
//	v:<name>   the version, a decimal integer (HINCRBY), at least 1
//	d:<name>   the document, its bytes as given
//
// Both fields of a name are written and deleted together by one script,
// so a name has both or neither. The prefixes keep the two fields of one
// name apart whatever bytes the name holds, and ListCheckpoints reads the
// names back from the v: fields (HKEYS, no document read). The hash also
// holds AddItemsOnce's operation ids, o:<operation id> (once.go). The
// Python SDK never reads or writes this key.
const (
	checkpointsSuffix       = ":checkpoints"
	pythonCheckpointsSuffix = checkpointsSuffix + pythonMessagesSuffix + pythonCounterSuffix
	versionField            = "v:"
	documentField           = "d:"
)

// pythonCheckpointKey returns the key of the checkpoint hash of the
// Python-layout session whose hash key is base: base +
// ":checkpoints:messages:counter". Every key under the prefix is some
// Python-layout id's key, so this one is chosen to be only the keys of ids
// the layout refuses: the hash key of an id ending in ":counter", and the
// counter key of an id ending in ":messages" (no messages key ends in
// ":counter"). No id the layout accepts, ":checkpoints" suffix and all,
// names it, and no key of an accepted id is it. (The Python SDK's own
// layout already breaks such ids: a Python id ending in ":messages" has
// its hash key on another id's messages list.)
func pythonCheckpointKey(base string) string { return base + pythonCheckpointsSuffix }

// escapeID returns id with '%', '{', '}' and ':' percent-escaped (as %25,
// %7B, %7D, %3A). The result never holds a brace, so it can sit between
// the braces of a hash tag: Redis hashes the substring between the first
// '{' of a key and the first '}' after it, and with the prefix free of
// braces those are exactly the braces the layout puts around the escaped
// id. Escaping '%' itself makes the mapping injective (unescapeID inverts
// it), and escaping ':' keeps the id from looking like extra key segments
// to tools that split keys on ':'. Every other byte, NUL and invalid UTF-8
// included, is kept as is: Redis keys are binary safe.
func escapeID(id string) string {
	n := 0
	for i := 0; i < len(id); i++ {
		if needsEscape(id[i]) {
			n++
		}
	}
	if n == 0 {
		return id
	}
	var b strings.Builder
	b.Grow(len(id) + 2*n)
	for i := 0; i < len(id); i++ {
		c := id[i]
		if needsEscape(c) {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

const hexDigits = "0123456789ABCDEF"

func needsEscape(c byte) bool { return c == '%' || c == '{' || c == '}' || c == ':' }

// unescapeID inverts escapeID. It accepts only what escapeID produces: a
// '%' followed by the upper-case hex code of an escaped byte, and no raw
// escaped byte.
func unescapeID(s string) (string, bool) {
	if !strings.ContainsAny(s, "%{}:") {
		return s, true
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if needsEscape(c) {
				return "", false
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, lo := strings.IndexByte(hexDigits, s[i+1]), strings.IndexByte(hexDigits, s[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		d := byte(hi<<4 | lo)
		if !needsEscape(d) {
			return "", false
		}
		b.WriteByte(d)
		i += 2
	}
	return b.String(), true
}

// nativeKeys returns the keys of session id in the native layout: the
// items list first, then the meta hash (the order the scripts expect).
func nativeKeys(prefix, id string) []string {
	base := prefix + ":{" + escapeID(id) + "}"
	return []string{base + itemsSuffix, base + metaSuffix}
}

// nativeCheckpointKey returns the key of session id's checkpoint hash in
// the native layout: it carries the session's hash tag, so it lives in the
// slot of the session's other keys.
func nativeCheckpointKey(prefix, id string) string {
	return prefix + ":{" + escapeID(id) + "}" + checkpointsSuffix
}

// pythonKeys returns the keys of session id in the Python SDK's layout, in
// the order the scripts expect: the messages list, the session hash, the
// counter.
func pythonKeys(prefix, id string) ([]string, error) {
	// The Python layout cannot escape ids (it must match the Python SDK's
	// keys byte for byte), so an id whose hash key would be another
	// session's messages or counter key is refused instead.
	if strings.HasSuffix(id, pythonMessagesSuffix) || strings.HasSuffix(id, pythonCounterSuffix) {
		return nil, fmt.Errorf("%w: in the Python layout an id ending in %q or %q names another session's key",
			session.ErrInvalidSessionID, pythonMessagesSuffix, pythonCounterSuffix)
	}
	base := prefix + ":" + id
	return []string{base + pythonMessagesSuffix, base, base + pythonCounterSuffix}, nil
}

// KeyKind says which key of a native-layout session a key is.
type KeyKind int

// The keys of a native-layout session.
const (
	KeyItems       KeyKind = iota + 1 // the list of items
	KeyMeta                           // the metadata hash
	KeyCheckpoints                    // the checkpoint hash
)

// ParseKey returns the session id and kind of a native-layout key under
// prefix (empty means DefaultKeyPrefix), for tools that list sessions with
// SCAN. ok is false for any key the layout does not produce. A session
// whose only key is its checkpoint hash holds no items, and is a session
// when the hash holds a checkpoint (a v: field; not only AddItemsOnce's
// operation ids): ListSessions lists the KeyItems keys' sessions and
// those.
func ParseKey(prefix, key string) (id string, kind KeyKind, ok bool) {
	if prefix == "" {
		prefix = DefaultKeyPrefix
	}
	rest, found := strings.CutPrefix(key, prefix+":{")
	if !found {
		return "", 0, false
	}
	end := strings.IndexByte(rest, '}')
	if end <= 0 {
		return "", 0, false
	}
	switch rest[end+1:] {
	case itemsSuffix:
		kind = KeyItems
	case metaSuffix:
		kind = KeyMeta
	case checkpointsSuffix:
		kind = KeyCheckpoints
	default:
		return "", 0, false
	}
	id, ok = unescapeID(rest[:end])
	if !ok || id == "" {
		return "", 0, false
	}
	return id, kind, true
}
