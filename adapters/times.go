package adapters

import (
	"context"
	"time"
)

// SessionTimes are when a session was created and last written, as the
// Python SDK's stores keep them (created_at, updated_at). A zero time is
// unknown on reading, and left as it is on writing.
type SessionTimes struct {
	Created time.Time
	Updated time.Time
}

// Timestamps is implemented by stores that keep a session's times, so that
// copying a session (sessionctl migrate) or rewriting it (repair) can keep
// them instead of stamping the time of the operation.
type Timestamps interface {
	// SessionTimes returns session id's times; ok is false when the store
	// holds no record of the session.
	SessionTimes(ctx context.Context, id string) (t SessionTimes, ok bool, err error)
	// SetSessionTimes sets the non-zero times of session id, which must
	// exist.
	SetSessionTimes(ctx context.Context, id string, t SessionTimes) error
}
