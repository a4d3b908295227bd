package redis_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/redis"
)

// TestGoRedisLogsThroughSlog: a failed Open says why in its error, and
// go-redis's own retry messages go to the program's slog at Debug level,
// not to the process's stderr.
func TestGoRedisLogsThroughSlog(t *testing.T) {
	var logged bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(prev)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := redis.Open(ctx, "redis://127.0.0.1:1/0?dial_timeout=50ms&max_retries=1", redis.Options{})
	require.Error(t, err)
	require.Equal(t, 1, strings.Count(err.Error(), "redis: "), "one prefix: %v", err)
	require.Contains(t, logged.String(), "go-redis: ", "go-redis's messages reach slog")
	require.Contains(t, logged.String(), "level=DEBUG")
}
