package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// checkDeadline refuses a request whose deadline has passed or leaves less
// than min: nobody would read its answer.
func checkDeadline(ctx context.Context, method string, min time.Duration) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return status.Errorf(codes.Canceled, "resilient: the caller of %s cancelled it before it was started", method)
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	left := time.Until(dl)
	if left <= 0 {
		return status.Errorf(codes.DeadlineExceeded, "resilient: the deadline of %s passed before it was started", method)
	}
	if left < min {
		return status.Errorf(codes.DeadlineExceeded, "resilient: %s needs at least %s, the caller left %s",
			method, min, left.Round(time.Microsecond))
	}
	return nil
}

// withDefaultTimeout bounds ctx by d when the caller sent no deadline.
func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}
