package redis

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentsessions/sessions/session/driver"
)

// DefaultKeyPrefix is the key prefix of the native layout when
// Options.KeyPrefix is empty. It differs from DefaultPythonKeyPrefix, and
// neither lies under the other, so that no session id of one layout can
// name a key of the other in one database (see the package documentation,
// "Two layouts in one database"). Before this was so, the native default
// was "agents:session": see "Stores written with the old native default".
const DefaultKeyPrefix = "agents:native"

// DefaultPythonKeyPrefix is the key prefix of the Python layout when
// Options.KeyPrefix is empty: the Python SDK's RedisSession default.
const DefaultPythonKeyPrefix = "agents:session"

// DefaultMaxBatchBytes is the batch size limit used when
// Options.MaxBatchBytes is zero. A batch is one Lua script call: the
// server is blocked while it runs and a request beyond the server's
// client-query-buffer-limit (1 GiB by default) gets the connection closed
// with an unknown outcome, so batches are kept well below that.
const DefaultMaxBatchBytes = 64 << 20

// Layout chooses how a session is laid out in Redis keys.
type Layout int

const (
	// LayoutNative keeps a session in two keys that share one hash tag, so
	// every operation is single-slot (and atomic) in a Redis Cluster:
	// <prefix>:{<escaped id>}:items (a list) and <prefix>:{<escaped
	// id>}:meta (a hash). It is the default.
	LayoutNative Layout = iota
	// LayoutPython reads and writes the Python SDK's RedisSession layout:
	// the hash <prefix>:<id>, the list <prefix>:<id>:messages and the
	// counter <prefix>:<id>:counter. The three keys share no hash tag, so
	// it is refused on cluster clients.
	LayoutPython
)

// String names the layout.
func (l Layout) String() string {
	switch l {
	case LayoutNative:
		return "native"
	case LayoutPython:
		return "python"
	default:
		return fmt.Sprintf("Layout(%d)", int(l))
	}
}

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// KeyPrefix starts every key; empty means the layout's default,
	// DefaultKeyPrefix or DefaultPythonKeyPrefix. It must not contain '{'
	// or '}', which would change the keys' hash tag. A native prefix may
	// not be the Python layout's default prefix nor lie under it, and a
	// Python prefix may not be the native default nor have it under it
	// (ErrPrefixOverlap): a session id of one layout could otherwise name
	// a key of the other.
	KeyPrefix string
	// TTL, when positive, expires all keys of a session together TTL after
	// its last write (and after its last read with RefreshOnRead). Redis
	// keeps expiries in milliseconds: TTL is rounded up to a whole
	// millisecond. Zero means the data never expire.
	TTL time.Duration
	// RefreshOnRead restarts the expiry clock on reads too (one round trip:
	// the read and the refresh run in one script).
	RefreshOnRead bool
	// MaxBatchBytes bounds the total size of the items of one AddItems or
	// ReplaceItems call; a bigger batch is refused, before anything is
	// written, with an error wrapping session.ErrBatchTooLarge. Zero means
	// DefaultMaxBatchBytes, a negative value means no limit.
	MaxBatchBytes int
	// Layout chooses the key layout; the zero value is LayoutNative.
	Layout Layout
	// OnCorrupt receives reports of stored records that are not JSON
	// objects; nil logs a warning with slog.
	OnCorrupt driver.CorruptHandler
	// WaitReplicas, when positive, makes every write (AddItems, PopItem,
	// Clear, ReplaceItems, ReplaceItemsIf, SaveCheckpoint,
	// AppendWithCheckpoint, DeleteCheckpoint, Touch) send WAIT
	// WaitReplicas WaitTimeout on the write's connection before it
	// returns: a write fewer replicas acknowledged in time returns a
	// *ReplicaError, wrapping session.ErrOutcomeUnknown. See "Replica
	// acknowledgement" in the package documentation.
	WaitReplicas int
	// WaitTimeout bounds each WAIT, rounded up to a whole millisecond;
	// zero means DefaultWaitTimeout. Keep it below the client's read
	// timeout (go-redis's default is 3 s).
	WaitTimeout time.Duration
	// HeldConns is the most connections the Store holds, one per session,
	// for checkpoint commits (AppendWithCheckpoint) that follow each other
	// within a second: each such commit is MULTI, RPUSH, HSET, EXEC under a
	// WATCH, with no script (see "Held connections" in the package
	// documentation). Zero means DefaultHeldConns; a negative value holds
	// none. A Store holds at most a quarter of its client's pool size.
	HeldConns int
	// TLSConfig, used by Open for rediss:// URLs, replaces go-redis's
	// default (the system's roots): set RootCAs to trust a private CA. The
	// URL's server name and go-redis's skip_verify option still apply.
	// Certificates are verified unless skip_verify=true says otherwise.
	TLSConfig *tls.Config
}

// ErrInvalidOptions reports Options the Store cannot use.
var ErrInvalidOptions = errors.New("redis: invalid options")

// ErrPrefixOverlap reports a key prefix whose keys one id of the other
// layout, at its default prefix, could name; it wraps ErrInvalidOptions.
var ErrPrefixOverlap = fmt.Errorf("%w: key prefix shared with the other layout", ErrInvalidOptions)

// ErrClusterLayout reports LayoutPython on a cluster client.
var ErrClusterLayout = errors.New("redis: the Python layout cannot be used on a cluster client: its three keys share no hash tag, so no atomic multi-key step is possible")

// normalize fills defaults and validates the options.
func (o Options) normalize() (Options, error) {
	if o.Layout != LayoutNative && o.Layout != LayoutPython {
		return o, fmt.Errorf("%w: unknown layout %v", ErrInvalidOptions, o.Layout)
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
		if o.Layout == LayoutPython {
			o.KeyPrefix = DefaultPythonKeyPrefix
		}
	}
	if strings.ContainsAny(o.KeyPrefix, "{}") {
		return o, fmt.Errorf("%w: key prefix %q contains '{' or '}', which would change the keys' hash tag", ErrInvalidOptions, o.KeyPrefix)
	}
	switch {
	case o.Layout == LayoutNative && prefixesOverlap(o.KeyPrefix, DefaultPythonKeyPrefix):
		return o, fmt.Errorf("%w: native key prefix %q lies in the Python layout's key space (%q:<id>), where a Python-layout id such as \"{x}:meta\" names this layout's keys; use another prefix, or move stores written with the old default with MovePrefix",
			ErrPrefixOverlap, o.KeyPrefix, DefaultPythonKeyPrefix)
	case o.Layout == LayoutPython && prefixesOverlap(DefaultKeyPrefix, o.KeyPrefix):
		return o, fmt.Errorf("%w: Python-layout key prefix %q covers the native layout's default key space (%q:{<id>}:...)",
			ErrPrefixOverlap, o.KeyPrefix, DefaultKeyPrefix)
	}
	if o.TTL < 0 {
		return o, fmt.Errorf("%w: negative TTL %v", ErrInvalidOptions, o.TTL)
	}
	if o.WaitReplicas < 0 || o.WaitTimeout < 0 {
		return o, fmt.Errorf("%w: negative WaitReplicas %d or WaitTimeout %v", ErrInvalidOptions, o.WaitReplicas, o.WaitTimeout)
	}
	if o.WaitReplicas > 0 {
		if o.WaitTimeout == 0 {
			o.WaitTimeout = DefaultWaitTimeout
		}
		o.WaitTimeout = (o.WaitTimeout + time.Millisecond - 1).Truncate(time.Millisecond)
	}
	if o.HeldConns == 0 {
		o.HeldConns = DefaultHeldConns
	}
	if o.MaxBatchBytes == 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	return o, nil
}

// ttlMillis returns the TTL in whole milliseconds, rounded up; 0 for none.
func (o Options) ttlMillis() int64 {
	if o.TTL <= 0 {
		return 0
	}
	return int64((o.TTL + time.Millisecond - 1) / time.Millisecond)
}

// prefixesOverlap reports whether a Python-layout id under pythonPrefix
// can name a native-layout key under nativePrefix. Every Python-layout key
// is pythonPrefix + ":" + id (+ a suffix) for an arbitrary id, and every
// native key starts with nativePrefix + ":{", so the two key spaces meet
// exactly when nativePrefix + ":" starts with pythonPrefix + ":". (Neither
// prefix holds a brace, so a Python prefix that extends the native prefix
// cannot reach a native key, whose next byte after nativePrefix + ":" is
// '{'.)
func prefixesOverlap(nativePrefix, pythonPrefix string) bool {
	return strings.HasPrefix(nativePrefix+":", pythonPrefix+":")
}
