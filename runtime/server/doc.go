// Package server is the server side of the resilient contract: what a
// service does with the requests its callers send, built from the same
// annotations as the generated clients.
//
// A Guard, built from the policies of one or more services served by one
// gRPC server (each a policy.Server of package runtime/policy, which the
// plugin generates as XxxServerPolicy), gives that server:
//
//   - dead requests dropped: a request whose deadline has passed, or that
//     leaves less time than the method's MinDeadline, is refused with
//     DEADLINE_EXCEEDED before its message is decoded; a request without a
//     deadline gets the method's DefaultTimeout on the handler's context;
//   - priority load shedding: a cumulative in-flight limit per priority
//     (low is shed first, critical last), refused in the InTapHandle, before
//     the request is decoded, with a pushback;
//   - idempotency dedup: for a method with a policy.Dedup, the first request
//     with a given idempotency key runs, a repeat within the TTL gets the
//     stored response or final status with the headers and trailers the
//     handler set, and a repeat that arrives while the first still runs
//     waits for it; a key belongs to one request (another body is refused)
//     and to one caller's scope (WithKeyScope); a store outage shorter than
//     the lease never runs a request twice (a store that loses its entries
//     forgets the keys), and a handler that loses its lease has its
//     context cancelled (ErrLeaseLost). The Store is in
//     memory (NewMemoryStore) or on Redis (package redisstore);
//   - retry at one layer only: a handler that fails because its own
//     dependency failed after the runtime had already retried (or its
//     breaker was open) answers with "do not retry", so the callers above
//     do not multiply the attempts.
//
// Install it with the options the Guard returns:
//
//	g, err := server.NewGuard([]*policy.Server{&inventoryv1.InventoryServiceServerPolicy},
//		server.WithStore(redisstore.New(rdb, "inventory:")))
//	s := grpc.NewServer(append(runtime.ServerOptions(), g.ServerOptions()...)...)
//
// (runtime.ServerOptions accepts the keep-alive pings of clients dialled
// with runtime.DialOptions), and dial the service's own dependencies with
// ClientInterceptor, so the request's priority travels on and the Guard
// sees their failures.
package server
