package runtime

import "google.golang.org/grpc"

// onFinishOf takes the caller's grpc.OnFinish options out of opts: it
// returns opts without them (opts itself when there are none, without
// allocating) and their callbacks. grpc-go runs such a callback once per
// gRPC call; the runtime makes several of one call of the caller's
// (retries, hedged copies), one shared by many callers (a cache's shared
// call) or none (a refusal, a fresh answer), so it runs them itself, once
// per call, with the call's result (see finished).
func onFinishOf(opts []grpc.CallOption) ([]grpc.CallOption, []func(error)) {
	if !hasOnFinish(opts) {
		return opts, nil
	}
	rest := make([]grpc.CallOption, 0, len(opts)-1)
	var fns []func(error)
	for _, o := range opts {
		if f, ok := o.(grpc.OnFinishCallOption); ok {
			fns = append(fns, f.OnFinish)
			continue
		}
		rest = append(rest, o)
	}
	return rest, fns
}

// hasOnFinish reports whether opts holds a grpc.OnFinish option (by
// value: grpc-go itself runs no other).
func hasOnFinish(opts []grpc.CallOption) bool {
	for _, o := range opts {
		if _, ok := o.(grpc.OnFinishCallOption); ok {
			return true
		}
	}
	return false
}

// finished runs the callbacks onFinishOf took, in order, with the call's
// final error (nil for an answer), as grpc-go runs its own at the end of
// a call.
func finished(fns []func(error), err error) {
	for _, f := range fns {
		f(err)
	}
}

// refusedWith runs the grpc.OnFinish callbacks in opts with err, the
// refusal of a call or stream the runtime ends before gRPC starts it
// (grpc-go runs them for a call it fails to start), and returns err. A
// nil callback is skipped: it is what the refusal may be about.
func refusedWith(opts []grpc.CallOption, err error) error {
	for _, o := range opts {
		if f, ok := o.(grpc.OnFinishCallOption); ok && f.OnFinish != nil {
			f.OnFinish(err)
		}
	}
	return err
}
