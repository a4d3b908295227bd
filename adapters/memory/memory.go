// Package memory is the reference Session adapter: every session lives in a
// Store in process memory. Callers never share memory with the store: items
// are copied on the way in and on the way out.
//
// A Store is what a database is to the other adapters: several Session
// handles on one id share its history, and each handle is safe for
// concurrent use.
package memory

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// TTL, when positive, expires a session's whole history TTL after its
	// last write (and after its last read with RefreshOnRead).
	TTL time.Duration
	// RefreshOnRead restarts the expiry clock on reads too.
	RefreshOnRead bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnCorrupt receives reports of corrupt records; nil logs a warning.
	OnCorrupt driver.CorruptHandler
}

// Store holds sessions in memory.
type Store struct {
	opts   Options
	mu     sync.Mutex
	data   map[string]*history
	closed bool
	writes uint64 // numbers every change of a history, for HistoryVersion
	seq    uint64 // numbers every record stored, in every session, for cursors
}

type history struct {
	records     []record
	checkpoints map[string]checkpoint
	ops         map[string]bool // operation ids of AddItemsOnce
	expires     time.Time       // zero: never
	version     uint64          // st.writes at the history's last change
}

// record is one stored item and its number in the store, which no other
// record of any session ever has.
type record struct {
	seq uint64
	raw []byte
}

// unused reports whether h holds nothing worth keeping.
func (h *history) unused() bool {
	return len(h.records) == 0 && len(h.checkpoints) == 0 && len(h.ops) == 0
}

// stored numbers raws as the store's next records. The caller holds st.mu.
func (st *Store) stored(raws [][]byte) []record {
	out := make([]record, len(raws))
	for i, raw := range raws {
		st.seq++
		out[i] = record{st.seq, raw}
	}
	return out
}

// Close marks the store closed: every later call on it or on a session of
// it fails with session.ErrClosed, as on the other adapters. The data is
// dropped. Close is idempotent.
func (st *Store) Close() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	st.data = map[string]*history{}
	return nil
}

// lock takes st.mu and reports ErrClosed (without holding it) on a closed
// store.
func (st *Store) lock() error {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return session.ErrClosed
	}
	return nil
}

// changed records a change of h's records. The caller holds st.mu.
func (st *Store) changed(h *history) {
	st.writes++
	h.version = st.writes
}

// New returns an empty Store.
func New(opts Options) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{opts: opts, data: make(map[string]*history)}
}

// Session returns a handle on session id. It fails only for an invalid id.
func (st *Store) Session(id string) (*Session, error) {
	if err := driver.ValidateID(id); err != nil {
		return nil, err
	}
	return &Session{st: st, id: id}, nil
}

// NewSession returns a handle on session id in a new private Store.
func NewSession(id string) (*Session, error) { return New(Options{}).Session(id) }

// Session is a handle on one session of a Store.
type Session struct {
	st *Store
	id string
}

var (
	_ session.LatestReader      = (*Session)(nil)
	_ session.VersionedReplacer = (*Session)(nil)
	_ session.Expirer           = (*Session)(nil)
	_ session.Follower          = (*Session)(nil)
	_ session.OnceAppender      = (*Session)(nil)
)

// SessionID returns the session's id.
func (s *Session) SessionID() string { return s.id }

// lookup returns the live history of the session, dropping it if expired.
// The caller holds st.mu.
func (s *Session) lookup(create bool) *history {
	h := s.st.data[s.id]
	if h != nil && !h.expires.IsZero() && !s.st.opts.Now().Before(h.expires) {
		delete(s.st.data, s.id)
		h = nil
	}
	if h == nil && create {
		h = &history{}
		s.st.data[s.id] = h
	}
	return h
}

func (s *Session) touch(h *history) {
	if s.st.opts.TTL > 0 {
		h.expires = s.st.opts.Now().Add(s.st.opts.TTL)
	}
}

// Items returns the whole history, oldest first.
func (s *Session) Items(ctx context.Context) ([]session.Item, error) {
	return s.read(ctx, -1)
}

// LatestItems returns the newest n items, oldest first.
func (s *Session) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: %d", session.ErrInvalidLimit, n)
	}
	return s.read(ctx, n)
}

// read returns the newest n valid items (all when n < 0), skipping and
// reporting corrupt records.
func (s *Session) read(ctx context.Context, n int) ([]session.Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type bad struct {
		pos int
		raw []byte
		err error
	}
	var corrupt []bad
	if err := s.st.lock(); err != nil {
		return nil, err
	}
	h := s.lookup(false)
	var out []session.Item
	if h != nil {
		if s.st.opts.RefreshOnRead {
			s.touch(h)
		}
		var dec driver.Decoder
		if n > 0 {
			dec.Expect(n)
		}
		// Walk back from the newest so a limit counts valid items only.
		for i := len(h.records) - 1; i >= 0 && (n < 0 || len(out) < n); i-- {
			it, err := dec.Decode(append([]byte(nil), h.records[i].raw...))
			if err != nil {
				corrupt = append(corrupt, bad{i, append([]byte(nil), h.records[i].raw...), err})
				continue
			}
			out = append(out, it)
		}
	}
	s.st.mu.Unlock()
	for _, c := range corrupt {
		s.st.opts.OnCorrupt.Report(ctx, driver.CorruptRecord{
			SessionID: s.id, Position: "index " + strconv.Itoa(c.pos), Raw: c.raw, Err: c.err})
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	if out == nil {
		out = []session.Item{}
	}
	return out, nil
}

// AddItems appends items as one atomic batch.
func (s *Session) AddItems(ctx context.Context, items []session.Item) error {
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(items) == 0 {
		return nil
	}
	recs, _ := records(items)
	if err := s.st.lock(); err != nil {
		return err
	}
	defer s.st.mu.Unlock()
	h := s.lookup(true)
	h.records = append(h.records, s.st.stored(recs)...)
	s.st.changed(h)
	s.touch(h)
	return nil
}

// records validates a batch and copies its bytes.
func records(items []session.Item) ([][]byte, error) {
	if err := driver.ValidateBatch(items); err != nil {
		return nil, err
	}
	recs := make([][]byte, len(items))
	for i, it := range items {
		recs[i] = append([]byte(nil), it.Bytes()...)
	}
	return recs, nil
}

// appendRaw stores raw bytes as the next record, unvalidated; for the
// conformance suite's corrupt-record clause.
func (s *Session) appendRaw(raw []byte) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	h := s.lookup(true)
	h.records = append(h.records, s.st.stored([][]byte{append([]byte(nil), raw...)})...)
	s.st.changed(h)
}

// PopItem removes and returns the newest readable item. An unreadable
// record is never removed: PopItem walks down past it, reporting it and
// leaving it in place, as the other adapters do. A session without a
// readable item gives ok == false and removes nothing.
func (s *Session) PopItem(ctx context.Context) (session.Item, bool, error) {
	if err := ctx.Err(); err != nil {
		return session.Item{}, false, err
	}
	if err := s.st.lock(); err != nil {
		return session.Item{}, false, err
	}
	var corrupt []driver.CorruptRecord
	var it session.Item
	found := false
	if h := s.lookup(false); h != nil {
		for pos := len(h.records) - 1; pos >= 0; pos-- {
			raw := h.records[pos].raw
			var err error
			if it, err = driver.DecodeStored(append([]byte(nil), raw...)); err != nil {
				corrupt = append(corrupt, driver.CorruptRecord{
					SessionID: s.id, Position: "index " + strconv.Itoa(pos), Raw: append([]byte(nil), raw...), Err: err})
				continue
			}
			h.records = append(h.records[:pos:pos], h.records[pos+1:]...)
			s.st.changed(h)
			s.touch(h)
			found = true
			break
		}
	}
	s.st.mu.Unlock()
	for _, c := range corrupt {
		s.st.opts.OnCorrupt.Report(ctx, c)
	}
	return it, found, nil
}

// Clear deletes the session's history; its checkpoints stay.
func (s *Session) Clear(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.st.lock(); err != nil {
		return err
	}
	defer s.st.mu.Unlock()
	s.dropRecords()
	return nil
}

// dropRecords empties the history, keeping the checkpoints. The caller
// holds st.mu.
func (s *Session) dropRecords() {
	h := s.st.data[s.id]
	if h == nil {
		return
	}
	s.st.changed(h)
	h.records = nil
	if h.unused() {
		// The next history starts from st.writes, above this version.
		delete(s.st.data, s.id)
	}
}

// ReplaceItems atomically replaces the history with items.
func (s *Session) ReplaceItems(ctx context.Context, items []session.Item) error {
	return s.replace(ctx, nil, items)
}

// HistoryVersion returns the version of the session's history: a number
// the store advances on every change, so it never comes back.
func (s *Session) HistoryVersion(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := s.st.lock(); err != nil {
		return "", err
	}
	defer s.st.mu.Unlock()
	return s.version(), nil
}

// version returns the history's version. The caller holds st.mu.
func (s *Session) version() string {
	if h := s.lookup(false); h != nil && len(h.records) > 0 {
		return strconv.FormatUint(h.version, 10)
	}
	return "0"
}

// ReplaceItemsIf replaces the history with items if its version is still
// version, and otherwise returns session.ErrHistoryChanged.
func (s *Session) ReplaceItemsIf(ctx context.Context, version string, items []session.Item) error {
	return s.replace(ctx, &version, items)
}

func (s *Session) replace(ctx context.Context, version *string, items []session.Item) error {
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	recs, _ := records(items)
	if err := s.st.lock(); err != nil {
		return err
	}
	defer s.st.mu.Unlock()
	if version != nil && *version != s.version() {
		return session.ErrHistoryChanged
	}
	if len(recs) == 0 {
		s.dropRecords()
		return nil
	}
	h := s.lookup(true)
	h.records = s.st.stored(recs)
	s.st.changed(h)
	s.touch(h)
	return nil
}

// TTL returns the store's time to live.
func (s *Session) TTL() time.Duration { return s.st.opts.TTL }

// ExpiresIn returns how long until the session expires.
func (s *Session) ExpiresIn(ctx context.Context) (time.Duration, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if err := s.st.lock(); err != nil {
		return 0, false, err
	}
	defer s.st.mu.Unlock()
	h := s.lookup(false)
	if h == nil || h.expires.IsZero() {
		return 0, false, nil
	}
	return h.expires.Sub(s.st.opts.Now()), true, nil
}

// Touch restarts the session's expiry clock.
func (s *Session) Touch(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.st.lock(); err != nil {
		return err
	}
	defer s.st.mu.Unlock()
	if h := s.lookup(false); h != nil {
		s.touch(h)
	}
	return nil
}

// RemoveSession removes everything the store holds for session id: its
// history, its checkpoints and its operation ids.
func (st *Store) RemoveSession(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := st.lock(); err != nil {
		return err
	}
	defer st.mu.Unlock()
	delete(st.data, id)
	return nil
}

// ListSessions returns the ids of the sessions holding items or
// checkpoints, sorted.
func (st *Store) ListSessions(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := st.lock(); err != nil {
		return nil, err
	}
	defer st.mu.Unlock()
	now := st.opts.Now()
	ids := make([]string, 0, len(st.data))
	for id, h := range st.data {
		if (len(h.records) > 0 || len(h.checkpoints) > 0) && (h.expires.IsZero() || now.Before(h.expires)) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}
