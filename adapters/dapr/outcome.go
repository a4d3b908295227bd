package dapr

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentsessions/sessions/session"
)

// writeResult classifies the error of one state write.
type writeResult int

const (
	writeDone     writeResult = iota // no error
	writeConflict                    // the ETag was stale: nothing was written
	writeRefused                     // the sidecar refused the request before the store ran it
	writeUnknown                     // the write may or may not have been committed
)

// classifyWrite tells what a failed save or delete did. daprd answers
// Aborted for an ETag mismatch (the store's conditional write refused it);
// a first write that loses the race to create the key answers Internal
// with the Redis state store's script error ("failed to set key",
// "user_script"). InvalidArgument, FailedPrecondition, NotFound,
// PermissionDenied, Unauthenticated and Unimplemented are answered before
// the store is called. Anything else, a transport error in particular, is
// unknown: the sidecar or the store may have committed the write before
// its reply was lost.
func classifyWrite(err error) writeResult {
	if err == nil {
		return writeDone
	}
	st, ok := status.FromError(err)
	if !ok {
		return writeUnknown
	}
	switch st.Code() {
	case codes.Aborted:
		return writeConflict
	case codes.InvalidArgument, codes.FailedPrecondition, codes.NotFound,
		codes.PermissionDenied, codes.Unauthenticated, codes.Unimplemented:
		return writeRefused
	case codes.Internal:
		msg := strings.ToLower(st.Message())
		if strings.Contains(msg, "failed to set key") && strings.Contains(msg, "user_script") {
			return writeConflict
		}
	}
	return writeUnknown
}

// unknownOutcome wraps err of a write that may have been committed with
// session.ErrOutcomeUnknown, and with the context's error when the context
// ended.
func unknownOutcome(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("dapr: %s: %w: %w (%w)", op, session.ErrOutcomeUnknown, cerr, err)
	}
	return fmt.Errorf("dapr: %s: %w: %w", op, session.ErrOutcomeUnknown, err)
}

// readError wraps the error of a read, with the context's error when the
// context ended (gRPC reports it as a status, which errors.Is does not
// match).
func readError(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("dapr: %s: %w (%w)", op, cerr, err)
	}
	return fmt.Errorf("dapr: %s: %w", op, err)
}
