// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package check_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/go-resilient/resilient/internal/check"
	"github.com/go-resilient/resilient/runtime/policy"
)

// optionWord is a word in the options' names (fresh_ttl, on_store_error);
// quoted is a value a message quotes (a request field, a header), the
// author's own text whatever its case.
var (
	optionWord = regexp.MustCompile(`\b[a-z][a-z0-9]*(_[a-z0-9]+)+\b`)
	quoted     = regexp.MustCompile(`"[^"]*"`)
)

// optionWordIn returns the first word of msg in the options' names
// outside its quoted values, "" for none.
func optionWordIn(msg string) string {
	return optionWord.FindString(quoted.ReplaceAllString(msg, `""`))
}

// everyCheck calls each check internal/check exposes with values it
// refuses (each way it can refuse them), by name. A check returns a
// string (a core that names no other value, read alike by both authors),
// check.Words (one that does) or []string (Codes).
func everyCheck() map[string][]any {
	unary, stream := check.Kind(false, false), check.Kind(true, true)
	var entries []string
	name := func(s *string) string { return *s }
	check.Entries("pkg.S", []string{"/pkg.S/A", "/pkg.S/B"}, []string{"/pkg.S/B", "/pkg.S/B", "/pkg.S/C"}, name,
		func(_, _ *string) {}, func(m, why string) { entries = append(entries, m+": "+why) })
	return map[string][]any{
		"Entries":            {entries},
		"Positive":           {check.Positive(0)},
		"NotNegative":        {check.NotNegative(-1)},
		"Ratio":              {check.Ratio(0), check.Ratio(math.NaN())},
		"AtLeastOne":         {check.AtLeastOne(0)},
		"MaxAttempts":        {check.MaxAttempts(0)},
		"MaxCopies":          {check.MaxCopies(1)},
		"Multiplier":         {check.Multiplier(0.5), check.Multiplier(math.Inf(1))},
		"Rate":               {check.Rate(0)},
		"Probes":             {check.Probes(0), check.Probes(1 << 20)},
		"WindowCalls":        {check.WindowCalls(1 << 30)},
		"Code":               {check.Code(check.Retryable, codes.OK), check.Code(check.Failure, codes.NotFound), check.Code(check.NonFatal, codes.InvalidArgument)},
		"Codes":              {check.Codes(check.Retryable, []codes.Code{codes.OK, codes.NotFound, codes.AlreadyExists}), check.Codes(check.Failure, []codes.Code{codes.PermissionDenied})},
		"Tolerance":          {check.Tolerance(0.5)},
		"AdaptiveMaxLimit":   {check.AdaptiveMaxLimit(0), check.AdaptiveMaxLimit(1 << 30)},
		"AdaptiveWindow":     {check.AdaptiveWindow(1)},
		"ThrottleK":          {check.ThrottleK(0.5)},
		"MaxRefusal":         {check.MaxRefusal(1)},
		"MinAboveMax":        {check.MinAboveMax(10, 5, ""), check.MinAboveMax(150, 100, " (the default)")},
		"MaxBelowMin":        {check.MaxBelowMin(10, 5, "")},
		"AdaptiveTimeout":    {check.AdaptiveTimeout("Get", 0)},
		"AdaptiveOverall":    {check.AdaptiveOverall("Get", time.Second, time.Second)},
		"InitialOutside":     {check.InitialOutside(60, 10, 50)},
		"StreamRetry":        {check.StreamRetry("Watch", stream)},
		"StreamHedging":      {check.StreamHedging("Watch", stream)},
		"StreamCache":        {check.StreamCache("Watch", stream)},
		"StreamKey":          {check.StreamKey("Watch", stream)},
		"RetrySafe":          {check.RetrySafe("Get", false, false)},
		"HedgingIdempotent":  {check.HedgingIdempotent("Get", false)},
		"HedgingRetries":     {check.HedgingRetries("Get", true, "")},
		"CacheIdempotent":    {check.CacheIdempotent("Get", false)},
		"CacheTimeout":       {check.CacheTimeout("Get", 0, 0)},
		"KeyTwice":           {check.KeyTwice("order_id", true)},
		"MaxBackoff":         {check.MaxBackoff(time.Second, time.Millisecond, "")},
		"InitialBackoff":     {check.InitialBackoff(time.Second, time.Millisecond, "")},
		"Timeout":            {check.Timeout(2*time.Second, time.Second, "")},
		"OverallTimeout":     {check.OverallTimeout(2*time.Second, time.Second, "")},
		"StaleTTL":           {check.StaleTTL(time.Second, time.Millisecond)},
		"HedgingDelay":       {check.HedgingDelay(time.Second, time.Second, 0, "", ""), check.HedgingDelay(time.Second, 0, time.Second, "", "")},
		"WindowBelowMinimum": {check.WindowBelowMinimum(5, 10, "")},
		"MinimumAboveWindow": {check.MinimumAboveWindow(5, 10)},
		"AboveCeiling":       {check.AboveCeiling(9, 8, "")},
		"DedupTTL":           {check.DedupTTL(time.Millisecond)},
		"DedupLease":         {check.DedupLease(time.Millisecond), check.DedupLease(math.MaxInt64)},
		"DedupFinalCodes":    {check.DedupFinalCodes([]codes.Code{codes.Canceled}), check.DedupFinalCodes([]codes.Code{codes.Canceled, codes.DeadlineExceeded})},
		"SheddingBelow":      {check.SheddingBelow(5, 10, "Limits.Low")},
		"SheddingCode":       {check.SheddingCode("INTERNAL")},
		// Not checks, but exposed: what they say goes into the checks'.
		"IsAnswer":   {},
		"Kind":       {unary, stream},
		"OptionPath": {},
	}
}

// TestAttack23WordsEveryCheckSpeaksGo: every check internal/check
// exposes (found in its source, so that a new one cannot be left out),
// asked about a value it refuses, says it to a Go author (Validate,
// runtime.NewClient, server.NewGuard) naming no value in the options'
// names, "FreshTTL" and never "fresh_ttl"; a check that names another
// value (check.Words) says it in the options' names to an options author
// as the plugin has always said it, the two differing in the names only.
func TestAttack23WordsEveryCheckSpeaksGo(t *testing.T) {
	checks := everyCheck()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	exposed := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() {
				continue
			}
			exposed++
			if _, ok := checks[fn.Name.Name]; !ok {
				t.Errorf("check.%s is not asked here: add it to everyCheck with values it refuses", fn.Name.Name)
			}
		}
	}
	if exposed != len(checks) {
		t.Errorf("everyCheck names %d functions, internal/check exposes %d", len(checks), exposed)
	}
	words := 0
	for name, results := range checks {
		differ, isWords := false, false
		for i, r := range results {
			var goForm, optionsForm []string
			switch r := r.(type) {
			case string:
				goForm, optionsForm = []string{r}, []string{r}
			case []string:
				goForm, optionsForm = r, r
			case check.Words:
				goForm, optionsForm = []string{r.Go()}, []string{r.Options()}
				words++
				isWords, differ = true, differ || r.Go() != r.Options()
			default:
				t.Fatalf("check.%s #%d: a %T", name, i, r)
			}
			for j, msg := range goForm {
				if name != "Kind" && msg == "" {
					t.Errorf("check.%s #%d: refuses nothing", name, i)
				}
				if w := optionWordIn(msg); w != "" {
					t.Errorf("check.%s #%d says %q to a Go author, naming %q in the options' names", name, i, msg, w)
				}
				if strings.ContainsAny(msg+optionsForm[j], "{}") {
					t.Errorf("check.%s #%d: a brace left in %q / %q", name, i, msg, optionsForm[j])
				}
			}
		}
		if isWords && !differ {
			t.Errorf("check.%s: Words that read alike for both authors: a plain string", name)
		}
	}
	if words < 15 {
		t.Errorf("only %d answers in check.Words: the checks that relate two values name the other", words)
	}
}

// TestAttack23WordsRender: Words names a value between braces by its Go
// path, read as written to a Go author and in the options' names to an
// options author; a brace around anything but a path of Go names (a
// value formatted into the text: a method, a header) is kept as it is.
func TestAttack23WordsRender(t *testing.T) {
	// A value formatted in is read as written, even a name like a path.
	for _, w := range []check.Words{check.RetrySafe("Get{Timeout}", false, false), check.CacheTimeout("Get{{x}", 0, 0)} {
		for _, form := range []string{w.Go(), w.Options()} {
			if !strings.Contains(form, "Get{Timeout} is not idempotent") && !strings.Contains(form, "Get{{x} has neither") {
				t.Errorf("%q: the method's name not as written in %q", w, form)
			}
		}
	}
	for _, tc := range []struct{ w, goForm, options string }{
		{"{StaleTTL} 1ms is shorter than {FreshTTL} 1s", "StaleTTL 1ms is shorter than FreshTTL 1s", "stale_ttl 1ms is shorter than fresh_ttl 1s"},
		{"no {Retry}, or {Retry.MaxAttempts: 1}", "no Retry, or Retry.MaxAttempts 1", "no retry, or retry.max_attempts: 1"},
		{"{Breaker.CoolDown} and {Limits.Low}", "Breaker.CoolDown and Limits.Low", "circuit_breaker.cool_down and low"},
		{"{OnStoreError}'s case", "OnStoreError's case", "on_store_error's case"},
		{"Get{x} has no {Timeout}", "Get{x} has no Timeout", "Get{x} has no timeout"},
		{"Get{{Timeout} has no {Timeout}", "Get{Timeout} has no Timeout", "Get{Timeout} has no timeout"},
		{"a {b c} {", "a {b c} {", "a {b c} {"},
		{"}{Timeout}{", "}Timeout{", "}timeout{"},
		{"{}{.}{A.}", "{}{.}{A.}", "{}{.}{A.}"},
		{"", "", ""},
	} {
		w := check.Words(tc.w)
		if got := w.Go(); got != tc.goForm {
			t.Errorf("%q to a Go author: %q, want %q", tc.w, got, tc.goForm)
		}
		if got := w.Options(); got != tc.options {
			t.Errorf("%q to an options author: %q, want %q", tc.w, got, tc.options)
		}
	}
}

// TestAttack23WordsGoPoliciesSpeakGo: every problem Problems finds in a
// table of bad Go policies (each mistake the options checks refuse too,
// in goMistakes; and the Validate errors of bad server policies, which
// server.NewGuard reports) names its values as Go names the fields: no
// message a Go author gets holds an option's name in snake case, core
// included ("MaxBackoff 10ms is shorter than InitialBackoff 50ms: raise
// MaxBackoff or lower InitialBackoff").
func TestAttack23WordsGoPoliciesSpeakGo(t *testing.T) {
	seen := 0
	for name, m := range goMistakes {
		lines := goProblems(t, m)
		if len(lines) == 0 {
			t.Errorf("%s: Problems finds nothing", name)
		}
		for _, l := range lines {
			seen++
			_, msg, _ := strings.Cut(strings.SplitN(l, ": ", 2)[1], ": ")
			if w := optionWordIn(msg); w != "" {
				t.Errorf("%s: a Go author reads %q, naming %q in the options' names", name, msg, w)
			}
		}
	}
	server := func() *policy.Server {
		return &policy.Server{Name: "t.Svc",
			Shedding: &policy.Shedding{Limits: policy.Limits{Low: 30, Normal: 60, High: 90, Critical: 120}},
			Methods: []policy.ServerMethod{{Name: "/t.Svc/Get", Kind: policy.KindUnary, MinDeadline: time.Millisecond, DefaultTimeout: time.Second,
				Dedup: &policy.Dedup{TTL: time.Hour}, NewResponse: func() proto.Message { return new(emptypb.Empty) }}}}
	}
	if err := server().Validate(); err != nil {
		t.Fatalf("the valid server policy is refused: %v", err)
	}
	for name, edit := range map[string]func(p *policy.Server){
		"shedding out of order":       func(p *policy.Server) { p.Shedding.Limits.Normal = 20 },
		"shedding limit 0":            func(p *policy.Server) { p.Shedding.Limits.High = -1 },
		"shedding code":               func(p *policy.Server) { p.Shedding.Code = codes.Internal },
		"pushback negative":           func(p *policy.Server) { p.Shedding.Pushback = -1 },
		"dedup ttl":                   func(p *policy.Server) { p.Methods[0].Dedup.TTL = time.Millisecond },
		"dedup lease short":           func(p *policy.Server) { p.Methods[0].Dedup.Lease = time.Millisecond },
		"dedup lease of centuries":    func(p *policy.Server) { p.Methods[0].Dedup.Lease = math.MaxInt64 },
		"dedup final codes":           func(p *policy.Server) { p.Methods[0].Dedup.FinalCodes = policy.CodesOf(codes.OK, codes.Canceled) },
		"dedup header":                func(p *policy.Server) { p.Methods[0].Dedup.Header = "Bad_Header{x}" },
		"default timeout below floor": func(p *policy.Server) { p.Methods[0].MinDeadline = 2 * time.Second },
		"min deadline negative":       func(p *policy.Server) { p.Methods[0].MinDeadline = -1 },
	} {
		p := server()
		edit(p)
		err := p.Validate()
		if err == nil {
			t.Errorf("%s: Validate refuses nothing", name)
			continue
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			seen++
			// "resilient/server: t.Svc: <field>: <message>"
			parts := strings.SplitN(line, ": ", 4)
			if len(parts) != 4 {
				t.Errorf("%s: %q is no line of Validate", name, line)
				continue
			}
			if w := optionWordIn(parts[3]); w != "" {
				t.Errorf("%s: a Go author reads %q, naming %q in the options' names", name, parts[3], w)
			}
			if strings.Contains(parts[3], "{") != (name == "dedup header") {
				t.Errorf("%s: %q: a brace of the template left, or the header's dropped", name, parts[3])
			}
		}
	}
	if seen < len(goMistakes)+11 {
		t.Errorf("only %d messages seen", seen)
	}
}
