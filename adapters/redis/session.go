package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Session is a handle on one session of a Store. It is safe for concurrent
// use, and any number of handles (in any number of processes) may share an
// id: every operation is one atomic server-side step.
type Session struct {
	st   *Store
	id   string
	keys []string // items list, metadata hash[, Python counter]
}

var (
	_ session.LatestReader = (*Session)(nil)
	_ session.Replacer     = (*Session)(nil)
	_ session.Expirer      = (*Session)(nil)
)

// SessionID returns the session's id.
func (s *Session) SessionID() string { return s.id }

// Keys returns the Redis keys of the session: the items list, the
// metadata hash and, in the Python layout, the counter.
func (s *Session) Keys() []string { return append([]string(nil), s.keys...) }

// begin checks, in this order, the context and the store's state.
func (s *Session) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.st.closed.Load() {
		return session.ErrClosed
	}
	return nil
}

// Items returns the whole history, oldest first, in one round trip
// (LRANGE 0 -1, or a script that also refreshes the expiry when
// RefreshOnRead is set). Corrupt records are skipped and reported.
func (s *Session) Items(ctx context.Context) ([]session.Item, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	raws, err := s.lrange(ctx, 0, -1)
	if err != nil {
		return nil, err
	}
	items, bad := s.decode(raws, -1, func(i int) string { return "index " + strconv.Itoa(i) })
	s.report(ctx, bad)
	return items, nil
}

// LatestItems returns the newest n items, oldest first, in one round trip
// (LRANGE -n -1) when the newest n records are valid. Corrupt records do
// not count: the window then doubles and is read again, whole, until n
// valid items are found or the list is exhausted, so the result always
// comes from one consistent read.
func (s *Session) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: %d", session.ErrInvalidLimit, n)
	}
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if n == 0 {
		return []session.Item{}, nil
	}
	for w := int64(n); ; w *= 2 {
		start := -w
		if w > 1<<40 { // beyond any real list: read it all
			start = 0
		}
		raws, err := s.lrange(ctx, start, -1)
		if err != nil {
			return nil, err
		}
		base := len(raws)
		items, bad := s.decode(raws, n, func(i int) string {
			return "index " + strconv.Itoa(i-base) + " (from the end)"
		})
		if len(items) == n || int64(len(raws)) < w || start == 0 {
			s.report(ctx, bad)
			return items, nil
		}
	}
}

// lrange reads LRANGE start stop of the items list, refreshing the expiry
// in the same round trip when RefreshOnRead is set.
func (s *Session) lrange(ctx context.Context, start, stop int64) ([]string, error) {
	if s.st.opts.RefreshOnRead && s.st.ttlMS > 0 {
		cmd := s.st.run(ctx, rangeScript, s.keys, s.st.ttlMS, start, stop)
		vals, err := cmd.StringSlice()
		if err != nil {
			return nil, fmt.Errorf("redis: read session %q: %w", s.id, err)
		}
		return vals, nil
	}
	vals, err := s.st.client.LRange(ctx, s.keys[0], start, stop).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: read session %q: %w", s.id, err)
	}
	return vals, nil
}

// decode returns the newest n valid records of raws (all when n < 0),
// oldest first, and the corrupt records it passed, with their positions.
func (s *Session) decode(raws []string, n int, pos func(int) string) ([]session.Item, []driver.CorruptRecord) {
	if n < 0 || n > len(raws) {
		n = len(raws)
	}
	out := make([]session.Item, n)
	k := n
	var bad []driver.CorruptRecord
	for i := len(raws) - 1; i >= 0 && k > 0; i-- {
		it, err := driver.DecodeStoredString(raws[i])
		if err != nil {
			bad = append(bad, driver.CorruptRecord{
				SessionID: s.id, Position: pos(i), Raw: []byte(raws[i]), Err: err})
			continue
		}
		k--
		out[k] = it
	}
	return out[k:], bad
}

// report hands each corrupt record to the OnCorrupt handler, oldest first.
func (s *Session) report(ctx context.Context, bad []driver.CorruptRecord) {
	for i := len(bad) - 1; i >= 0; i-- {
		s.st.opts.OnCorrupt.Report(ctx, bad[i])
	}
}

// AddItems appends items as one atomic batch in one round trip: a Lua
// script (EVALSHA) that RPUSHes every item, stamps the metadata with the
// server's clock and, with a TTL, sets the expiry of all the session's keys.
// The batch is validated, and its size checked against MaxBatchBytes,
// before anything is sent. Once sent, the script runs to completion even if
// ctx is cancelled meanwhile, and the error reports its outcome.
func (s *Session) AddItems(ctx context.Context, items []session.Item) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	if len(items) == 0 {
		return nil
	}
	argv, err := s.writeArgs(items)
	if err != nil {
		return err
	}
	if err := s.st.run(context.WithoutCancel(ctx), appendScript, s.keys, argv...).Err(); err != nil {
		return fmt.Errorf("redis: append to session %q: %w", s.id, err)
	}
	return nil
}

// writeArgs returns ARGV of the write scripts: ttl, id, timestamp unit,
// then the items' bytes (sent as they are, never re-encoded).
func (s *Session) writeArgs(items []session.Item) ([]any, error) {
	size := 0
	for _, it := range items {
		size += len(it.Bytes())
	}
	if max := s.st.opts.MaxBatchBytes; max > 0 && size > max {
		return nil, fmt.Errorf("%w: %d items of %d bytes exceed MaxBatchBytes %d",
			session.ErrBatchTooLarge, len(items), size, max)
	}
	argv := make([]any, 0, 3+len(items))
	argv = append(argv, s.st.ttlMS, s.id, s.st.unit)
	for _, it := range items {
		argv = append(argv, it.Bytes())
	}
	return argv, nil
}

// PopItem removes and returns the newest item in one round trip: RPOP, or
// with a TTL a script that pops and refreshes the expiry of every key. A
// corrupt newest record is removed, reported, and the pop goes on to the
// next record (one more round trip each), as the Python SDK does.
func (s *Session) PopItem(ctx context.Context) (session.Item, bool, error) {
	if err := s.begin(ctx); err != nil {
		return session.Item{}, false, err
	}
	wctx := context.WithoutCancel(ctx)
	for {
		raw, pos, ok, err := s.popRaw(wctx)
		if err != nil {
			return session.Item{}, false, fmt.Errorf("redis: pop from session %q: %w", s.id, err)
		}
		if !ok {
			return session.Item{}, false, nil
		}
		it, err := driver.DecodeStoredString(raw)
		if err == nil {
			return it, true, nil
		}
		s.st.opts.OnCorrupt.Report(ctx, driver.CorruptRecord{
			SessionID: s.id, Position: pos, Raw: []byte(raw), Err: err})
		if s.st.closed.Load() {
			return session.Item{}, false, session.ErrClosed
		}
	}
}

// popRaw pops the newest record; pos names where it was.
func (s *Session) popRaw(ctx context.Context) (raw, pos string, ok bool, err error) {
	if s.st.ttlMS == 0 {
		cmd := goredis.NewStringCmd(ctx, "rpop", s.keys[0])
		cmd.SetFirstKeyPos(1)
		_ = s.st.client.Process(ctx, once{cmd})
		raw, err = cmd.Result()
		if errors.Is(err, goredis.Nil) {
			return "", "", false, nil
		}
		return raw, "index -1 (the newest)", err == nil, err
	}
	vals, err := s.st.run(ctx, popScript, s.keys, s.st.ttlMS).Slice()
	if errors.Is(err, goredis.Nil) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, err
	}
	if len(vals) != 2 {
		return "", "", false, fmt.Errorf("redis: pop script returned %d values", len(vals))
	}
	raw, _ = vals[0].(string)
	rest, _ := vals[1].(int64)
	return raw, "index " + strconv.FormatInt(rest, 10), true, nil
}

// Clear deletes every key of the session in one round trip (one DEL).
func (s *Session) Clear(ctx context.Context) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := s.st.client.Del(context.WithoutCancel(ctx), s.keys...).Err(); err != nil {
		return fmt.Errorf("redis: clear session %q: %w", s.id, err)
	}
	return nil
}

// ReplaceItems atomically replaces the history with items in one round
// trip: a script that deletes the list, pushes the new items, stamps the
// metadata and sets the expiry. Replacing with no items deletes every key
// of the session, as Clear does.
func (s *Session) ReplaceItems(ctx context.Context, items []session.Item) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	argv, err := s.writeArgs(items)
	if err != nil {
		return err
	}
	if err := s.st.run(context.WithoutCancel(ctx), replaceScript, s.keys, argv...).Err(); err != nil {
		return fmt.Errorf("redis: replace session %q: %w", s.id, err)
	}
	return nil
}
