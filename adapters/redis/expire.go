package redis

import (
	"context"
	"fmt"
	"time"
)

// TTL returns the store's time to live, rounded up to a whole millisecond
// as Redis keeps it; 0 means the data never expire.
func (s *Session) TTL() time.Duration { return time.Duration(s.st.ttlMS) * time.Millisecond }

// ExpiresIn returns how long until the session's data expire, from the
// server's PTTL of the items list, or, when the session holds no item, of
// its checkpoint hash (one more round trip, for such sessions only); ok is
// false when the session holds neither or its keys have no expiry.
func (s *Session) ExpiresIn(ctx context.Context) (time.Duration, bool, error) {
	if err := s.begin(ctx); err != nil {
		return 0, false, err
	}
	// PTTL answers -2 for a missing key and -1 for a key without expiry;
	// go-redis hands those through as -2ns and -1ns.
	d, err := s.st.client.PTTL(ctx, s.keys[0]).Result()
	if err == nil && d == -2 {
		d, err = s.st.client.PTTL(ctx, s.CheckpointKey()).Result()
	}
	if err != nil {
		return 0, false, fmt.Errorf("redis: ttl of session %q: %w", s.id, err)
	}
	if d < 0 {
		return 0, false, nil
	}
	return d, true, nil
}

// Touch restarts the expiry clock of every key of the session together,
// the checkpoint hash's included, in one round trip. Without a TTL it does
// nothing.
func (s *Session) Touch(ctx context.Context) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if s.st.ttlMS == 0 {
		return nil
	}
	err := s.st.write(ctx, s.keys[0], func(p processor) (bool, error) {
		err := s.st.runOn(ctx, p, touchScript, s.all, s.st.ttlMS).Err()
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("redis: touch session %q: %w", s.id, err)
	}
	return nil
}
