// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/compiler/protogen"

	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/runtime/policy"
)

// exportOptions are the plugin's own parameters: which files, besides the
// Go client, it writes from the same resolved policy for the callers that
// are not Go (serviceconfig.go, envoy.go) and for the reviewers (docs.go).
type exportOptions struct {
	serviceConfig bool   // service_config=true: <prefix>.service_config.json
	envoy         bool   // envoy=true: <prefix>.envoy.yaml
	envoyRetries  string // envoy_retries=envoy|client: the layer that retries behind Envoy
	retriesGiven  bool   // envoy_retries was given (it needs envoy=true)
	docs          bool   // docs=true: <prefix>.policy.md
}

// The layers that may retry a call that goes through Envoy.
const (
	retriesAtEnvoy  = "envoy"
	retriesAtClient = "client"
)

// newExportOptions registers the plugin's own parameters on flags.
func newExportOptions(flags *flag.FlagSet) *exportOptions {
	o := &exportOptions{envoyRetries: retriesAtEnvoy}
	flags.BoolVar(&o.serviceConfig, "service_config", false, "write <file>.service_config.json, the gRPC service config of the file's services")
	flags.BoolVar(&o.envoy, "envoy", false, "write <file>.envoy.yaml, the Envoy route and cluster settings of the file's services")
	flags.Func("envoy_retries", "the layer that retries calls made through Envoy: envoy (default) or client", func(v string) error {
		if v != retriesAtEnvoy && v != retriesAtClient {
			return fmt.Errorf("must be %s (Envoy retries, the callers do not) or %s (the callers retry, the routes get no retry_policy), got %q", retriesAtEnvoy, retriesAtClient, v)
		}
		o.envoyRetries, o.retriesGiven = v, true
		return nil
	})
	flags.BoolVar(&o.docs, "docs", false, "write <file>.policy.md, the effective policy of every method and where each value came from")
	return o
}

// paramFunc sets the plugin's own parameters; protogen handles paths,
// module, annotate_code and M… itself before calling it. An unknown
// parameter or a bad value is refused with a sentence naming the valid ones;
// protogen prefixes it with the plugin's name. So is one given twice with
// two values (envoy_retries=client, then envoy_retries=envoy, as a
// buf.gen.yaml's opt list can hold): the last would win silently.
func paramFunc(flags *flag.FlagSet) func(name, value string) error {
	given := map[string]string{}
	return func(name, value string) error {
		f := flags.Lookup(name)
		if f == nil {
			var names []string
			flags.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
			sort.Strings(names)
			return fmt.Errorf("unknown parameter %q: the plugin takes %s=…, besides protogen's paths=, module=, annotate_code and M…", name, strings.Join(names, "=…, "))
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() && value == "" {
			value = "true" // "docs" alone, as in "docs,paths=source_relative"
		}
		if err := flags.Set(name, value); err != nil {
			return fmt.Errorf("parameter %s=%s: %v", name, value, unwrapFlagError(err))
		}
		// As set: a bool's value is what it parsed to ("docs", "docs=true").
		set := value
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			set = f.Value.String()
		}
		if before, ok := given[name]; ok && before != set {
			return fmt.Errorf("parameter %s is given twice, as %s=%s and %s=%s, and only the last would count: give it once", name, name, before, name, set)
		}
		given[name] = set
		return nil
	}
}

// emptyBoolParam refuses a boolean parameter of flags written with "="
// and nothing after it (envoy=), which protogen hands over as it hands
// over the name alone (envoy), and paramFunc would read as true: a value
// left out, or a template that expanded to nothing, is no yes.
func emptyBoolParam(parameter string, flags *flag.FlagSet) error {
	if flags == nil {
		return nil
	}
	for _, p := range strings.Split(parameter, ",") {
		name, value, ok := strings.Cut(p, "=")
		if !ok || value != "" {
			continue
		}
		f := flags.Lookup(name)
		if f == nil {
			continue // protogen's, or unknown: paramFunc says so
		}
		if b, isBool := f.Value.(interface{ IsBoolFlag() bool }); isBool && b.IsBoolFlag() {
			return fmt.Errorf("parameter %s= has no value: %s takes true or false (%s alone is %s=true)", name, name, name, name)
		}
	}
	return nil
}

// checkParams refuses a parameter that would do nothing beside the
// others: envoy_retries chooses how the routes of envoy=true retry.
func (o *exportOptions) checkParams() error {
	if o.retriesGiven && !o.envoy {
		return fmt.Errorf("parameter envoy_retries=%s chooses the layer that retries behind Envoy, for the routes that envoy=true writes, and envoy=true is not given, so no file would say it: add envoy=true, or remove envoy_retries", o.envoyRetries)
	}
	return nil
}

// unwrapFlagError drops the flag package's "invalid value … for flag -x:"
// prefix, which repeats what the caller already says.
func unwrapFlagError(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "invalid ") {
		msg = msg[i+2:]
	}
	if msg == "parse error" {
		msg = "must be true or false"
	}
	return msg
}

// generate runs the plugin without its own parameters: the Go clients only.
func generate(gen *protogen.Plugin) error {
	return generateWith(gen, &exportOptions{envoyRetries: retriesAtEnvoy})
}

// writeExports writes the files the parameters ask for, for one .proto file
// with services, from the policies the generator resolved and checked.
func writeExports(gen *protogen.Plugin, f *protogen.File, services []*service, o *exportOptions) error {
	if o == nil {
		return nil
	}
	if o.serviceConfig {
		b, err := serviceConfigJSON(f, services)
		if err != nil {
			return err
		}
		gen.NewGeneratedFile(f.GeneratedFilenamePrefix+".service_config.json", "").P(string(b))
	}
	if o.envoy {
		gen.NewGeneratedFile(f.GeneratedFilenamePrefix+".envoy.yaml", "").P(envoyYAML(gen, f, services, o.envoyRetries))
	}
	if o.docs {
		gen.NewGeneratedFile(f.GeneratedFilenamePrefix+".policy.md", "").P(policyMarkdown(gen, f, services))
	}
	return nil
}

// idempotencyKeyHeader is the metadata key that carries a call's
// idempotency key, the one runtime.IdempotencyKeyHeader is: the plugin
// binary reads it from internal/contract, not linking the runtime.
const idempotencyKeyHeader = contract.IdempotencyKeyHeader

// repeatableWithoutKey reports whether any caller may repeat the method
// (retry or hedge it): it is idempotent, or it is not repeated at all. A
// method that is repeated only because it has an idempotency key (named or
// generated) is safe to repeat only for a caller that sends the key, which
// the generated Go clients do and a caller in another language loading an
// export need not: the exports repeat it only where the key is seen (an
// Envoy route that matches the idempotency-key header), never for every
// caller (the gRPC service config).
func repeatableWithoutKey(mp *policy.Method) bool {
	return mp.Idempotent || (mp.Retry == nil && mp.Hedging == nil)
}

// oneAttempt is mp without its retries and hedging: what an export may
// apply to a call that does not carry the idempotency key.
func oneAttempt(mp *policy.Method) *policy.Method {
	c := *mp
	c.Retry, c.Hedging = nil, nil
	return &c
}

// seconds writes a duration as protobuf's JSON form of a Duration does
// ("0.300s", "2s": 0, 3, 6 or 9 decimals), which gRPC's service config,
// Envoy's YAML and people all read.
func seconds(d time.Duration) string {
	sec, nanos := int64(d/time.Second), int64(d%time.Second)
	switch {
	case nanos == 0:
		return fmt.Sprintf("%ds", sec)
	case nanos%1e6 == 0:
		return fmt.Sprintf("%d.%03ds", sec, nanos/1e6)
	case nanos%1e3 == 0:
		return fmt.Sprintf("%d.%06ds", sec, nanos/1e3)
	default:
		return fmt.Sprintf("%d.%09ds", sec, nanos)
	}
}
