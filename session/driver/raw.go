package driver

import "context"

// RawAppender is implemented by stores that can append a record exactly as
// given, bypassing validation, so that a test (the conformance suite's
// corrupt-record clause, sessionctl check) can store what a damaged or
// foreign writer would leave behind. Production code never calls it.
type RawAppender interface {
	AppendRaw(ctx context.Context, id string, raw []byte) error
}
