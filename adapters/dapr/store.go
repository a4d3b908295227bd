package dapr

import (
	"context"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	daprc "github.com/dapr/go-sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Store opens sessions kept in one Dapr state store, in the Python SDK's
// DaprSession layout. It is safe for concurrent use.
type Store struct {
	client StateClient
	closer func() // closes a client Open made; nil for New's
	opts   Options
	closed atomic.Bool

	seed  maphash.Seed
	locks [64]sync.Mutex // writes of one session in this process, one at a time
}

// New returns a Store on a Dapr client the caller built and keeps owning:
// Close leaves it open. A *client.GRPCClient of github.com/dapr/go-sdk is
// a StateClient.
func New(client StateClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidOptions)
	}
	o, err := opts.validate()
	if err != nil {
		return nil, err
	}
	return &Store{client: client, opts: o, seed: maphash.MakeSeed()}, nil
}

// Open connects to the Dapr sidecar's gRPC API at address (host:port, as
// Python's DaprSession.from_address takes it; plaintext, as a sidecar
// listens on loopback) and returns a Store that closes that connection on
// Close. The connection is made lazily, by the first call. For TLS or an
// API token, build the client and use New.
func Open(ctx context.Context, address string, opts Options) (*Store, error) {
	if _, err := opts.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dapr: the sidecar address %q: %w", address, err)
	}
	st, err := New(daprc.NewClientWithConnection(conn), opts)
	if err != nil {
		conn.Close()
		return nil, err
	}
	st.closer = func() { conn.Close() }
	return st, nil
}

// Close marks the store closed: later calls of its sessions fail with
// session.ErrClosed. It closes the client only when Open made it.
func (st *Store) Close() error {
	if st.closed.Swap(true) {
		return nil
	}
	if st.closer != nil {
		st.closer()
	}
	return nil
}

// Options returns the store's options, defaults filled in.
func (st *Store) Options() Options { return st.opts }

// Session returns the session id of the store. The Dapr state API keys
// hold no "||" (daprd refuses it: it separates the app id from the key)
// and are protobuf strings, so valid UTF-8: other ids are refused with an
// error wrapping session.ErrInvalidSessionID.
func (st *Store) Session(id string) (*Session, error) {
	if err := driver.ValidateID(id); err != nil {
		return nil, err
	}
	if !utf8.ValidString(id) {
		return nil, fmt.Errorf("%w: the Dapr state API needs a valid UTF-8 key", session.ErrInvalidSessionID)
	}
	if strings.Contains(id, "||") {
		return nil, fmt.Errorf("%w: a Dapr state key cannot hold \"||\"", session.ErrInvalidSessionID)
	}
	return &Session{st: st, id: id, messagesKey: id + ":messages", metadataKey: id + ":metadata"}, nil
}

// AppendRaw appends raw as one record of session id's array, as a foreign
// writer would: a JSON string holding raw's text, unchecked. It
// implements driver.RawAppender for tests and tools; raw that is not
// valid UTF-8 cannot be a JSON string and gives session.ErrUnsupported.
func (st *Store) AppendRaw(ctx context.Context, id string, raw []byte) error {
	if !utf8.Valid(raw) {
		return fmt.Errorf("%w: a record of this layout is a JSON string, and raw is not UTF-8", session.ErrUnsupported)
	}
	s, err := st.Session(id)
	if err != nil {
		return err
	}
	return s.add(ctx, [][]byte{raw})
}

var _ driver.RawAppender = (*Store)(nil)

// lock serializes this process's writes of session id, as Python's
// per-session asyncio.Lock does, so that they do not conflict with each
// other; other processes are kept apart by the ETags.
func (st *Store) lock(id string) func() {
	m := &st.locks[maphash.String(st.seed, id)%uint64(len(st.locks))]
	m.Lock()
	return m.Unlock
}

func (st *Store) check(ctx context.Context) error {
	if st.closed.Load() {
		return session.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return nil
}

// readMeta is the state metadata of a read, as Python's
// _get_read_metadata: the consistency level.
func (st *Store) readMeta() map[string]string {
	return map[string]string{"consistency": string(st.opts.Consistency)}
}

// writeMeta is the state metadata of a write, as Python's _get_metadata:
// ttlInSeconds when a TTL is set.
func (st *Store) writeMeta() map[string]string {
	if st.opts.TTL <= 0 {
		return nil
	}
	return map[string]string{"ttlInSeconds": fmt.Sprint(int64(st.opts.TTL.Seconds()))}
}

// get reads one key as Python's get_state does: no consistency field, the
// level in the state metadata.
func (st *Store) get(ctx context.Context, key string) (data []byte, etag string, err error) {
	it, err := st.client.GetStateWithConsistency(ctx, st.opts.StoreName, key, st.readMeta(), daprc.StateConsistencyUndefined)
	if err != nil {
		return nil, "", err
	}
	return it.Value, it.Etag, nil
}
