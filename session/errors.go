package session

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors, checked with errors.Is.
var (
	// ErrInvalidItem reports an item that is not a JSON object.
	ErrInvalidItem = errors.New("session: item is not a JSON object")
	// ErrInvalidLimit reports a negative latest-N limit.
	ErrInvalidLimit = errors.New("session: limit must not be negative")
	// ErrInvalidSessionID reports an empty (or otherwise unusable) session id.
	ErrInvalidSessionID = errors.New("session: invalid session id")
	// ErrClosed reports a call on a session or store that was closed.
	ErrClosed = errors.New("session: closed")
	// ErrBatchTooLarge reports a batch the backend cannot store atomically.
	ErrBatchTooLarge = errors.New("session: batch too large")
	// ErrCorruptRecord reports a stored record that is not a JSON object.
	ErrCorruptRecord = errors.New("session: corrupt stored record")
	// ErrUnsupported reports an operation the session cannot perform.
	ErrUnsupported = errors.New("session: unsupported")
	// ErrHistoryChanged reports a conditional replace that found the history
	// changed since its version was read; nothing was written.
	ErrHistoryChanged = errors.New("session: history changed since it was read")
	// ErrOutcomeUnknown reports a write that may or may not have been
	// committed: the deadline passed or the connection was lost while the
	// commit was in flight. Read the session before writing it again. An
	// error without it means nothing was written.
	ErrOutcomeUnknown = errors.New("session: outcome unknown")
)

// ItemError reports which item of a batch was rejected and why. It wraps
// ErrInvalidItem.
type ItemError struct {
	Index int   // position of the item in the batch
	Err   error // the underlying decoding error, if any
}

func (e *ItemError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("session: item %d is not a JSON object", e.Index)
	}
	// The decoding error usually wraps ErrInvalidItem already: say it once.
	detail := strings.TrimPrefix(e.Err.Error(), ErrInvalidItem.Error()+": ")
	if detail == ErrInvalidItem.Error() {
		return fmt.Sprintf("session: item %d is not a JSON object", e.Index)
	}
	return fmt.Sprintf("session: item %d is not a JSON object: %s", e.Index, detail)
}

// Unwrap returns ErrInvalidItem and the decoding error.
func (e *ItemError) Unwrap() []error { return []error{ErrInvalidItem, e.Err} }
