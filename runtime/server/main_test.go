package server

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine they started is still
// running at the end: a lease renewer, a waiter, a server left behind. It
// silences go-redis's own log, which reports every failed dial while the
// tests stop Redis on purpose.
func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
