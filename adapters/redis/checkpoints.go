package redis

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// LoadCheckpoint returns the document stored under name and its version,
// in one round trip (HMGET of its two fields; with RefreshOnRead and a
// TTL, a script that also refreshes the expiry of every key of the
// session when the checkpoint is there). It returns an error wrapping
// session.ErrNoCheckpoint when there is none.
func (s *Session) LoadCheckpoint(ctx context.Context, name string) ([]byte, int64, error) {
	if err := s.begin(ctx); err != nil {
		return nil, 0, err
	}
	if err := validCheckpointName(name); err != nil {
		return nil, 0, err
	}
	var vals []any
	var err error
	if s.st.opts.RefreshOnRead && s.st.ttlMS > 0 {
		vals, err = s.st.run(ctx, loadCheckpointScript, s.all, s.st.ttlMS, name).Slice()
	} else {
		vals, err = s.st.client.HMGet(ctx, s.CheckpointKey(), versionField+name, documentField+name).Result()
	}
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, 0, fmt.Errorf("redis: load checkpoint %q of session %q: %w", name, s.id, err)
	}
	if len(vals) != 2 || vals[0] == nil {
		return nil, 0, fmt.Errorf("redis: checkpoint %q of session %q: %w", name, s.id, session.ErrNoCheckpoint)
	}
	v, vok := vals[0].(string)
	doc, dok := vals[1].(string)
	version, perr := strconv.ParseInt(v, 10, 64)
	if !vok || !dok || perr != nil || version < 1 {
		return nil, 0, fmt.Errorf("redis: load checkpoint %q of session %q: the stored checkpoint is damaged (version field %q, document present: %t)",
			name, s.id, v, dok)
	}
	return []byte(doc), version, nil
}

// SaveCheckpoint stores doc under name if the stored version is version
// (0: none is stored; session.AnyVersion: any), and returns the new
// version; otherwise it returns an error wrapping
// session.ErrCheckpointConflict and writes nothing. One round trip: the
// commit script with no items, which with a TTL also restarts the expiry
// of every key of the session.
func (s *Session) SaveCheckpoint(ctx context.Context, name string, doc []byte, version int64) (int64, error) {
	return s.AppendWithCheckpoint(ctx, nil, name, doc, version)
}

// AppendWithCheckpoint appends items as one batch, as AddItems does, and
// saves doc under name, as SaveCheckpoint does, in one round trip
// (single-slot in a cluster): both land or neither. It is one script, the
// commit script (EVALSHA), in either layout: it checks the stored version
// and the type of every key it writes before its first write, then writes
// the metadata as the append script does, pushes the items (passed in
// ARGV) and saves the checkpoint. In the native layout, once this handle
// has appended items to the session, it is instead one transaction:
// MULTI, RPUSH of the items, EVAL of a short fence script that checks the
// version and saves the checkpoint or takes the items back off, EXEC (see
// "Checkpoints" in the package documentation). A conflict (an error
// wrapping session.ErrCheckpointConflict) or a failure writes nothing. An empty
// batch only saves the checkpoint (and writes no metadata). With a TTL
// every key of the session, the checkpoint hash included, gets the full
// TTL. The batch is validated and its size checked against MaxBatchBytes
// before anything is sent; once sent, the commit runs to completion even
// if ctx is cancelled meanwhile.
//
// The commit is sent at most once (see once): a lost reply is an error
// wrapping session.ErrOutcomeUnknown, never a resend that could append the
// batch twice. A server that lost its script cache answers the EVALSHA with
// NOSCRIPT having run nothing (the push is inside the script), so the
// script is then sent once with EVAL; the fence is always sent with EVAL.
func (s *Session) AppendWithCheckpoint(ctx context.Context, items []session.Item, name string, doc []byte, version int64) (int64, error) {
	if err := s.begin(ctx); err != nil {
		return 0, err
	}
	if err := validCheckpoint(name, doc); err != nil {
		return 0, err
	}
	if err := driver.ValidateBatch(items); err != nil {
		return 0, err
	}
	if _, err := s.checkSize(items); err != nil {
		return 0, err
	}
	wctx := context.WithoutCancel(ctx)
	if s.mayHold(items, version) && s.hold.mu.TryLock() {
		defer s.hold.mu.Unlock()
		if got, done, err := s.commitHeld(wctx, items, name, doc, version); done {
			return got, err
		}
		got, err := s.commit(wctx, items, name, doc, version)
		if err == nil {
			s.holdAfter(wctx, name, got)
		}
		return got, err
	}
	return s.commit(wctx, items, name, doc, version)
}

// commit is AppendWithCheckpoint's commit on the Store's client: the
// fenced transaction or the commit script.
func (s *Session) commit(wctx context.Context, items []session.Item, name string, doc []byte, version int64) (int64, error) {
	sc := commitScript
	if s.st.opts.Layout == LayoutPython {
		sc = pythonCommitScript
	}
	expected := strconv.FormatInt(version, 10)
	fenced := len(items) > 0 && s.st.opts.Layout == LayoutNative && s.listed.Load()
	var ok bool
	var got int64
	err := s.st.write(wctx, s.keys[0], func(p processor) (bool, error) {
		if fenced {
			res, err := s.commitFenced(wctx, p, items, name, doc, expected, 0)
			if err != nil {
				return false, err
			}
			if res[0] != int64(fenceFallback) {
				ok, got, err = casReply(res)
				return ok, err
			}
			s.listed.Store(false) // the list was gone: the script writes its metadata
		}
		res, err := s.st.runOn(wctx, p, sc, s.all, s.writeArgs(items, name, doc, expected)...).Slice()
		if err != nil {
			return false, err
		}
		ok, got, err = casReply(res)
		return ok, err
	})
	if err != nil {
		return 0, fmt.Errorf("redis: save checkpoint %q of session %q: %w", name, s.id, err)
	}
	if !ok {
		return 0, s.conflict("save", name, got, version)
	}
	if len(items) > 0 {
		s.listed.Store(true)
	}
	return got, nil
}

// fenceFallback is the fence's answer when the commit script must run
// instead (see fenceSrc).
const fenceFallback = 2

// commitFenced is the native layout's commit of a non-empty batch onto a
// list that existed at this handle's last write: MULTI, RPUSH of the
// items, EVAL of the fence (fenceSrc; fenceTTLSrc, which also restarts
// every key's expiry, with a TTL), EXEC, in one round trip, sent
// at most once. The fence sees the batch only by its length: a conflict or
// a failure takes the just-pushed items back off in the same transaction,
// so nothing else runs between the push and its undoing, and nothing is
// left of the commit. It returns the fence's reply, of which a first
// value of fenceFallback means that nothing was written and the commit
// script must run.
//
// A resend (see Session.resend) passes before, the list's length the
// commit must find before its push, and uses resendSrc; before is 0
// otherwise.
func (s *Session) commitFenced(ctx context.Context, p processor, items []session.Item, name string, doc []byte, expected string, before int64) ([]any, error) {
	push := s.pushCmd(ctx, "rpush", items)
	src, nargs := fenceSrc, 4
	switch {
	case before > 0 && s.st.ttlMS > 0:
		src, nargs = resendTTLSrc, 6
	case before > 0:
		src, nargs = resendSrc, 5
	case s.st.ttlMS > 0:
		src, nargs = fenceTTLSrc, 5
	}
	args := append(evalArgs("eval", src, s.all, nargs), name, doc, expected, len(items))
	if s.st.ttlMS > 0 {
		args = append(args, s.st.ttlMS)
	}
	if before > 0 {
		args = append(args, before)
	}
	fence := goredis.NewCmd(ctx, args...)
	fence.SetFirstKeyPos(3)
	_, err := p.TxPipelined(ctx, func(tx goredis.Pipeliner) error {
		_ = tx.Process(ctx, onceInt{push})
		_ = tx.Process(ctx, onceCmd{fence})
		return nil
	})
	if err = txSent(err, push, fence); err != nil && (!answered(err) || errors.Is(err, session.ErrOutcomeUnknown)) {
		return nil, err
	}
	if perr := push.Err(); perr != nil {
		return nil, perr // the fence's LLEN failed too: nothing was written
	}
	res, ferr := fence.Slice()
	if ferr != nil {
		return nil, ferr
	}
	if err != nil {
		return nil, err
	}
	if len(res) != 2 {
		return nil, fmt.Errorf("unexpected fence reply of %d values", len(res))
	}
	return res, nil
}

// DeleteCheckpoint removes the checkpoint under name if its stored version
// is version (or version is session.AnyVersion), in one script; otherwise
// it returns an error wrapping session.ErrCheckpointConflict. Deleting a
// checkpoint that is not there succeeds for version 0 and AnyVersion. It
// leaves the session's expiry as it is.
func (s *Session) DeleteCheckpoint(ctx context.Context, name string, version int64) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := validCheckpointName(name); err != nil {
		return err
	}
	wctx := context.WithoutCancel(ctx)
	var ok bool
	var got int64
	err := s.st.write(wctx, s.CheckpointKey(), func(p processor) (bool, error) {
		res, err := s.st.runOn(wctx, p, deleteCheckpointScript, []string{s.CheckpointKey()},
			name, strconv.FormatInt(version, 10)).Slice()
		if err != nil {
			return false, err
		}
		ok, got, err = casReply(res)
		return ok, err
	})
	if err != nil {
		return fmt.Errorf("redis: delete checkpoint %q of session %q: %w", name, s.id, err)
	}
	if !ok {
		return s.conflict("delete", name, got, version)
	}
	return nil
}

// ListCheckpoints returns the names of the session's checkpoints, sorted,
// in one round trip (HKEYS of the checkpoint hash: no document is read).
func (s *Session) ListCheckpoints(ctx context.Context) ([]string, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	fields, err := s.st.client.HKeys(ctx, s.CheckpointKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: list checkpoints of session %q: %w", s.id, err)
	}
	names := []string{}
	for _, f := range fields {
		if name, ok := strings.CutPrefix(f, versionField); ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// conflict is the error of a save or delete whose expected version is not
// the stored one.
func (s *Session) conflict(op, name string, stored, want int64) error {
	return fmt.Errorf("redis: %s checkpoint %q of session %q: %w: it is at version %d, not %d",
		op, name, s.id, session.ErrCheckpointConflict, stored, want)
}

// casReply reads the {ok, version} reply of the checkpoint scripts: on
// success the version written (or deleted), on a conflict the stored one.
func casReply(res []any) (ok bool, version int64, err error) {
	if len(res) != 2 {
		return false, 0, fmt.Errorf("unexpected script reply of %d values", len(res))
	}
	flag, isInt := res[0].(int64)
	if !isInt {
		return false, 0, fmt.Errorf("unexpected script reply %T", res[0])
	}
	switch v := res[1].(type) {
	case int64:
		version = v
	case string:
		if version, err = strconv.ParseInt(v, 10, 64); err != nil {
			return false, 0, fmt.Errorf("the stored checkpoint version %q is not a number", v)
		}
	default:
		return false, 0, fmt.Errorf("unexpected script reply %T", res[1])
	}
	return flag == 1, version, nil
}

// validCheckpointName refuses the empty name.
func validCheckpointName(name string) error {
	if err := driver.ValidateCheckpointName(name); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// validCheckpoint refuses an empty name or document.
func validCheckpoint(name string, doc []byte) error {
	if err := driver.ValidateCheckpoint(name, doc); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}
