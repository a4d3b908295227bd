package main

import (
	"context"

	goredis "github.com/redis/go-redis/v9"
)

// quietDriverLogs silences go-redis's own logger, which writes every
// failed dial to standard error: sessionctl says what failed in one line
// of its own.
func quietDriverLogs() { goredis.SetLogger(discardLogger{}) }

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...interface{}) {}
