package runtime

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/keepalive"
)

// The values DialOptions and ServerOptions apply. They are chosen so that a
// dependency that vanishes is noticed in seconds, and so that a client
// using them is never cut off by a server using ServerOptions.
const (
	// ConnectTimeout bounds one attempt to connect, TCP and HTTP/2
	// handshake together: a peer that accepts the connection and never
	// speaks HTTP/2 is given up after it (grpc-go's default is 20 s).
	ConnectTimeout = 3 * time.Second
	// KeepaliveTime is how long a connection with calls in flight may stay
	// silent before the client pings the server (grpc-go's minimum is 10 s).
	KeepaliveTime = 20 * time.Second
	// KeepaliveTimeout is how long the client waits for the answer to a
	// ping before it closes the connection and fails the calls on it with
	// UNAVAILABLE. It is also the connection's TCP_USER_TIMEOUT.
	KeepaliveTimeout = 5 * time.Second
)

// DialOptions returns the grpc.DialOptions recommended for a connection
// that a generated client uses: pass them to grpc.NewClient before your own
// (a later option of the same kind wins).
//
//   - A connect timeout (ConnectTimeout, 3 s): without it a peer that
//     accepts TCP connections but never completes the HTTP/2 handshake
//     keeps the channel connecting for 20 s, and every call without a
//     deadline waits that long. The reconnection backoff stays gRPC's
//     standard one (1 s growing to 120 s, with jitter): grpc.WithConnectParams
//     replaces both, and a zero backoff would reconnect in a tight loop.
//   - Keep-alive pings (KeepaliveTime, 20 s; KeepaliveTimeout, 5 s) while
//     calls are in flight: a peer that vanished without closing the
//     connection (a host gone, a network partition) is noticed within
//     25 s, the calls on the connection fail with UNAVAILABLE instead of
//     waiting for their own deadlines, and the channel reconnects. No pings
//     are sent on an idle connection (PermitWithoutStream is false).
//
// A grpc-go server enforces a minimum interval between pings (5 minutes by
// default) and closes with GOAWAY "too_many_pings" a connection that pings
// more often three times in a row while the server itself sends nothing:
// with these values, a call or stream on which the server stays silent for
// 80 s (the fourth ping).
// Serve with ServerOptions (which accepts a ping every 10 s) to remove that
// limit; against a server you do not control, streams that may stay silent
// for long should use a connection dialled with a KeepaliveTime of 5
// minutes.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.DefaultConfig,
			MinConnectTimeout: ConnectTimeout,
		}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                KeepaliveTime,
			Timeout:             KeepaliveTimeout,
			PermitWithoutStream: false,
		}),
	}
}

// ServerOptions returns the grpc.ServerOptions a server needs to accept the
// keep-alive pings of clients dialled with DialOptions: it allows a ping
// every 10 s (half of KeepaliveTime, so that a client's timer drift never
// counts as abuse) while calls are in flight.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             KeepaliveTime / 2,
			PermitWithoutStream: false,
		}),
	}
}
