package dapr

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	daprc "github.com/dapr/go-sdk/client"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Session is one session of a Store: the keys "<id>:messages" (a JSON
// array of the items' JSON texts) and "<id>:metadata". It implements
// session.Session, session.LatestReader, session.Replacer and
// session.VersionedReplacer.
type Session struct {
	st          *Store
	id          string
	messagesKey string
	metadataKey string
}

var (
	_ session.LatestReader      = (*Session)(nil)
	_ session.VersionedReplacer = (*Session)(nil)
)

// SessionID returns the session's id.
func (s *Session) SessionID() string { return s.id }

// Keys returns the session's two state keys, as the application names
// them (daprd prefixes them with "<app id>||" in the store).
func (s *Session) Keys() (messages, metadata string) { return s.messagesKey, s.metadataKey }

// Items returns the whole history, oldest first. Records that are not JSON
// objects are skipped and reported, and so is a stored value that is not a
// JSON array, which reads as empty (as in Python).
func (s *Session) Items(ctx context.Context) ([]session.Item, error) {
	return s.read(ctx, -1)
}

// LatestItems returns the newest n items, oldest first: n == 0 gives none
// and n < 0 is session.ErrInvalidLimit. It reads the one key and walks
// back from its end, counting readable items only.
func (s *Session) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	if n < 0 {
		return nil, fmt.Errorf("dapr: %w: %d", session.ErrInvalidLimit, n)
	}
	if err := s.st.check(ctx); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	return s.read(ctx, n)
}

// read returns the newest n readable items (all when n < 0).
func (s *Session) read(ctx context.Context, n int) ([]session.Item, error) {
	if err := s.st.check(ctx); err != nil {
		return nil, err
	}
	data, _, err := s.st.get(ctx, s.messagesKey)
	if err != nil {
		return nil, readError(ctx, "read "+strconv.Quote(s.messagesKey), err)
	}
	elems, err := decodeMessages(data)
	if err != nil {
		s.report(ctx, "value", data, err)
		return nil, nil
	}
	var out []session.Item
	for i := len(elems) - 1; i >= 0 && (n < 0 || len(out) < n); i-- {
		it, err := decodeElement(elems[i])
		if err != nil {
			s.report(ctx, "index "+strconv.Itoa(i), recordText(elems[i]), err)
			continue
		}
		out = append(out, it)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

func (s *Session) report(ctx context.Context, pos string, raw []byte, err error) {
	s.st.opts.OnCorrupt(ctx, driver.CorruptRecord{SessionID: s.id, Position: pos, Raw: bytes.Clone(raw), Err: err})
}

// AddItems appends items as one batch: it reads the array and its ETag,
// and saves the array with the batch at its end under that ETag
// (first-write concurrency), retrying with backoff when another writer
// changed it in between; then it saves the metadata. A stored value that
// is not a JSON array is never overwritten: the call fails with an error
// wrapping session.ErrCorruptRecord. A metadata save that fails after the
// items were committed is logged, and the append reported done.
func (s *Session) AddItems(ctx context.Context, items []session.Item) error {
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	if err := s.st.check(ctx); err != nil {
		return err
	}
	if len(items) == 0 {
		return nil
	}
	texts := make([][]byte, len(items))
	for i, it := range items {
		texts[i] = it.Bytes()
	}
	return s.add(ctx, texts)
}

func (s *Session) add(ctx context.Context, texts [][]byte) error {
	if err := s.st.check(ctx); err != nil {
		return err
	}
	unlock := s.st.lock(s.id)
	defer unlock()
	_, err := s.rewrite(ctx, "append", func(data []byte) (plan, error) {
		elems, err := decodeMessages(data)
		if err != nil {
			s.report(ctx, "value", data, err)
			return plan{}, fmt.Errorf("dapr: session %q: refusing to rewrite it: %w", s.id, err)
		}
		v, err := encodeMessages(elems, texts)
		if err != nil {
			return plan{}, fmt.Errorf("dapr: encode the history: %w", err)
		}
		return plan{value: v}, nil
	})
	if err != nil {
		return err
	}
	s.saveMetadata(ctx)
	return nil
}

// PopItem removes and returns the newest item: it saves the array without
// it under the ETag it read, retrying as AddItems does. Unreadable
// records above the newest item stay in place and are reported (Python's
// pop_item removes an unreadable newest record and pops the next one).
func (s *Session) PopItem(ctx context.Context) (session.Item, bool, error) {
	if err := s.st.check(ctx); err != nil {
		return session.Item{}, false, err
	}
	unlock := s.st.lock(s.id)
	defer unlock()
	var popped session.Item
	p, err := s.rewrite(ctx, "pop", func(data []byte) (plan, error) {
		elems, err := decodeMessages(data)
		if err != nil {
			s.report(ctx, "value", data, err)
			return plan{noop: true}, nil
		}
		for i := len(elems) - 1; i >= 0; i-- {
			it, err := decodeElement(elems[i])
			if err != nil {
				s.report(ctx, "index "+strconv.Itoa(i)+" (kept)", recordText(elems[i]), err)
				continue
			}
			rest := append(elems[:i:i], elems[i+1:]...)
			v, err := encodeMessages(rest, nil)
			if err != nil {
				return plan{}, err
			}
			popped = it
			return plan{value: v}, nil
		}
		return plan{noop: true}, nil
	})
	if err != nil || p.noop {
		return session.Item{}, false, err
	}
	if s.st.opts.TTL > 0 {
		// Python's pop_item does not rewrite the metadata; with a TTL it
		// would then expire before the items it describes.
		s.saveMetadata(ctx)
	}
	return popped, true, nil
}

// Clear deletes both keys, the messages first, as Python's clear_session.
func (s *Session) Clear(ctx context.Context) error {
	if err := s.st.check(ctx); err != nil {
		return err
	}
	unlock := s.st.lock(s.id)
	defer unlock()
	opts := &daprc.StateOptions{Consistency: s.st.opts.stateConsistency()}
	for _, key := range []string{s.messagesKey, s.metadataKey} {
		err := s.st.client.DeleteStateWithETag(ctx, s.st.opts.StoreName, key, nil, nil, opts)
		switch classifyWrite(err) {
		case writeDone:
		case writeRefused:
			if key == s.messagesKey {
				return fmt.Errorf("dapr: delete %q: %w", key, err)
			}
			return unknownOutcome(ctx, "clear (messages deleted, metadata refused)", err)
		default:
			return unknownOutcome(ctx, "delete "+strconv.Quote(key), err)
		}
	}
	return nil
}

// ReplaceItems replaces the whole history with items in one conditional
// save (an empty items deletes the array). Like AddItems it refuses to
// overwrite a stored value that is not a JSON array; ReplaceItemsIf can.
func (s *Session) ReplaceItems(ctx context.Context, items []session.Item) error {
	return s.replace(ctx, nil, items)
}

// HistoryVersion returns the SHA-256 of the stored array's bytes, hex:
// equal versions are equal arrays, readable records or not.
func (s *Session) HistoryVersion(ctx context.Context) (string, error) {
	if err := s.st.check(ctx); err != nil {
		return "", err
	}
	data, _, err := s.st.get(ctx, s.messagesKey)
	if err != nil {
		return "", readError(ctx, "read "+strconv.Quote(s.messagesKey), err)
	}
	return versionOf(data), nil
}

// ReplaceItemsIf replaces the whole history with items if its version is
// still version, and otherwise returns session.ErrHistoryChanged and
// writes nothing.
func (s *Session) ReplaceItemsIf(ctx context.Context, version string, items []session.Item) error {
	return s.replace(ctx, &version, items)
}

func versionOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func (s *Session) replace(ctx context.Context, version *string, items []session.Item) error {
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	if err := s.st.check(ctx); err != nil {
		return err
	}
	texts := make([][]byte, len(items))
	for i, it := range items {
		texts[i] = it.Bytes()
	}
	unlock := s.st.lock(s.id)
	defer unlock()
	p, err := s.rewrite(ctx, "replace", func(data []byte) (plan, error) {
		if version != nil {
			if versionOf(data) != *version {
				return plan{}, fmt.Errorf("dapr: session %q: %w", s.id, session.ErrHistoryChanged)
			}
		} else if _, err := decodeMessages(data); err != nil {
			s.report(ctx, "value", data, err)
			return plan{}, fmt.Errorf("dapr: session %q: refusing to rewrite it: %w", s.id, err)
		}
		if len(texts) == 0 {
			if len(data) == 0 {
				return plan{noop: true}, nil
			}
			return plan{del: true}, nil
		}
		v, err := encodeMessages(nil, texts)
		if err != nil {
			return plan{}, err
		}
		return plan{value: v}, nil
	})
	if err != nil || p.noop {
		return err
	}
	if p.del {
		opts := &daprc.StateOptions{Consistency: s.st.opts.stateConsistency()}
		if err := s.st.client.DeleteStateWithETag(ctx, s.st.opts.StoreName, s.metadataKey, nil, nil, opts); err != nil {
			s.st.opts.Logger.WarnContext(ctx, "dapr: the history was replaced by an empty one but its metadata could not be deleted",
				"session_id", s.id, "error", err)
		}
		return nil
	}
	s.saveMetadata(ctx)
	return nil
}

// plan is what one try of a rewrite saves.
type plan struct {
	value []byte // the new array
	del   bool   // delete the array instead
	noop  bool   // write nothing
}

// rewrite reads the array and its ETag, asks change for the new value and
// saves it under that ETag with first-write concurrency, as Python's
// add_items and pop_item do, up to MaxAttempts times while the ETag turns
// out stale.
//
// A try whose save conflicts may still have been committed: daprd's
// Redis client retries a command whose reply it lost, and the retry then
// finds its own write's ETag. So when the next read finds the value the
// conflicting try wrote (or that value with more records after it), the
// outcome is reported unknown instead of being applied a second time.
func (s *Session) rewrite(ctx context.Context, op string, change func(data []byte) (plan, error)) (plan, error) {
	var read, tried []byte // what the last try read and wrote, when it conflicted
	conflicted := false
	for attempt := 1; ; attempt++ {
		data, etag, err := s.st.get(ctx, s.messagesKey)
		if err != nil {
			return plan{}, readError(ctx, op+": read "+strconv.Quote(s.messagesKey), err)
		}
		if conflicted && mayHoldOwnWrite(data, read, tried) {
			return plan{}, fmt.Errorf("dapr: %s: %w: a try reported as a conflict may have been committed (the session now holds what it wrote)",
				op, session.ErrOutcomeUnknown)
		}
		p, err := change(data)
		if err != nil || p.noop {
			return p, err
		}
		if err := ctx.Err(); err != nil {
			return plan{}, err
		}
		opts := &daprc.StateOptions{Concurrency: daprc.StateConcurrencyFirstWrite, Consistency: s.st.opts.stateConsistency()}
		if p.del {
			err = s.st.client.DeleteStateWithETag(ctx, s.st.opts.StoreName, s.messagesKey, &daprc.ETag{Value: etag}, nil, opts)
		} else {
			err = s.st.client.SaveBulkState(ctx, s.st.opts.StoreName, &daprc.SetStateItem{
				Key:      s.messagesKey,
				Value:    p.value,
				Etag:     &daprc.ETag{Value: etag},
				Metadata: s.st.writeMeta(),
				Options:  opts,
			})
		}
		switch classifyWrite(err) {
		case writeDone:
			return p, nil
		case writeRefused:
			return plan{}, fmt.Errorf("dapr: %s: save %q: %w", op, s.messagesKey, err)
		case writeUnknown:
			return plan{}, unknownOutcome(ctx, op+": save "+strconv.Quote(s.messagesKey), err)
		}
		if attempt >= s.st.opts.MaxAttempts {
			return plan{}, fmt.Errorf("%w: %s of session %q, %d tries: %w", ErrConflict, op, s.id, attempt, err)
		}
		conflicted, read, tried = true, data, p.value
		if err := sleep(ctx, retryDelay(attempt)); err != nil {
			return plan{}, err
		}
	}
}

// mayHoldOwnWrite reports whether data, read after a try that replaced
// read with tried conflicted, may hold that try's write: it is tried, or
// tried with records appended after it, and not read itself (or read with
// records appended), which is what it would be had the try not landed.
// When read and tried are both possible, the longer one decides: an append
// extends what it read, a pop or a replace that keeps the head is a prefix
// of it.
func mayHoldOwnWrite(data, read, tried []byte) bool {
	if len(read) >= len(tried) {
		if extends(data, read) {
			return false
		}
		return extends(data, tried)
	}
	return extends(data, tried)
}

// extends reports whether the stored value data is v or v with more array
// elements after v's last one. Every value extends an absent one.
func extends(data, v []byte) bool {
	switch {
	case len(v) == 0:
		return true
	case bytes.Equal(data, v):
		return true
	case bytes.Equal(v, []byte("[]")):
		return len(data) > 2 && data[0] == '['
	case len(v) < 2 || len(data) <= len(v):
		return false
	}
	open := v[:len(v)-1] // without the closing ']'
	return bytes.HasPrefix(data, open) && data[len(open)] == ','
}

// retryDelay is Python's _calculate_retry_delay: 50 ms·2^(attempt-1),
// at most 1 s, plus up to 10% jitter.
func retryDelay(attempt int) time.Duration {
	d := 50 * time.Millisecond << min(max(attempt-1, 0), 10)
	d = min(d, time.Second)
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// saveMetadata saves "<id>:metadata" as Python's add_items does: both
// times now, last-write. Its failure is logged only: the items are
// committed by then.
func (s *Session) saveMetadata(ctx context.Context) {
	v, err := encodeMetadata(s.id, time.Now().Unix())
	if err == nil {
		err = s.st.client.SaveBulkState(ctx, s.st.opts.StoreName, &daprc.SetStateItem{
			Key:      s.metadataKey,
			Value:    v,
			Metadata: s.st.writeMeta(),
			Options:  &daprc.StateOptions{Consistency: s.st.opts.stateConsistency()},
		})
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.st.opts.Logger.WarnContext(ctx, "dapr: the items were saved but the session metadata was not",
			"session_id", s.id, "error", err)
	}
}
