package runtime

import "google.golang.org/grpc"

// KeyedOptions23c are the options the runtime adds to a call that sends an
// idempotency key (see withKeyedCodec).
func KeyedOptions23c() []grpc.CallOption { return keyedOptions }
