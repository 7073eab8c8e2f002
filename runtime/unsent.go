package runtime

import (
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// marshalFailure is the start of the message grpc-go gives the INTERNAL
// status of a message its codec could not marshal (rpc_util.go, encode).
const marshalFailure = "grpc: error while marshaling"

// unsent returns what the breaker is told of a unary attempt that ended
// with err: a request that did not marshal never left the client, so it
// is a client fault that says nothing about the dependency (a half-open
// probe ended so frees its place instead of counting as a success); any
// other ending is err itself. The caller still gets err. Only a failed
// attempt pays for the check. A server whose response does not marshal
// sends the same status; it is counted as nothing too, where it would
// otherwise count as an answer (INTERNAL is not a default failure code).
func unsent(err error) error {
	if err == nil {
		return nil // small enough to inline: a success pays no call
	}
	return unsentFailure(err)
}

// unsentFailure is unsent of a failed attempt.
func unsentFailure(err error) error {
	if st, ok := status.FromError(err); ok && st.Code() == codes.Internal && strings.HasPrefix(st.Message(), marshalFailure) {
		return &clientFault{err: err}
	}
	return err
}
