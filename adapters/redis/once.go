package redis

import (
	"context"
	"fmt"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Operation ids.
//
// AddItemsOnce records its operation id as a field of the session's
// checkpoint hash, o:<operation id> (the value: the client's clock in the
// layout's unit), beside the v:/d: fields of the checkpoints. That hash
// already follows the rules operation ids need: it is in the session's
// slot (native layout), Clear and replaces leave it, every write of this
// package refreshes its expiry with the other keys', RemoveSession deletes
// it, MovePrefix moves it, and the Python SDK never touches it. One script
// checks the id, and only if it is new appends the batch (as the append
// script does) and records the id: the id is recorded if and only if the
// batch landed. A duplicate writes nothing.

var _ session.OnceAppender = (*Session)(nil)

// operationField prefixes the checkpoint hash's operation-id fields.
const operationField = "o:"

// onceHeadSrc: ARGV[4] is the operation's field; a used one writes
// nothing and returns 0. Before any write it checks the type of every key
// the script writes (HEXISTS fails on a hash key of another type, LLEN on
// a list key of another type), so that, as in the other write scripts,
// the script either writes everything or nothing.
const onceHeadSrc = `
local n, first = #ARGV, 5
local ck = KEYS[#KEYS]
if redis.call('HEXISTS', ck, ARGV[4]) == 1 then return 0 end
if n >= first then
  redis.call('LLEN', KEYS[1])
  redis.call('HEXISTS', KEYS[2], 'session_id')
`

// onceTailSrc records the operation, refreshes every key's expiry and
// returns 1.
const onceTailSrc = `
end
redis.call('HSET', ck, ARGV[4], ARGV[3])
` + expireSrc + `
return 1
`

// onceSrc is AddItemsOnce in the native layout, pythonOnceSrc in the
// Python layout.
const (
	onceSrc       = onceHeadSrc + nativeStampSrc + pushSrc + onceTailSrc
	pythonOnceSrc = onceHeadSrc + pythonStampSrc + pushSrc + onceTailSrc
)

var (
	onceScript       = newScript(onceSrc)
	pythonOnceScript = newScript(pythonOnceSrc)
)

// AddItemsOnce appends items as one atomic batch, as AddItems does, unless
// a batch with opID was already appended to the session, and reports
// whether this call appended: one script, one round trip (single-slot in a
// cluster), which checks the id, appends and records the id (see
// "Operations that land once" in the package documentation). An empty
// batch records opID alone. An empty opID is
// session.ErrInvalidOperationID. The ids are kept until the session is
// removed (RemoveSession) or expires: Clear, PopItem and replaces keep
// them.
//
// An error once the script was sent (a lost connection, a *ReplicaError)
// means the batch and its id may or may not have landed, together;
// calling again with the same opID is safe and says which.
func (s *Session) AddItemsOnce(ctx context.Context, opID string, items []session.Item) (bool, error) {
	if err := s.begin(ctx); err != nil {
		return false, err
	}
	if opID == "" {
		return false, session.ErrInvalidOperationID
	}
	if err := driver.ValidateBatch(items); err != nil {
		return false, err
	}
	if _, err := s.checkSize(items); err != nil {
		return false, err
	}
	sc := onceScript
	if s.st.opts.Layout == LayoutPython {
		sc = pythonOnceScript
	}
	argv := s.writeArgs(items, operationField+opID)
	wctx := context.WithoutCancel(ctx)
	var appended bool
	err := s.st.write(wctx, s.keys[0], func(p processor) (bool, error) {
		n, err := s.st.runOn(wctx, p, sc, s.all, argv...).Int64()
		appended = err == nil && n == 1
		return appended, err
	})
	if err != nil {
		return false, fmt.Errorf("redis: append once (operation %q) to session %q: %w", opID, s.id, err)
	}
	return appended, nil
}
