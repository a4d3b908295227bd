package events

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/schema"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
)

// DefaultMaxSessions is the number of sessions whose event logs a Store
// keeps in memory when Options.MaxSessions is 0.
const DefaultMaxSessions = 256

// DefaultRetries is the number of times AppendEvents retries an append
// whose outcome is unknown when Options.Retries is 0.
const DefaultRetries = 2

// OpIDPrefix prefixes the operation id (session.AppendOnce) under which a
// batch of events is appended: the operation id is OpIDPrefix followed by
// the batch's first event id.
const OpIDPrefix = "eino.session_event:"

// Options configures a Store. The zero Options is ready to use.
type Options struct {
	// Prefix maps eino's session id s to the session id Prefix+s in the
	// store. Default "": the same id.
	Prefix string
	// Serializer encodes each event's body, as the Serializer of eino's
	// InMemoryStoreConfig does. Default schema.HumanReadableSerializer, as
	// eino's own stores. Reading a session needs the serializer that wrote
	// it.
	Serializer schema.Serializer
	// MaxSessions bounds the sessions whose event logs the Store keeps in
	// memory (the least recently used is dropped, and read again in full
	// if it is used again). 0 means DefaultMaxSessions.
	MaxSessions int
	// Retries is how many times AppendEvents retries an append that failed
	// with session.ErrOutcomeUnknown, on a session that appends at most
	// once (session.OnceAppender): the retry carries the same operation
	// id, so the batch lands once. 0 means DefaultRetries; a negative
	// value, never.
	Retries int
}

// Store is eino's adk.SessionEventStore[M] over the sessions of a session
// store: each eino session is one session whose items are its events, in
// order, one item each (see the package documentation). It is safe for
// concurrent use. It keeps the event logs it has read in memory and reads
// from a session only what was appended since its last read
// (session.ReadSince), so any number of Stores, in any number of
// processes, over one session store see the same events.
type Store[M adk.MessageType] struct {
	open    func(id string) (session.Session, error)
	prefix  string
	ser     schema.Serializer
	max     int
	retries int

	mu   sync.Mutex
	logs map[string]*list.Element // session id → its *eventLog in lru
	lru  *list.List               // most recently used first
}

var _ adk.SessionEventStore[*schema.Message] = (*Store[*schema.Message])(nil)
var _ adk.SessionEventStore[*schema.AgenticMessage] = (*Store[*schema.AgenticMessage])(nil)

// New returns a Store over st's sessions. Every backend will do: a
// session that cannot follow a cursor or append at most once is served by
// session.ReadSince's and the package's fallbacks (see the package
// documentation). The Store does not own st: close st when done with it.
func New[M adk.MessageType](st adapters.Store, opts Options) (*Store[M], error) {
	if st == nil {
		return nil, errors.New("events: nil store")
	}
	return NewFunc[M](st.Session, opts), nil
}

// NewFunc returns a Store over the sessions open returns (open must not be
// nil): wrapped sessions (encrypted, otelsession) or any other source.
func NewFunc[M adk.MessageType](open func(id string) (session.Session, error), opts Options) *Store[M] {
	s := &Store[M]{
		open:    open,
		prefix:  opts.Prefix,
		ser:     opts.Serializer,
		max:     opts.MaxSessions,
		retries: opts.Retries,
		logs:    map[string]*list.Element{},
		lru:     list.New(),
	}
	if s.ser == nil {
		s.ser = defaultSerializer()
	}
	if s.max <= 0 {
		s.max = DefaultMaxSessions
	}
	switch {
	case s.retries == 0:
		s.retries = DefaultRetries
	case s.retries < 0:
		s.retries = 0
	}
	return s
}

// SessionID returns the id of the session that holds eino session
// sessionID's events.
func (s *Store[M]) SessionID(sessionID string) string { return s.prefix + sessionID }

// eventLog is what a Store knows of one session: the events read so far
// and the cursor after them.
type eventLog struct {
	id string // the store's session id

	mu      sync.Mutex // held across a read and the append that depends on it
	s       session.Session
	cursor  session.Cursor
	headers []header
	items   []session.Item
	index   map[string]int // event id → position of its first occurrence
}

func (s *Store[M]) log(sessionID string) *eventLog {
	id := s.SessionID(sessionID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.logs[id]; ok {
		s.lru.MoveToFront(e)
		return e.Value.(*eventLog)
	}
	l := &eventLog{id: id, index: map[string]int{}}
	s.logs[id] = s.lru.PushFront(l)
	for s.lru.Len() > s.max {
		old := s.lru.Back()
		s.lru.Remove(old)
		delete(s.logs, old.Value.(*eventLog).id)
	}
	return l
}

// sync reads what was appended to l's session since its cursor (the whole
// session the first time, or after its history was rewritten). l.mu is
// held.
func (s *Store[M]) sync(ctx context.Context, l *eventLog) error {
	if l.s == nil {
		ss, err := s.open(l.id)
		if err != nil {
			return fmt.Errorf("events: open session %q: %w", l.id, err)
		}
		l.s = ss
	}
	items, cursor, err := session.ReadSince(ctx, l.s, l.cursor)
	if l.cursor != "" && (errors.Is(err, session.ErrCursorLost) || errors.Is(err, session.ErrInvalidCursor)) {
		// Popped, cleared or replaced below what was read: start again.
		l.cursor, l.headers, l.items, l.index = "", nil, nil, map[string]int{}
		items, cursor, err = session.ReadSince(ctx, l.s, "")
	}
	if err != nil {
		return fmt.Errorf("events: read session %q: %w", l.id, err)
	}
	headers := make([]header, len(items))
	for i, it := range items {
		h, err := parseHeader(it)
		if err != nil {
			return at(err, l.id, len(l.items)+i)
		}
		headers[i] = h
	}
	for i, h := range headers {
		if _, dup := l.index[h.id]; !dup {
			l.index[h.id] = len(l.items) + i
		}
	}
	l.headers = append(l.headers, headers...)
	l.items = append(l.items, items...)
	l.cursor = cursor
	return nil
}

// AppendEvents appends events to eino session sessionID as one atomic
// batch, one item each, unless an event id is already there. An event
// without an EventID (or a nil event, or an id that is not valid UTF-8)
// is adk.ErrInvalidEventID; an id repeated in the batch, or already in the
// session with another event, is adk.ErrDuplicateEventID; nothing is
// written then. A batch whose every event is already in the session as
// given (a retry of an append that landed) succeeds without writing. As in
// eino's stores, each event's Kind is normalized in place first
// (adk.NormalizeSessionEventKind).
//
// The batch is appended with session.AppendOnce under OpIDPrefix+its first
// event id, so that a retry lands it once; on a session that does not
// append at most once (session.ErrUnsupported), with session.Append.
func (s *Store[M]) AppendEvents(ctx context.Context, sessionID string, events []*adk.SessionEvent[M]) error {
	if len(events) == 0 {
		return nil
	}
	items := make([]session.Item, len(events))
	seen := make(map[string]struct{}, len(events))
	for i, e := range events {
		if e == nil || e.EventID == "" {
			return fmt.Errorf("events: event %d of the batch: %w", i, adk.ErrInvalidEventID)
		}
		if _, dup := seen[e.EventID]; dup {
			return fmt.Errorf("events: event id %q twice in one batch: %w", e.EventID, adk.ErrDuplicateEventID)
		}
		seen[e.EventID] = struct{}{}
		it, err := EncodeEvent(e, s.ser)
		if err != nil {
			return err
		}
		items[i] = it
	}

	l := s.log(sessionID)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := s.sync(ctx, l); err != nil {
		return err
	}
	if err := s.already(l, events, items); !errors.Is(err, errAbsent) {
		return err // nil: a replay of a batch that landed
	}

	opID := OpIDPrefix + events[0].EventID
	for attempt := 0; ; attempt++ {
		appended, err := session.AppendOnce(ctx, l.s, opID, items)
		switch {
		case errors.Is(err, session.ErrUnsupported):
			// No at-most-once append: the read above is the check (eino
			// admits one writer per session at a time).
			if err := session.Append(ctx, l.s, items); err != nil {
				return fmt.Errorf("events: append to session %q: %w", l.id, err)
			}
			return nil
		case errors.Is(err, session.ErrOutcomeUnknown) && attempt < s.retries && ctx.Err() == nil:
			select {
			case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
				continue
			case <-ctx.Done():
				return fmt.Errorf("events: append to session %q: %w", l.id, err)
			}
		case err != nil:
			return fmt.Errorf("events: append to session %q: %w", l.id, err)
		case appended:
			return nil
		}
		// The operation id was used before: by this batch (a retry whose
		// first attempt landed, or another writer's replay), or by an
		// earlier batch led by the same event id.
		if err := s.sync(ctx, l); err != nil {
			return err
		}
		if err := s.already(l, events, items); !errors.Is(err, errAbsent) {
			return err
		}
		return fmt.Errorf("events: event id %q was appended to session %q before (its events are gone since): %w", events[0].EventID, l.id, adk.ErrDuplicateEventID)
	}
}

// errAbsent is already's answer when no event of the batch is stored.
var errAbsent = errors.New("events: no event of the batch is stored")

// already compares the batch with what l holds: errAbsent when none of its
// ids is there, nil when every event is there as given, and
// adk.ErrDuplicateEventID otherwise.
func (s *Store[M]) already(l *eventLog, events []*adk.SessionEvent[M], items []session.Item) error {
	found := 0
	for i, e := range events {
		pos, ok := l.index[e.EventID]
		if !ok {
			continue
		}
		found++
		if !sameEvent[M](l.items[pos], items[i], s.ser) {
			return fmt.Errorf("events: session %q already has event id %q, with another event: %w", l.id, e.EventID, adk.ErrDuplicateEventID)
		}
	}
	switch found {
	case 0:
		return errAbsent
	case len(events):
		return nil
	default:
		return fmt.Errorf("events: session %q already has %d of the batch's %d event ids: %w", l.id, found, len(events), adk.ErrDuplicateEventID)
	}
}

// LoadEvents returns eino session sessionID's events as eino's
// InMemoryStore does: oldest first (newest first with req.Reverse),
// strictly after the event req.After in that direction, only req.Kinds
// when given, at most req.Limit when positive; Next is the last event's id
// when more remain. An After that names no event of the session is
// adk.ErrEventIDOutOfRange. A session with no events (or none at all)
// gives no events and no error.
//
// It reads from the session only what was appended since the Store's last
// read of it (session.ReadSince), and decodes only the events it returns.
// An item that is not an event this package wrote fails the call with an
// error wrapping ErrCorruptEvent.
func (s *Store[M]) LoadEvents(ctx context.Context, sessionID string, req *adk.LoadSessionEventsRequest) (*adk.LoadSessionEventsResult[M], error) {
	if req == nil {
		req = &adk.LoadSessionEventsRequest{}
	}
	l := s.log(sessionID)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := s.sync(ctx, l); err != nil {
		return nil, err
	}

	n := len(l.items)
	start, end, step := 0, n, 1
	if req.Reverse {
		start, end, step = n-1, -1, -1
	}
	if req.After != "" {
		pos, ok := l.index[req.After]
		if !ok {
			return nil, fmt.Errorf("events: session %q has no event %q: %w", l.id, req.After, adk.ErrEventIDOutOfRange)
		}
		start = pos + step
	}
	var kinds map[adk.SessionEventKind]bool
	if len(req.Kinds) > 0 {
		kinds = make(map[adk.SessionEventKind]bool, len(req.Kinds))
		for _, k := range req.Kinds {
			kinds[k] = true
		}
	}

	var out []*adk.SessionEvent[M]
	more := false
	for i := start; i != end; i += step {
		if kinds != nil && !kinds[l.headers[i].kind] {
			continue
		}
		if req.Limit > 0 && len(out) >= req.Limit {
			more = true
			break
		}
		ev, err := decodeBody[M](l.items[i], l.headers[i], s.ser)
		if err != nil {
			return nil, at(err, l.id, i)
		}
		out = append(out, ev)
	}
	res := &adk.LoadSessionEventsResult[M]{Events: out}
	if more {
		res.Next = out[len(out)-1].EventID
	}
	return res, nil
}
