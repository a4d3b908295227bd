package legacy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/agentsessions/sessions/legacy"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// limitStore is a reference implementation of the nlpodyssey session shape
// (legacy.LimitSession), written from its documented contract: a mutex
// and a slice of raw JSON per session id; GetItems with limit <= 0 returns
// everything, otherwise the newest limit items, oldest first; PopItem
// returns nil on an empty session. It stores whatever it is given, as a
// database column would, so the corrupt-record clause can plant garbage.
type limitStore struct {
	mu   sync.Mutex
	data map[string][]json.RawMessage
}

func newLimitStore() *limitStore { return &limitStore{data: map[string][]json.RawMessage{}} }

func (st *limitStore) session(id string) *limitSession { return &limitSession{st: st, id: id} }

func (st *limitStore) appendRaw(id string, raw []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.data[id] = append(st.data[id], bytes.Clone(raw))
}

type limitSession struct {
	st *limitStore
	id string
}

var _ legacy.LimitSession[json.RawMessage] = (*limitSession)(nil)

func cloneRaw(in []json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, len(in))
	for i, r := range in {
		out[i] = bytes.Clone(r)
	}
	return out
}

func (s *limitSession) SessionID(context.Context) string { return s.id }

func (s *limitSession) GetItems(_ context.Context, limit int) ([]json.RawMessage, error) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	h := s.st.data[s.id]
	if limit > 0 && limit < len(h) {
		h = h[len(h)-limit:]
	}
	return cloneRaw(h), nil
}

func (s *limitSession) AddItems(_ context.Context, items []json.RawMessage) error {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.st.data[s.id] = append(s.st.data[s.id], cloneRaw(items)...)
	return nil
}

func (s *limitSession) PopItem(context.Context) (*json.RawMessage, error) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	h := s.st.data[s.id]
	if len(h) == 0 {
		return nil, nil
	}
	last := h[len(h)-1]
	s.st.data[s.id] = h[:len(h)-1]
	return &last, nil
}

func (s *limitSession) ClearSession(context.Context) error {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	delete(s.st.data, s.id)
	return nil
}

// plainStore is a reference implementation of legacy.PlainSession: a
// session written without contexts. It keeps raw records and reports the
// ones that are not JSON objects to onCorrupt, skipping them.
type plainStore struct {
	mu        sync.Mutex
	data      map[string][][]byte
	onCorrupt driver.CorruptHandler
}

func newPlainStore(onCorrupt driver.CorruptHandler) *plainStore {
	return &plainStore{data: map[string][][]byte{}, onCorrupt: onCorrupt}
}

func (st *plainStore) session(id string) *plainSession { return &plainSession{st: st, id: id} }

func (st *plainStore) appendRaw(id string, raw []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.data[id] = append(st.data[id], bytes.Clone(raw))
}

type plainSession struct {
	st *plainStore
	id string
}

var _ legacy.PlainSession = (*plainSession)(nil)

func (s *plainSession) SessionID() string { return s.id }

func (s *plainSession) report(pos int, raw []byte, err error) {
	s.st.onCorrupt.Report(context.Background(), driver.CorruptRecord{
		SessionID: s.id, Position: "index " + strconv.Itoa(pos), Raw: raw, Err: err})
}

func (s *plainSession) Items() ([]session.Item, error) {
	s.st.mu.Lock()
	recs := append([][]byte(nil), s.st.data[s.id]...)
	s.st.mu.Unlock()
	out := []session.Item{}
	for i, r := range recs {
		it, err := driver.DecodeStored(bytes.Clone(r))
		if err != nil {
			s.report(i, r, err)
			continue
		}
		out = append(out, it)
	}
	return out, nil
}

func (s *plainSession) AddItems(items []session.Item) error {
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	recs := make([][]byte, len(items))
	for i, it := range items {
		recs[i] = bytes.Clone(it.Bytes())
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.st.data[s.id] = append(s.st.data[s.id], recs...)
	return nil
}

func (s *plainSession) PopItem() (session.Item, bool, error) {
	type bad struct {
		pos int
		raw []byte
		err error
	}
	var corrupt []bad
	var it session.Item
	found := false
	s.st.mu.Lock()
	h := s.st.data[s.id]
	for pos := len(h) - 1; pos >= 0; pos-- {
		var err error
		if it, err = driver.DecodeStored(bytes.Clone(h[pos])); err != nil {
			corrupt = append(corrupt, bad{pos, bytes.Clone(h[pos]), err})
			continue
		}
		s.st.data[s.id] = append(h[:pos:pos], h[pos+1:]...)
		found = true
		break
	}
	s.st.mu.Unlock()
	for _, c := range corrupt {
		s.report(c.pos, c.raw, c.err)
	}
	return it, found, nil
}

func (s *plainSession) Clear() error {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	delete(s.st.data, s.id)
	return nil
}
