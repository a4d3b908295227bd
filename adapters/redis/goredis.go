package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// goRedisError is an error of go-redis's own, its "redis: " prefix left
// out so that wrapping it under this package's prefix says "redis: " once.
type goRedisError struct{ err error }

func (e goRedisError) Error() string { return strings.TrimPrefix(e.err.Error(), "redis: ") }
func (e goRedisError) Unwrap() error { return e.err }

var quietGoRedis sync.Once

// routeGoRedisLog gives go-redis, the first time a Store is made, a logger
// that writes through slog at Debug level: go-redis's default writes to the
// process's stderr ("pool.go:770: redis: connection pool: failed to dial
// after 5 attempts" on every failed dial), which a program using this
// package never asked for; the same failures reach the caller as errors.
// go-redis has one logger per process: a program that sets its own with
// goredis.SetLogger after that keeps it.
func routeGoRedisLog() {
	quietGoRedis.Do(func() { goredis.SetLogger(slogLogger{}) })
}

type slogLogger struct{}

func (slogLogger) Printf(ctx context.Context, format string, v ...any) {
	slog.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}
