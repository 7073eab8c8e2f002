package override_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
)

// What the override loader accepts, the runtime builds: for a grid of
// extreme values of the adaptive limit, the client throttle, the bulkhead
// under them, the shedding limits and the dedup (NaN, ±Inf, 0, negative,
// huge, min above max, initial outside), alone and in pairs, at the
// service and on a method, a file Parse accepts gives a client NewClient
// builds (and whose policy Validate accepts), and server options that
// ServerOptions gives (it checks the server keys against the server policy
// Parse does not have) NewGuard takes; a refusal names a key, and nothing
// panics.
func TestAttackTodayOverrideAcceptedIsBuilt(t *testing.T) {
	nums := []string{".nan", ".inf", "-.inf", "0", "-1", "0.5", "1", "1.5", "2", "3", "8", "9", "1000", "4294967295", "4294967296", "1e308", "9223372036854775807"}
	durs := []string{"0s", "-1s", "1ns", "9ns", "10ns", "1ms", "1s", "24h", "2562047h", "2562048h"}
	var clientLeaves []string
	for _, k := range []string{"adaptive_limit.min_limit", "adaptive_limit.max_limit", "adaptive_limit.initial_limit",
		"adaptive_limit.tolerance", "adaptive_limit.smoothing", "client_throttle.k", "client_throttle.max_refusal", "bulkhead.permits"} {
		for _, v := range nums {
			clientLeaves = append(clientLeaves, k+"="+v)
		}
	}
	for _, k := range []string{"adaptive_limit.baseline_window", "client_throttle.window", "bulkhead.max_wait"} {
		for _, v := range durs {
			clientLeaves = append(clientLeaves, k+"="+v)
		}
	}
	pairs := [][2]string{}
	for _, a := range []string{"adaptive_limit.min_limit=1", "adaptive_limit.min_limit=3", "adaptive_limit.min_limit=9", "bulkhead.permits=1", "bulkhead.permits=2"} {
		for _, b := range []string{"adaptive_limit.max_limit=2", "adaptive_limit.max_limit=8", "adaptive_limit.initial_limit=1", "adaptive_limit.initial_limit=5", "adaptive_limit.initial_limit=100", "bulkhead.permits=4"} {
			if strings.Split(a, "=")[0] != strings.Split(b, "=")[0] {
				pairs = append(pairs, [2]string{a, b})
			}
		}
	}
	n, built := 0, 0
	build := func(body string) {
		t.Helper()
		n++
		var set *override.Set
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panicked: %v", r)
				}
			}()
			set, err = override.Parse("o.yaml", []byte(body), nil, inventory)
		}()
		if err != nil {
			if strings.Contains(err.Error(), "panicked") || !strings.Contains(err.Error(), "o.yaml") {
				t.Errorf("%s: refused without naming the key: %v", body, err)
			}
			return
		}
		if !acceptedBuilds(t, set, body) {
			return
		}
		built++
	}
	for _, l := range clientLeaves {
		build(todayFile("", l))
		build(todayFile("GetStock", l, "adaptive_limit.per_method=true"))
	}
	for _, p := range pairs {
		build(todayFile("", p[0], p[1]))
		build(todayFile("", "adaptive_limit.tolerance=2", p[0], p[1]))
		build(todayFile("GetStock", "adaptive_limit.per_method=true", p[0], p[1]))
	}
	// The server side: shedding limits and the dedup of ReserveStock.
	for _, k := range []string{"shedding.low", "shedding.normal", "shedding.high", "shedding.critical"} {
		for _, v := range nums {
			build(todayFile("", k+"="+v))
		}
	}
	for _, k := range []string{"shedding.pushback", "server.dedup.ttl", "server.dedup.lease", "server.min_deadline", "server.default_timeout"} {
		for _, v := range durs {
			if strings.HasPrefix(k, "server.") {
				build(todayFile("ReserveStock", k+"="+v))
			} else {
				build(todayFile("", k+"="+v))
			}
		}
	}
	for _, pair := range [][2]string{{"server.min_deadline=1s", "server.default_timeout=500ms"}, {"server.dedup.ttl=1m", "server.dedup.lease=1h"}, {"server.dedup.ttl=1s", "server.dedup.lease=1s"}} {
		build(todayFile("ReserveStock", pair[0], pair[1]))
	}
	t.Logf("%d files tried, %d built", n, built)
	if built == 0 || built == n {
		t.Fatalf("%d of %d built: the grid tries nothing on one side", built, n)
	}
}

// todayFile writes an override file of the inventory service setting
// leaves ("path.to.field=value"), on method when not "".
func todayFile(method string, leaves ...string) string {
	var b strings.Builder
	b.WriteString("services:\n  example.inventory.v1.InventoryService:\n")
	indent := "    "
	if method != "" {
		b.WriteString("    methods:\n      " + method + ":\n")
		indent = "        "
	}
	// Each group once, with all its leaves, as a flow mapping.
	groups, order := byHead(leaves)
	for _, g := range order {
		b.WriteString(indent + g + ": ")
		b.WriteString(todayFlow(groups[g]))
		b.WriteString("\n")
	}
	return b.String()
}

// todayFlow writes leaves relative to a group as a YAML flow mapping.
func todayFlow(leaves []string) string {
	if strings.HasPrefix(leaves[0], "=") {
		return leaves[0][1:] // one value (pairs never set one key twice)
	}
	sub, order := byHead(leaves)
	var fields []string
	for _, k := range order {
		fields = append(fields, k+": "+todayFlow(sub[k]))
	}
	return "{" + strings.Join(fields, ", ") + "}"
}

// byHead groups leaves ("a.b=v") by their first part, in the order met:
// under "a", "b=v"; a leaf of one part ("a=v") is kept as "=v".
func byHead(leaves []string) (map[string][]string, []string) {
	groups := map[string][]string{}
	var order []string
	for _, l := range leaves {
		kv := strings.SplitN(l, "=", 2)
		head, rest, _ := strings.Cut(kv[0], ".")
		if _, ok := groups[head]; !ok {
			order = append(order, head)
		}
		groups[head] = append(groups[head], rest+"="+kv[1])
	}
	return groups, order
}

// acceptedBuilds checks that a set the loader accepted from body (an
// override file named o.yaml) builds: a client from it with the example's
// InventoryService policy, a policy in force that Validate accepts, and a
// server guard from its ServerOptions, which may refuse a server key
// instead, naming it. It reports each failure and says whether the client
// and the guard were built.
func acceptedBuilds(t *testing.T, set *override.Set, body string) bool {
	t.Helper()
	p := inventory.Clone()
	c, err := runtime.NewClient(&p, set.Options(&p)...)
	if err != nil {
		t.Errorf("accepted by the loader, refused by NewClient:\n%s\n%v", body, err)
		return false
	}
	if err := c.Policy().Validate(); err != nil {
		t.Errorf("accepted by the loader, the policy in force refused by Validate:\n%s\n%v", body, err)
	}
	sv := inventoryServer.Clone()
	opts, err := set.ServerOptions(&sv)
	if err != nil {
		// The server keys are checked against the server policy, which
		// Parse does not have: ServerOptions is their boundary, and
		// names the key it refuses.
		if !strings.Contains(err.Error(), "o.yaml: ") {
			t.Errorf("ServerOptions refused without naming the key:\n%s\n%v", body, err)
		}
		return false
	}
	if _, err := server.NewGuard([]*policy.Server{&sv}, append(opts, server.WithStore(server.NewMemoryStore(8)))...); err != nil {
		t.Errorf("accepted by the loader, refused by NewGuard:\n%s\n%v", body, err)
		return false
	}
	return true
}
