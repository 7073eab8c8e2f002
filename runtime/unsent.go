package runtime

import (
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// marshalFailure is the start of the message grpc-go gives the INTERNAL
// status of a message its codec could not marshal (rpc_util.go, encode).
const marshalFailure = "grpc: error while marshaling"

// unsendable are the starts of the messages of the INTERNAL grpc-go gives
// a call it refuses to send, besides a request that does not marshal:
// outgoing metadata it cannot carry (stream.go, newClientStream, through
// internal/metadata's ValidatePair: a key outside [0-9a-z-_.], an empty
// key, or a value with a byte outside printable ASCII under a key not
// ending in "-bin"), a compressor or a codec named by a call option
// (grpc.UseCompressor, grpc.CallContentSubtype) that the program never
// registered. Nothing was sent.
var unsendable = [...]string{
	marshalFailure,
	`header key "`, // then the key quoted (%q)
	"there is an empty key in the header",
	"grpc: Compressor is not installed for requested grpc-encoding",
	"no codec registered for content-subtype",
}

// connClosing is the message of the CANCELLED grpc-go gives every call
// made on a ClientConn the program closed (grpc.ErrClientConnClosing):
// the client's own doing, with nothing sent.
const connClosing = "grpc: the client connection is closing"

// unsent returns what the breaker (and the adaptive layers) are told of a
// unary attempt, or a stream's RecvMsg, that ended with err: a request
// that did not marshal, or that gRPC otherwise refused to send (see
// unsendable), never left the client, so it is a client fault that says
// nothing about the dependency (a half-open probe ended so frees its
// place instead of counting as a success); any other ending is err
// itself. The caller still gets err. Only a failed
// attempt pays for the check. A server whose response does not marshal
// sends the same status; it is counted as nothing too, where it would
// otherwise count as an answer (INTERNAL is not a default failure code).
func unsent(err error) error {
	if err == nil {
		return nil // small enough to inline: a success pays no call
	}
	return unsentFailure(err)
}

// tooLarge are the starts of the messages grpc-go gives the
// RESOURCE_EXHAUSTED of a message past a size limit (rpc_util.go,
// stream.go): the client's send or receive limit, or the server's receive
// limit, which the server answers with the same words.
var tooLarge = [...]string{
	"grpc: received message larger than max",
	"grpc: received message after decompression larger than max",
	"grpc: message after decompression larger than max",
	"trying to send message larger than max",
}

// unsentFailure is unsent of a failed attempt. A message past a size
// limit is counted as nothing too: the limit is the caller's or the
// server's configuration, not a sign of overload, and counted as a drop it
// would halve the adaptive limit and have the throttler refuse every
// other call towards a healthy dependency. So is a call on a closed
// ClientConn, which gRPC ends with CANCELLED though the caller cancelled
// nothing: counted as an answer, a half-open probe would close the
// breaker.
func unsentFailure(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.Canceled:
		if st.Message() == connClosing {
			return &clientFault{err: err}
		}
	case codes.Internal:
		for _, p := range unsendable {
			if strings.HasPrefix(st.Message(), p) {
				return &clientFault{err: err}
			}
		}
	case codes.ResourceExhausted:
		for _, p := range tooLarge {
			if strings.HasPrefix(st.Message(), p) {
				return &clientFault{err: err}
			}
		}
	}
	return err
}
