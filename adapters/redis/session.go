package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Session is a handle on one session of a Store. It is safe for concurrent
// use, and any number of handles (in any number of processes) may share an
// id: every write is one atomic server-side step (PopItem's is conditional
// on the records it read, and retried when they changed).
type Session struct {
	st   *Store
	id   string
	keys []string // items list, metadata hash[, Python counter]
	// all is keys and then the checkpoint hash: the KEYS of the scripts,
	// and every key whose expiry a write refreshes.
	all []string
	// pops is the key of the session's pop record index (popIndexPart),
	// which the pop scripts take before the pop record key.
	pops string
	// listed says the items list existed after this handle's last write
	// (native layout): AppendWithCheckpoint then commits with the fence
	// (commitFenced), which falls back to the commit script when the list
	// turns out to be gone.
	listed atomic.Bool
	// hold is the connection held for back-to-back commits (held.go).
	hold holder
}

var (
	_ session.LatestReader        = (*Session)(nil)
	_ session.Replacer            = (*Session)(nil)
	_ session.VersionedReplacer   = (*Session)(nil)
	_ session.Expirer             = (*Session)(nil)
	_ session.CheckpointStore     = (*Session)(nil)
	_ session.CheckpointCommitter = (*Session)(nil)
)

// SessionID returns the session's id.
func (s *Session) SessionID() string { return s.id }

// Keys returns the Redis keys of the session's history: the items list,
// the metadata hash and, in the Python layout, the counter. Clear deletes
// them; the checkpoint hash (CheckpointKey) is not among them.
func (s *Session) Keys() []string { return append([]string(nil), s.keys...) }

// CheckpointKey returns the key of the session's checkpoint hash.
func (s *Session) CheckpointKey() string { return s.all[len(s.all)-1] }

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
		cmd := s.st.run(ctx, rangeScript, s.all, s.st.ttlMS, start, stop)
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
	var dec driver.Decoder
	dec.Expect(n)
	for i := len(raws) - 1; i >= 0 && k > 0; i-- {
		it, err := dec.DecodeString(raws[i])
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

// AddItems appends items as one atomic batch in one round trip. The batch
// is validated, and its size checked against MaxBatchBytes, before
// anything is sent.
//
// In the native layout the append is a single RPUSHX of all the items:
// one command, so the batch lands whole and contiguous or not at all, and
// nothing else is written (the metadata does not change once the session
// exists); with a TTL it goes in a MULTI/EXEC with a PEXPIRE of every key,
// the checkpoint hash's included.
// Only when the list does not exist yet (RPUSHX answers 0 and writes
// nothing) does a second round trip run the append script, which writes
// the metadata, then pushes (and sets the expiry). In the Python layout
// the append is the script (EVALSHA): it writes the metadata Python
// writes, pushes, and sets the expiry of every key. Once sent, a command
// runs to completion even if ctx is cancelled meanwhile, and the error
// reports its outcome.
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
	size, err := s.checkSize(items)
	if err != nil {
		return err
	}
	wctx := context.WithoutCancel(ctx)
	sc := appendScript
	if s.st.opts.Layout == LayoutPython {
		sc = pythonAppendScript
	}
	err = s.st.write(wctx, s.keys[0], func(p processor) (bool, error) {
		if s.st.opts.Layout == LayoutNative {
			var n int64
			var err error
			if s.st.ttlMS == 0 {
				n, err = s.pushx(wctx, p, items, size)
			} else {
				n, err = s.pushxExpire(wctx, p, items)
			}
			if err != nil || n > 0 {
				return err == nil, err
			}
			// The list does not exist: nothing was written; the script
			// creates the session.
		}
		err := s.st.runOn(wctx, p, sc, s.all, s.writeArgs(items)...).Err()
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("redis: append to session %q: %w", s.id, err)
	}
	s.listed.Store(true)
	return nil
}

// pushx sends RPUSHX of every item onto the items list (at most once,
// pipelined with the appends of concurrent callers when p is the Store's
// client) and returns the list's new length: 0 when the list did not
// exist, in which case nothing was written.
func (s *Session) pushx(ctx context.Context, p processor, items []session.Item, size int) (int64, error) {
	cmd := s.pushCmd(ctx, "rpushx", items)
	if size > maxPipelinedBytes || p != processor(s.st.client) {
		_ = p.Process(ctx, onceInt{cmd})
	} else {
		s.st.push.do(ctx, s.st.client, cmd)
	}
	return cmd.Result()
}

// pushCmd returns the command verb (RPUSH or RPUSHX) of every item onto
// the items list.
func (s *Session) pushCmd(ctx context.Context, verb string, items []session.Item) *goredis.IntCmd {
	cmd := goredis.NewIntCmd(ctx, s.pushArgs(verb, items)...)
	cmd.SetFirstKeyPos(1)
	return cmd
}

// pushArgs returns the arguments of verb (RPUSH or RPUSHX) of items onto
// the items list.
func (s *Session) pushArgs(verb string, items []session.Item) []any {
	args := make([]any, 2, 2+len(items))
	args[0], args[1] = verb, s.keys[0]
	for _, it := range items {
		args = append(args, itemArg{it})
	}
	return args
}

// pushxExpire is pushx with a TTL: MULTI, RPUSHX of every item, PEXPIRE of
// every key (the checkpoint hash's too), EXEC, in one round trip (sent at
// most once). The server runs
// the queued commands only on EXEC, all together, so the batch and the
// refreshed expiries land together or not at all. It returns the list's
// new length, 0 when the list did not exist (nothing was pushed).
func (s *Session) pushxExpire(ctx context.Context, p processor, items []session.Item) (int64, error) {
	push := s.pushCmd(ctx, "rpushx", items)
	cmds, err := p.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		_ = p.Process(ctx, onceInt{push})
		for _, k := range s.all {
			cmd := goredis.NewBoolCmd(ctx, "pexpire", k, s.st.ttlMS)
			cmd.SetFirstKeyPos(1)
			_ = p.Process(ctx, cmd)
		}
		return nil
	})
	if err := txSent(err, cmds...); errors.Is(err, session.ErrOutcomeUnknown) {
		return 0, err
	}
	if perr := push.Err(); perr != nil {
		return 0, perr
	}
	if err != nil {
		return 0, err
	}
	return push.Val(), nil
}

// itemArg sends an item's bytes as a command argument. It is one pointer
// wide, like session.Item, so storing it in an interface does not allocate
// (a []byte would be boxed on the heap, once per item); go-redis writes it
// through MarshalBinary, which returns the item's bytes without copying.
type itemArg struct{ it session.Item }

// MarshalBinary returns the item's bytes.
func (a itemArg) MarshalBinary() ([]byte, error) { return a.it.Bytes(), nil }

// checkSize returns the size of a batch, refusing one bigger than
// MaxBatchBytes.
func (s *Session) checkSize(items []session.Item) (int, error) {
	size := 0
	for _, it := range items {
		size += len(it.Bytes())
	}
	if max := s.st.opts.MaxBatchBytes; max > 0 && size > max {
		return 0, fmt.Errorf("%w: %d items of %d bytes exceed MaxBatchBytes %d",
			session.ErrBatchTooLarge, len(items), size, max)
	}
	return size, nil
}

// writeArgs returns ARGV of the write scripts: ttl, id, the client's
// clock in the layout's unit (Unix milliseconds native, seconds Python, as
// Python's time.time()), then the items' bytes (sent as they are, never
// re-encoded); extra, the commit script's checkpoint arguments, go
// between the clock and the items.
func (s *Session) writeArgs(items []session.Item, extra ...any) []any {
	now := time.Now()
	stamp := now.UnixMilli()
	if s.st.opts.Layout == LayoutPython {
		stamp = now.Unix()
	}
	argv := make([]any, 0, 3+len(extra)+len(items))
	argv = append(argv, s.st.ttlMS, s.id, stamp)
	argv = append(argv, extra...)
	for _, it := range items {
		argv = append(argv, itemArg{it})
	}
	return argv
}

// maxPopAttempts bounds how often PopItem retries when the newest records
// change between its read and its conditional pop (each retry means
// another writer made progress).
const maxPopAttempts = 100

// PopItem removes and returns the newest valid item, in one round trip
// when the newest record is one the client reads: a script pops it and
// keeps it popped only if a cheap check on the server (a JSON object with
// nothing in it that the client would refuse; see readableSrc) says so,
// and returns it. A record the check is not sure of is put back in the
// same script (popSrc) and returned: the client reads
// it, and pops it with a second script that removes it only if it is
// still the newest, byte for byte (two round trips, for such records
// only). A record the library cannot read is never deleted: when the
// newest records are unreadable, the read window doubles until a valid
// item is found, the script removes that item and puts the unreadable
// records above it back in place, unchanged, and each of them is reported
// through OnCorrupt. When no valid item is left, nothing is removed and
// PopItem reports an empty session. With a TTL the scripts also refresh
// the expiry of every key.
//
// A pop that loses its reply loses no item: PopItem pops with a new token
// (NewPopToken), and the script that pops also records the item under
// that token for PopRecordTTL (see "Lost replies" in the package
// documentation). An error wrapping session.ErrOutcomeUnknown is then a
// *PopUnknownError: RecoverPop(ctx, its Token) returns the item the pop
// removed, or reports that it removed nothing (and never will); PopItem
// never resends a pop, and calling it again pops another item.
// PopItemWithToken(ctx, token) is the retry that does not: with the token
// of a pop that already removed an item it returns that item again.
// Any other error means nothing was removed.
func (s *Session) PopItem(ctx context.Context) (session.Item, bool, error) {
	rk, token := s.newPopRecordKey()
	return s.pop(ctx, rk, token)
}

// PopItemWithToken is PopItem with the caller's token (NewPopToken): a
// token pops at most one item, ever (within PopRecordTTL). When the
// token's pop already removed an item, it returns that item again and
// removes nothing; when RecoverPop settled the token as having removed
// nothing, it removes nothing and returns an error wrapping
// ErrPopSettled. So a caller may call it again with the same token after
// an error wrapping session.ErrOutcomeUnknown, as often as it likes, and
// still remove one item at most.
func (s *Session) PopItemWithToken(ctx context.Context, token string) (session.Item, bool, error) {
	if _, err := popTokenTime(token); err != nil {
		return session.Item{}, false, err
	}
	return s.pop(ctx, s.popRecordKey(token), token)
}

// pop is PopItem with token, whose pop record key is rk; an error
// wrapping session.ErrOutcomeUnknown from a pop that may have removed an
// item unseen is a *PopUnknownError.
func (s *Session) pop(ctx context.Context, rk, token string) (session.Item, bool, error) {
	it, ok, err := s.popOnce(ctx, rk)
	if err != nil && !ok && errors.Is(err, session.ErrOutcomeUnknown) {
		err = &PopUnknownError{Token: token, Err: err}
	}
	return it, ok, err
}

func (s *Session) popOnce(ctx context.Context, rk string) (session.Item, bool, error) {
	if err := s.begin(ctx); err != nil {
		return session.Item{}, false, err
	}
	wctx := context.WithoutCancel(ctx)
	sc, keys := s.popScript()
	keys = append(keys[:len(keys):len(keys)], s.pops, rk)
	var res any
	err := s.st.write(wctx, s.keys[0], func(p processor) (bool, error) {
		var err error
		res, err = s.st.runOn(wctx, p, sc, keys, s.st.ttlMS, popRecordMS).Result()
		if errors.Is(err, goredis.Nil) {
			res, err = nil, nil
		}
		_, popped := res.(string)
		return popped, err
	})
	var first string
	unsure := false
	switch r := res.(type) {
	case nil:
		if err != nil {
			return session.Item{}, false, fmt.Errorf("redis: pop from session %q: %w", s.id, err)
		}
		return session.Item{}, false, nil
	case string: // popped (err: but not acknowledged by the replicas asked for)
		it, derr := driver.DecodeStoredString(r)
		if derr != nil {
			// The server's check and the client's disagree: put the
			// record back on top, forget the token's record of it, and
			// say so.
			perr := sendOnce(wctx, s.st.client, "rpush", s.keys[0], r).Err()
			if perr == nil {
				perr = sendOnce(wctx, s.st.client, "del", rk).Err()
			}
			if perr != nil {
				perr = sent(perr)
				return session.Item{}, false, fmt.Errorf("redis: pop from session %q: the server popped a record the client cannot read (%v); pushing it back, or dropping its pop record, failed: %w", s.id, derr, perr)
			}
			return session.Item{}, false, fmt.Errorf("redis: pop from session %q: the server popped a record the client cannot read (%v); pushed back", s.id, derr)
		}
		if err != nil {
			return it, true, fmt.Errorf("redis: pop from session %q: %w", s.id, err)
		}
		return it, true, nil
	case []any:
		switch len(r) {
		case 1:
			first, unsure = r[0].(string)
		case 2: // the token has a record: it popped before, or was settled
			if rec, isStr := r[1].(string); isStr && err == nil {
				return s.settled(rec)
			}
		}
	}
	if err != nil {
		return session.Item{}, false, fmt.Errorf("redis: pop from session %q: %w", s.id, err)
	}
	if !unsure {
		return session.Item{}, false, fmt.Errorf("redis: pop from session %q: unexpected pop script reply %v", s.id, res)
	}
	// The server was not sure of the newest record: the client decides.
	minWindow := int64(2)
	if it, derr := driver.DecodeStoredString(first); derr == nil {
		ok, rec, err := s.popIf(wctx, rk, []string{first})
		switch {
		case rec != "":
			return s.settled(rec)
		case ok:
			return it, true, err // err: popped, not acknowledged as asked
		case err != nil:
			return session.Item{}, false, err
		}
		minWindow = 1 // the records changed meanwhile: start over
	}
	for attempt := 0; attempt < maxPopAttempts; attempt++ {
		it, raws, bad, found, err := s.popCandidate(ctx, minWindow)
		if err != nil {
			return session.Item{}, false, err
		}
		minWindow = 1
		if !found {
			s.report(ctx, bad)
			return session.Item{}, false, nil
		}
		ok, rec, err := s.popIf(wctx, rk, raws)
		if rec != "" {
			return s.settled(rec)
		}
		if err != nil {
			if ok {
				s.report(ctx, bad)
				return it, true, err
			}
			return session.Item{}, false, err
		}
		if ok {
			s.report(ctx, bad)
			return it, true, nil
		}
		if s.st.closed.Load() {
			return session.Item{}, false, session.ErrClosed
		}
	}
	return session.Item{}, false, fmt.Errorf("redis: pop from session %q: the newest records changed %d times in a row while popping", s.id, maxPopAttempts)
}

// popIf pops raws[0] if raws are still the newest records, byte for byte
// (popIfSrc), recording it under the pop record key rk. popped with an
// error means the pop happened but was not acknowledged as
// Options.WaitReplicas asks; rec is the record rk held already (the
// token popped before, or was settled), in which case nothing was popped.
func (s *Session) popIf(ctx context.Context, rk string, raws []string) (popped bool, rec string, err error) {
	argv := make([]any, 0, 2+len(raws))
	argv = append(argv, s.st.ttlMS, popRecordMS)
	for _, r := range raws {
		argv = append(argv, r)
	}
	keys := append(s.all[:len(s.all):len(s.all)], s.pops, rk)
	err = s.st.write(ctx, s.keys[0], func(p processor) (bool, error) {
		sc := popIfScript
		if s.st.opts.Layout == LayoutNative {
			sc = nativePopIfScript // records the pop for cursors (follow.go)
		}
		res, err := s.st.runOn(ctx, p, sc, keys, argv...).Result()
		if err != nil {
			return false, err
		}
		switch r := res.(type) {
		case int64:
			popped = r == 1
		case string:
			rec = r
		default:
			return false, fmt.Errorf("unexpected pop script reply %v", res)
		}
		return popped, nil
	})
	if err != nil {
		return popped, "", fmt.Errorf("redis: pop from session %q: %w", s.id, err)
	}
	return popped, rec, nil
}

// popCandidate reads the newest records, minWindow of them first, until
// it finds the newest valid one: it returns that item, the raw records from it to the end of the
// list (it first, then the unreadable records above it), and the
// unreadable ones as reports. found is false when the list holds no valid
// record; bad then lists every record read.
func (s *Session) popCandidate(ctx context.Context, minWindow int64) (it session.Item, raws []string, bad []driver.CorruptRecord, found bool, err error) {
	for w := minWindow; ; w *= 2 {
		start := -w
		if w > 1<<40 {
			start = 0
		}
		raws, err := s.st.client.LRange(ctx, s.keys[0], start, -1).Result()
		if err != nil {
			return session.Item{}, nil, nil, false, fmt.Errorf("redis: pop from session %q: %w", s.id, err)
		}
		bad = bad[:0]
		for i := len(raws) - 1; i >= 0; i-- {
			it, derr := driver.DecodeStoredString(raws[i])
			if derr == nil {
				return it, raws[i:], bad, true, nil
			}
			bad = append(bad, driver.CorruptRecord{
				SessionID: s.id, Position: "index " + strconv.Itoa(i-len(raws)) + " (from the end), kept",
				Raw: []byte(raws[i]), Err: derr})
		}
		if int64(len(raws)) < w || start == 0 {
			return session.Item{}, nil, bad, false, nil
		}
	}
}

// Clear deletes every key of the session's history in one round trip (one
// DEL). The checkpoint hash stays, with its expiry, and so do the pop
// records and their index (see "Lost replies" in the package
// documentation): a pop whose reply was lost before the Clear can still be
// recovered, and they expire after PopRecordTTL. RemoveSession deletes
// them all.
func (s *Session) Clear(ctx context.Context) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	wctx := context.WithoutCancel(ctx)
	err := s.st.write(wctx, s.keys[0], func(p processor) (bool, error) {
		err := sendOnce(wctx, p, delArgs(s.keys)...).Err()
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("redis: clear session %q: %w", s.id, err)
	}
	return nil
}

// ReplaceItems atomically replaces the history with items in one round
// trip: a script that deletes the list, pushes the new items, stamps the
// metadata and sets the expiry of every key (the checkpoint hash's too).
// Replacing with no items deletes every key of the history, as Clear does.
func (s *Session) ReplaceItems(ctx context.Context, items []session.Item) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	if _, err := s.checkSize(items); err != nil {
		return err
	}
	sc := replaceScript
	if s.st.opts.Layout == LayoutPython {
		sc = pythonReplaceScript
	}
	wctx := context.WithoutCancel(ctx)
	err := s.st.write(wctx, s.keys[0], func(p processor) (bool, error) {
		err := s.st.runOn(wctx, p, sc, s.all, s.writeArgs(items)...).Err()
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("redis: replace session %q: %w", s.id, err)
	}
	return nil
}

// sendOnce sends the command args, whose first argument is a key, through
// p at most once (see once) and returns it: a DEL or RPUSH that go-redis
// resent after a lost reply would act twice, deleting or duplicating what
// other clients wrote in between.
func sendOnce(ctx context.Context, p processor, args ...any) *goredis.IntCmd {
	cmd := goredis.NewIntCmd(ctx, args...)
	cmd.SetFirstKeyPos(1)
	_ = p.Process(ctx, onceInt{cmd})
	return cmd
}

// delArgs returns the arguments of DEL of keys.
func delArgs(keys []string) []any {
	args := make([]any, 0, 1+len(keys))
	args = append(args, "del")
	for _, k := range keys {
		args = append(args, k)
	}
	return args
}

// HistoryVersion returns the version of the stored history, in one round
// trip: a script that reads the items list and returns its length and the
// SHA-1 of its records, each prefixed with its length. Equal versions mean
// the same records, byte for byte (unreadable ones included), so a history
// that comes back to what it was gets its version back, and replacing it
// then is as safe as before it changed.
func (s *Session) HistoryVersion(ctx context.Context) (string, error) {
	if err := s.begin(ctx); err != nil {
		return "", err
	}
	v, err := s.st.run(ctx, historyVersionScript, s.keys[:1]).Text()
	if err != nil {
		return "", fmt.Errorf("redis: version of session %q: %w", s.id, err)
	}
	return v, nil
}

// ReplaceItemsIf replaces the history with items, as ReplaceItems does,
// if its version (HistoryVersion) is still version: one script computes
// the version and replaces in the same atomic step. Otherwise it returns
// an error wrapping session.ErrHistoryChanged, having written nothing.
func (s *Session) ReplaceItemsIf(ctx context.Context, version string, items []session.Item) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	if _, err := s.checkSize(items); err != nil {
		return err
	}
	sc := replaceIfScript
	if s.st.opts.Layout == LayoutPython {
		sc = pythonReplaceIfScript
	}
	wctx := context.WithoutCancel(ctx)
	changed := false
	err := s.st.write(wctx, s.keys[0], func(p processor) (bool, error) {
		n, err := s.st.runOn(wctx, p, sc, s.all, s.writeArgs(items, version)...).Int64()
		changed = n < 0
		return err == nil && !changed, err
	})
	if err != nil {
		return fmt.Errorf("redis: replace session %q: %w", s.id, err)
	}
	if changed {
		return fmt.Errorf("redis: replace session %q: %w", s.id, session.ErrHistoryChanged)
	}
	return nil
}
