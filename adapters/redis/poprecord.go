package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Pop records: see "Lost replies" in the package documentation. Every pop
// carries a token the client made (NewPopToken); the script that pops
// also stores the item under the session's pop record key of that token,
// for PopRecordTTL, and a pop whose token has a record pops nothing. So a
// token pops at most one item, ever (within PopRecordTTL), however often
// its script is sent or arrives; RecoverPop reads the record, and when
// there is none writes one that says "nothing" (a fence), so that the
// pop, should its request still be on its way, pops nothing either.

// PopRecordTTL is how long the record of a pop (the item, under its
// token) is kept: RecoverPop can tell what a token popped for that long
// after PopItem returned. It costs the item's bytes per pop, for that
// long.
const PopRecordTTL = 10 * time.Minute

// popRecordPart names the pop record keys of a session: native
// <prefix>:{<escaped id>}:pop:<token> (in the session's hash slot; no
// native key of this package ends so, and ParseKey skips it), Python
// <prefix>:<id>:pop:<token>:messages:counter: like the checkpoint hash's
// (pythonCheckpointKey), a key only of ids the Python layout refuses (the
// hash of one ending in ":counter", the counter of one ending in
// ":messages"), and not a checkpoint hash (a token is never
// "checkpoints"). The Python SDK never reads it, and it expires.
const popRecordPart = ":pop:"

// popIndexPart names a session's index of its pop records: a sorted set
// of the record keys, each scored with its expiry (the server's clock,
// Unix milliseconds), native <prefix>:{<escaped id>}:pops (in the
// session's hash slot), Python <prefix>:<id>:pops:messages:counter (a key
// only of ids the Python layout refuses, as popRecordPart's; no record or
// checkpoint key is it: a token ends in a hex digit, "checkpoints" in
// "ints"). Each script that writes a record adds it here, drops the
// entries already expired (ZREMRANGEBYSCORE), and sets the index's expiry
// to PopRecordTTL, so the index outlives every record it names and holds
// at most the records of the last PopRecordTTL. RemoveSession deletes the
// records it names, and it, with the session's other keys; Clear and
// replaces keep both (a pop whose reply was lost before a Clear can still
// be recovered), and they expire.
const popIndexPart = ":pops"

// ErrPopSettled reports a pop with a token RecoverPop already settled as
// "popped nothing": the token pops nothing, ever. Pop with a new token.
var ErrPopSettled = errors.New("redis: the pop token was settled by RecoverPop as having popped nothing; pop with a new token")

// ErrInvalidPopToken reports a token NewPopToken did not make.
var ErrInvalidPopToken = errors.New("redis: invalid pop token")

// PopUnknownError is the error of a pop whose reply was lost: the item
// may have been removed. It wraps session.ErrOutcomeUnknown and the
// cause. RecoverPop(ctx, Token) returns the item the pop removed, or
// reports that it removed nothing (and makes sure it never will);
// PopItemWithToken(ctx, Token) does the same, but pops when the first
// attempt did not.
type PopUnknownError struct {
	Token string
	Err   error // wraps session.ErrOutcomeUnknown
}

func (e *PopUnknownError) Error() string {
	return e.Err.Error() + " (pop token " + e.Token + ": RecoverPop tells what it removed)"
}

// Unwrap returns the cause, which wraps session.ErrOutcomeUnknown.
func (e *PopUnknownError) Unwrap() error { return e.Err }

// NewPopToken returns a new pop token: the client's clock (Unix
// milliseconds, 12 hex digits) and 64 random bits, "<ms>-<random>".
func NewPopToken() string {
	var b [popTokenLen]byte
	putToken(b[:])
	return string(b[:])
}

// popTokenLen is the length of a token.
const popTokenLen = 29

// putToken writes a new token into dst[:popTokenLen].
func putToken(dst []byte) {
	putHex(dst[:12], uint64(time.Now().UnixMilli()))
	dst[12] = '-'
	putHex(dst[13:popTokenLen], rand.Uint64())
}

// putHex writes v into dst in lower-case hex, right-aligned, zero-padded,
// without fmt (whose buffer pool allocates at random under -race).
func putHex(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = "0123456789abcdef"[v&15]
		v >>= 4
	}
}

// popTokenTime returns when token was made, refusing a token NewPopToken
// would not make.
func popTokenTime(token string) (time.Time, error) {
	if len(token) != popTokenLen || token[12] != '-' {
		return time.Time{}, fmt.Errorf("%w: %q", ErrInvalidPopToken, token)
	}
	for i := 0; i < len(token); i++ {
		c := token[i]
		if i != 12 && !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return time.Time{}, fmt.Errorf("%w: %q", ErrInvalidPopToken, token)
		}
	}
	ms, err := strconv.ParseInt(token[:12], 16, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %q", ErrInvalidPopToken, token)
	}
	return time.UnixMilli(ms), nil
}

// popRecordKey returns the key of the session's pop record of token.
func (s *Session) popRecordKey(token string) string {
	base, tail := s.popRecordParts()
	return base + popRecordPart + token + tail
}

// newPopRecordKey returns the key of the session's pop record of a new
// token, and the token (a substring of the key: one allocation for both).
func (s *Session) newPopRecordKey() (key, token string) {
	base, tail := s.popRecordParts()
	at := len(base) + len(popRecordPart)
	var tok [popTokenLen]byte
	putToken(tok[:])
	var b strings.Builder
	b.Grow(at + popTokenLen + len(tail))
	b.WriteString(base)
	b.WriteString(popRecordPart)
	b.Write(tok[:])
	b.WriteString(tail)
	key = b.String()
	return key, key[at : at+popTokenLen]
}

// popIndexKey returns the key of the session's pop record index.
func (s *Session) popIndexKey() string {
	base, tail := s.popRecordParts()
	return base + popIndexPart + tail
}

// popRecordParts returns what comes before popRecordPart and after the
// token in the session's pop record keys.
func (s *Session) popRecordParts() (base, tail string) {
	if s.st.opts.Layout == LayoutPython {
		return s.keys[1], pythonMessagesSuffix + pythonCounterSuffix
	}
	return s.keys[0][:len(s.keys[0])-len(itemsSuffix)], ""
}

// recoverPopSrc returns the pop record KEYS[2], or, when there is none,
// stores the fence 'x' there for ARGV[1] milliseconds, indexed in the
// session's pop record index KEYS[1] (popIndexPart), and returns nil.
// Its first write, the index's ZREMRANGEBYSCORE, fails on an index of
// another type before anything is written; nothing after it can fail.
const recoverPopSrc = `
local r = redis.call('GET', KEYS[2])
if r then return r end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
redis.call('SET', KEYS[2], 'x', 'PX', ARGV[1])
redis.call('ZADD', KEYS[1], now + ARGV[1], KEYS[2])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return false
`

var recoverPopScript = newScript(recoverPopSrc)

// popRecordMS is PopRecordTTL in milliseconds, as the scripts take it,
// boxed once (an int64 above 255 allocates each time it becomes an any).
var popRecordMS any = PopRecordTTL.Milliseconds()

// settled reads a pop record: the item the token popped (ok), or
// ErrPopSettled for a fence.
func (s *Session) settled(rec string) (session.Item, bool, error) {
	if rec == "x" {
		return session.Item{}, false, fmt.Errorf("redis: pop from session %q: %w", s.id, ErrPopSettled)
	}
	if len(rec) == 0 || rec[0] != 'i' {
		return session.Item{}, false, fmt.Errorf("redis: pop from session %q: the pop record %q is not one this package writes", s.id, rec)
	}
	it, err := driver.DecodeStoredString(rec[1:])
	if err != nil {
		return session.Item{}, false, fmt.Errorf("redis: pop from session %q: the recorded item is unreadable: %v", s.id, err)
	}
	return it, true, nil
}

// RecoverPop settles the pop of token (a PopUnknownError's Token): it
// returns the item that pop removed (ok true), or reports that it removed
// nothing (ok false), having first made sure that it never will, should
// its request still reach the server (the token's record then says
// "nothing", and a pop with it pops nothing: ErrPopSettled). One script,
// one round trip; calling it again gives the same answer. It is a write:
// a lost reply is an error wrapping session.ErrOutcomeUnknown, and calling
// again is safe.
//
// The record lasts PopRecordTTL from the pop: past half of that since the
// token was made (by the clock of the calling process), a token without a
// record may have had one, and RecoverPop returns an error wrapping
// session.ErrOutcomeUnknown instead of ok false.
func (s *Session) RecoverPop(ctx context.Context, token string) (session.Item, bool, error) {
	made, err := popTokenTime(token)
	if err != nil {
		return session.Item{}, false, err
	}
	if err := s.begin(ctx); err != nil {
		return session.Item{}, false, err
	}
	wctx := context.WithoutCancel(ctx)
	var res any
	err = s.st.write(wctx, s.keys[0], func(p processor) (bool, error) {
		var err error
		res, err = s.st.runOn(wctx, p, recoverPopScript, []string{s.pops, s.popRecordKey(token)}, popRecordMS).Result()
		if errors.Is(err, goredis.Nil) {
			res, err = nil, nil
		}
		return err == nil, err
	})
	if err != nil {
		return session.Item{}, false, fmt.Errorf("redis: recover pop %s of session %q: %w", token, s.id, err)
	}
	switch r := res.(type) {
	case string:
		if r == "x" {
			return session.Item{}, false, nil
		}
		return s.settled(r)
	case nil:
		if time.Since(made) >= PopRecordTTL/2 {
			return session.Item{}, false, fmt.Errorf("redis: recover pop %s of session %q: no record, and the token is old enough for it to have expired: %w",
				token, s.id, session.ErrOutcomeUnknown)
		}
		return session.Item{}, false, nil
	}
	return session.Item{}, false, fmt.Errorf("redis: recover pop %s of session %q: unexpected script reply %v: %w", token, s.id, res, session.ErrOutcomeUnknown)
}
