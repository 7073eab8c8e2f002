package runtime_test

// The README's metrics table (Observability, "Metrics") against the
// families the runtime registers: every family a client can register is a
// row, with its type and labels in order, and no row names a family the
// runtime never registers; the HELP and TYPE lines of
// docs/metrics-scrape.txt are those the code registers today.

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack24nFamily is one metric family as registered or documented.
type attack24nFamily struct {
	typ    string
	labels []string
	help   string
}

// attack24nRecorder is a Registerer that records what it is given.
type attack24nRecorder struct {
	mu         sync.Mutex
	collectors []prometheus.Collector
	inner      prometheus.Registerer
}

func (r *attack24nRecorder) Register(c prometheus.Collector) error {
	r.mu.Lock()
	r.collectors = append(r.collectors, c)
	r.mu.Unlock()
	return r.inner.Register(c)
}

func (r *attack24nRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *attack24nRecorder) Unregister(c prometheus.Collector) bool { return r.inner.Unregister(c) }

var attack24nDesc = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", help: "((?:[^"\\]|\\.)*)",(?: unit: "[^"]*",)? constLabels: \{[^}]*\}, variableLabels: \{([^}]*)\}\}$`)

// attack24nRegistered builds a client with every layer that registers a
// family (the adaptive limit and the throttler register theirs only when
// the policy has them) and returns the families it registered.
func attack24nRegistered(t *testing.T) map[string]attack24nFamily {
	t.Helper()
	rec := &attack24nRecorder{inner: prometheus.NewRegistry()}
	_, cc := startFault(t, nil)
	atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithRegisterer(rec)}},
		func(p *policy.Service) {
			p.AdaptiveLimit = &policy.AdaptiveLimit{}
			p.ClientThrottle = &policy.Throttle{}
		})
	got := map[string]attack24nFamily{}
	for _, c := range rec.collectors {
		var typ string
		switch c.(type) {
		case *prometheus.CounterVec:
			typ = "counter"
		case *prometheus.GaugeVec:
			typ = "gauge"
		case *prometheus.HistogramVec:
			typ = "histogram"
		default:
			t.Fatalf("registered a %T: teach this test its type", c)
		}
		ch := make(chan *prometheus.Desc, 4)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := attack24nDesc.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read %s", d)
			}
			var labels []string
			for _, l := range strings.Split(m[3], ",") {
				if l = strings.TrimSpace(l); l != "" {
					labels = append(labels, l)
				}
			}
			if _, dup := got[m[1]]; dup {
				t.Errorf("%s registered twice by one client", m[1])
			}
			got[m[1]] = attack24nFamily{typ: typ, labels: labels, help: strings.ReplaceAll(m[2], `\"`, `"`)}
		}
	}
	return got
}

// TestAttack24nREADMEMetricsTableIsWhatIsRegistered: every family
// registered is a row of the README's table with the same type and labels,
// and every row is registered.
func TestAttack24nREADMEMetricsTableIsWhatIsRegistered(t *testing.T) {
	atkNoLeak(t)
	got := attack24nRegistered(t)
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(resilient_[a-z_]+)` \\| ([a-z]+) \\| ([a-z, ]+) \\| (.+) \\|$")
	rows := map[string]attack24nFamily{}
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		var labels []string
		for _, l := range strings.Split(m[3], ",") {
			labels = append(labels, strings.TrimSpace(l))
		}
		rows[m[1]] = attack24nFamily{typ: m[2], labels: labels}
	}
	if len(rows) == 0 {
		t.Fatal("README: no metrics table found (rows | `resilient_…` | type | labels | what |)")
	}
	for name, f := range got {
		r, ok := rows[name]
		switch {
		case !ok:
			t.Errorf("%s (%s; %s) is registered but the README's metrics table has no row for it", name, f.typ, strings.Join(f.labels, ", "))
		case r.typ != f.typ:
			t.Errorf("%s: README says %s, registered as %s", name, r.typ, f.typ)
		case !slices.Equal(r.labels, f.labels):
			t.Errorf("%s: README's labels %v, registered with %v", name, r.labels, f.labels)
		}
		if f.help == "" {
			t.Errorf("%s has no help text", name)
		}
	}
	for name := range rows {
		if _, ok := got[name]; !ok {
			t.Errorf("README's metrics table has %s, which no client registers", name)
		}
	}
}

// TestAttack24nScrapeFileHelpIsTheCodes: the HELP and TYPE lines of
// docs/metrics-scrape.txt, which the README quotes, are those the code
// registers, and each series there is of a registered family with its
// labels.
func TestAttack24nScrapeFileHelpIsTheCodes(t *testing.T) {
	atkNoLeak(t)
	got := attack24nRegistered(t)
	b, err := os.ReadFile("../docs/metrics-scrape.txt")
	if err != nil {
		t.Fatal(err)
	}
	series := regexp.MustCompile(`^([a-z_]+)\{([^}]*)\} `)
	for i, line := range strings.Split(string(b), "\n") {
		where := "docs/metrics-scrape.txt:" + strconv.Itoa(i+1)
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name, help, _ := strings.Cut(strings.TrimPrefix(line, "# HELP "), " ")
			if f, ok := got[name]; !ok {
				t.Errorf("%s: HELP of %s, which no client registers", where, name)
			} else if help != f.help {
				t.Errorf("%s: HELP of %s is\n\t%q\nthe code registers\n\t%q\n(regenerate: go run ./example/cmd/cascade -scrape docs/metrics-scrape.txt)", where, name, help, f.help)
			}
		case strings.HasPrefix(line, "# TYPE "):
			name, typ, _ := strings.Cut(strings.TrimPrefix(line, "# TYPE "), " ")
			if f, ok := got[name]; ok && typ != f.typ {
				t.Errorf("%s: TYPE of %s is %s, registered as %s", where, name, typ, f.typ)
			}
		case strings.HasPrefix(line, "resilient_"):
			m := series.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("%s: cannot read %q", where, line)
				continue
			}
			name := m[1]
			f, ok := got[name]
			if !ok {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if base, cut := strings.CutSuffix(name, suffix); cut {
						if f, ok = got[base]; ok {
							break
						}
					}
				}
			}
			if !ok {
				t.Errorf("%s: series of %s, which no client registers", where, name)
				continue
			}
			var labels []string
			for _, kv := range strings.Split(m[2], ",") {
				if k, _, _ := strings.Cut(kv, "="); k != "le" {
					labels = append(labels, k)
				}
			}
			// The exposition sorts a series' labels by name.
			want := slices.Sorted(slices.Values(f.labels))
			if slices.Sort(labels); !slices.Equal(labels, want) {
				t.Errorf("%s: %s has labels %v, registered with %v", where, name, labels, want)
			}
		}
	}
}
