// Package scenario runs burrow's simulated experiments: the EdgeVPN
// paper's E3–E9 and the cost of keeping an overlay, each on package sim.
// A scenario builds overlays, measures, checks the invariants (returned as
// errors), and returns tables, notes and figures that Write saves as CSV,
// JSON and SVG.
package scenario

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"burrow/overlay"
	"burrow/sim"
	"burrow/sim/plot"
)

// Options configure scenario runs.
type Options struct {
	Seed uint64
	// Sizes replaces the overlay sizes of every scenario: the sweeps of
	// e7, cost, formation and revocation, and the seed paper's size of e3,
	// e4, e5, e6, e8 and e9.
	Sizes []int
	// Large adds a large overlay to the sweeps: 10,000 nodes to those of
	// e7, cost, formation and revocation, 1,000 to e8, whose flows and
	// churn cost more per node.
	Large bool
	// Progress receives the engine's progress during long runs, Log the
	// stages; either may be nil.
	Progress func(scenario string, n int, p sim.Progress)
	Log      func(format string, args ...any)
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log(format, args...)
	}
}

// sizes returns the sweep: the explicit sizes, or the defaults plus
// 10,000 with Large.
func (o Options) sizes(defaults ...int) []int { return o.sizesWith(10000, defaults...) }

// sizesWith returns the overlay sizes to run: the explicit sizes, or the
// defaults plus large with Large (nothing when large is 0).
func (o Options) sizesWith(large int, defaults ...int) []int {
	if len(o.Sizes) > 0 {
		return o.Sizes
	}
	if o.Large && large > 0 {
		return append(defaults, large)
	}
	return defaults
}

// sized is one size a scenario runs at whose default is the seed paper's
// size. Its labels name n only when it is not the paper's, so that a run
// at the paper's size reads as it always has, and the rows of several
// sizes in one table tell themselves apart.
type sized struct{ n, paper int }

// paperSized returns the sizes of a scenario whose default is the seed
// paper's size; Large adds none.
func (o Options) paperSized(paper int) []sized {
	var out []sized
	for _, n := range o.sizesWith(0, paper) {
		out = append(out, sized{n, paper})
	}
	return out
}

// label prefixes a row's label, a note or a data key with n when n is
// not the paper's size.
func (z sized) label(s string) string {
	if z.n == z.paper {
		return s
	}
	return fmt.Sprintf("n=%d: %s", z.n, s)
}

// sizesText lists the sizes for a scenario's title: "64" or "64,1000".
func sizesText(sizes []sized) string {
	var parts []string
	for _, z := range sizes {
		parts = append(parts, fmt.Sprint(z.n))
	}
	return strings.Join(parts, ",")
}

// Table is one table of results.
type Table struct {
	Name    string     `json:"name"`
	Title   string     `json:"title"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
}

// Add appends a row, formatting each value.
func (t *Table) Add(values ...any) {
	row := make([]string, len(values))
	for i, v := range values {
		row[i] = format(v)
	}
	t.Rows = append(t.Rows, row)
}

func format(v any) string {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) {
			return "-"
		}
		return fmt.Sprintf("%.2f", x)
	case time.Duration:
		return x.Round(time.Millisecond).String()
	}
	return fmt.Sprint(v)
}

// Figure is a chart saved as <scenario>-<name>.svg.
type Figure struct {
	Name  string
	Chart plot.Chart
}

// Result is what a scenario measured.
type Result struct {
	Scenario string   `json:"scenario"`
	Title    string   `json:"title"`
	Seed     uint64   `json:"seed"`
	Tables   []*Table `json:"tables"`
	Notes    []string `json:"notes,omitempty"`
	// Failures are the invariants that did not hold.
	Failures []string `json:"failures,omitempty"`
	// Data holds the measurements behind the tables.
	Data    map[string]any `json:"data,omitempty"`
	Figures []Figure       `json:"-"`
}

func newResult(name, title string, o Options) *Result {
	return &Result{Scenario: name, Title: title, Seed: o.Seed, Data: map[string]any{}}
}

func (r *Result) table(name, title string, columns ...string) *Table {
	t := &Table{Name: name, Title: title, Columns: columns}
	r.Tables = append(r.Tables, t)
	return t
}

func (r *Result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// sizedNote adds a note about one size of a scenario.
func (r *Result) sizedNote(z sized, format string, args ...any) {
	r.Notes = append(r.Notes, z.label(fmt.Sprintf(format, args...)))
}

// check records a failed invariant.
func (r *Result) check(what string, err error) {
	if err != nil {
		r.Failures = append(r.Failures, what+": "+err.Error())
	}
}

// Err is the failed invariants as one error, nil if all held.
func (r *Result) Err() error {
	if len(r.Failures) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %d invariant failures: %s", r.Scenario, len(r.Failures), strings.Join(r.Failures, "; "))
}

// Text renders the tables and notes for a terminal.
func (r *Result) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "== %s: %s (seed %d)\n", r.Scenario, r.Title, r.Seed)
	for _, t := range r.Tables {
		fmt.Fprintf(&b, "\n%s\n", t.Title)
		widths := make([]int, len(t.Columns))
		for i, c := range t.Columns {
			widths[i] = len(c)
		}
		for _, row := range t.Rows {
			for i, v := range row {
				widths[i] = max(widths[i], len(v))
			}
		}
		line := func(cells []string) {
			for i, v := range cells {
				switch {
				case i == len(cells)-1:
					b.WriteString("  " + v)
				case i > 0:
					fmt.Fprintf(&b, "  %-*s", widths[i], v)
				default:
					fmt.Fprintf(&b, "%-*s", widths[i], v)
				}
			}
			b.WriteString("\n")
		}
		line(t.Columns)
		for _, row := range t.Rows {
			line(row)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\n- %s", n)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "\nFAILED %s\n", f)
	}
	return b.String()
}

// Write saves the result in dir: <scenario>.json, a CSV per table and an
// SVG per figure.
func (r *Result) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	errs := []error{os.WriteFile(filepath.Join(dir, r.Scenario+".json"), append(j, '\n'), 0o644)}
	for _, t := range r.Tables {
		var b strings.Builder
		w := csv.NewWriter(&b)
		w.Write(t.Columns)
		w.WriteAll(t.Rows)
		errs = append(errs, w.Error(), os.WriteFile(filepath.Join(dir, r.Scenario+"-"+t.Name+".csv"), []byte(b.String()), 0o644))
	}
	for _, f := range r.Figures {
		errs = append(errs, os.WriteFile(filepath.Join(dir, r.Scenario+"-"+f.Name+".svg"), f.Chart.SVG(), 0o644))
	}
	return errors.Join(errs...)
}

// Scenario is one experiment.
type Scenario struct {
	Name, Title string
	// Large scenarios take minutes; they run only when asked for by name.
	Run func(Options) (*Result, error)
}

// All lists the scenarios in the order they run.
func All() []Scenario {
	return []Scenario{
		{"e3", "E3: connectivity when the successor fails, s=1", runE3},
		{"e4", "E4: resilience to one and two adjacent failures, s=2", runE4},
		{"e5", "E5: stability with mixed per-node settings", runE5},
		{"e6", "E6: Bounded Flood with and without on-demand links", runE6},
		{"e7", "E7: path length vs network size", runE7},
		{"e8", "E8: flows through churn", runE8},
		{"e9", "E9: Bounded Flood vs a spanning tree", runE9},
		{"cost", "Cost: idle traffic, join messages and state vs network size", runCost},
		{"formation", "Cold start: every node at once, one bootstrap contact", runFormation},
		{"revocation", "A revocation handed to one member spreads to all", runRevocation},
	}
}

// Lookup finds a scenario by name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range All() {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// spec describes an overlay to build.
type spec struct {
	n int
	// node returns node i's settings (bootstrap is filled in).
	node            func(i int) sim.NodeConfig
	latency, jitter time.Duration
	// coldStart starts all nodes at once with their ring neighbours as
	// contacts instead of growing the overlay one join at a time.
	coldStart bool
	// boot is how many of the nodes start, the first ones; the others are
	// added for the scenario to start later. Zero starts all.
	boot int
}

// uniform is spec's node function for the same settings everywhere.
func uniform(s, k int, auto bool) func(int) sim.NodeConfig {
	return func(int) sim.NodeConfig {
		return sim.NodeConfig{Params: overlay.Params{Successors: s, LongDistance: k, Auto: auto}}
	}
}

// joinEvery spaces the joins of overlays that grow one node at a time:
// one every 100 ms. Joins much faster run into each other and flood the
// overlay with LinkUse messages (see docs/simulation.md): at 100 joins a
// second, 600 nodes sent 116,000 of them in six seconds.
const joinEvery = 100 * time.Millisecond

// coldStartOver is how long a cold start takes to start every node.
const coldStartOver = 2 * time.Second

// staggeredUpTo is the largest overlay grown one join at a time; larger
// ones are cold-started (beyond coldStartUpTo, only their first
// coldStartUpTo nodes). 10,000 joins 100 ms apart are 16 min 40 s of
// virtual time before a scenario begins, which took 25 minutes of wall
// time; a cold start of as many nodes settles in about four minutes.
const staggeredUpTo = 2000

// coldStartUpTo is the largest overlay cold-started whole. In a cold
// start no node has long links yet, so the first long-distance requests
// cross the ring one successor at a time, up to 64 nodes each, and the
// more nodes, the more requests: 100,000 cold-started nodes passed 42
// million events by 7 s of virtual time and never converged
// (docs/simulation.md). Larger overlays cold-start this many, settle, and
// grow the rest growJoins a second, each joining through a random member
// as a node added to a working network would, over long links.
const coldStartUpTo = 10000

// growJoins is how many nodes a second join an overlay beyond
// coldStartUpTo once its cold-started core has settled.
const growJoins = 1000

// coldStarts tells whether an overlay whose first n nodes start together
// is cold-started, whole or up to coldStartUpTo: when its scenario asks,
// or when it is too large to grow one join at a time.
func coldStarts(asked bool, n int) bool { return asked || n > staggeredUpTo }

// Convergence: overlay changes must stay quiet for convergeStable, within
// five minutes — three for overlays beyond 2,000 nodes, where a virtual
// second costs seconds and a few long-distance links are still being
// retried when the ring has long been consistent.
const convergeStable = 10 * time.Second

func convergeLimit(n int) time.Duration {
	if n > 2000 {
		return 3 * time.Minute
	}
	return 5 * time.Minute
}

// build starts an overlay and runs it until it converges. The nodes start
// one after the other, each joining through a random node already on the
// ring, or all at once with a cold start, as every overlay beyond
// staggeredUpTo nodes does. An inconsistent ring at the limit is recorded
// on r as a failure; a consistent ring whose long-distance links are
// still being filled in is noted, and the scenario measures the overlay
// as it is.
func build(o Options, r *Result, name string, sp spec) *sim.Sim {
	s := sim.New(sim.Config{Seed: o.Seed, Latency: sp.latency, Jitter: sp.jitter, Progress: progressOf(o, name, sp.n), ProgressEvery: 1 << 16})
	nodes := make([]*sim.Node, sp.n)
	for i := range nodes {
		nodes[i] = s.AddNode(sp.node(i))
	}
	if sp.boot > 0 {
		nodes = nodes[:sp.boot]
	}
	cold := coldStarts(sp.coldStart, len(nodes))
	switch {
	case cold && len(nodes) > coldStartUpTo:
		coldStartAndGrow(o, r, name, s, nodes, coldStartUpTo)
	case cold:
		s.ColdStart(nodes, coldStartOver)
		s.RunFor(coldStartOver)
		if !sp.coldStart {
			r.note("%s n=%d: cold-started (every node within %v, its ring neighbour as contact), not grown one join every %v as overlays of up to %d nodes are", name, len(nodes), coldStartOver, joinEvery, staggeredUpTo)
		}
	default:
		s.StartStaggered(nodes, joinEvery, 1)
		s.RunFor(time.Duration(len(nodes)) * joinEvery)
	}
	startup := s.Elapsed()
	took, err := s.Converge(convergeLimit(len(nodes)), convergeStable)
	if err != nil && s.CheckRing(nil) == nil {
		r.note("%s n=%d: ring consistent but not settled after %v: %v", name, len(nodes), took, err)
	} else {
		r.check(fmt.Sprintf("%s n=%d convergence", name, len(nodes)), err)
	}
	have, want := s.LongDistance()
	o.logf("%s n=%d: all started after %v, converged %v later, %d of %d long-distance links (%d events)", name, len(nodes), startup, took, have, want, s.Events())
	return s
}

// coldStartAndGrow cold-starts the first cold of nodes, runs them until
// they converge, and then starts the others growJoins a second, each
// joining through a random member.
func coldStartAndGrow(o Options, r *Result, name string, s *sim.Sim, nodes []*sim.Node, cold int) {
	s.ColdStart(nodes[:cold], coldStartOver)
	s.RunFor(coldStartOver)
	took, err := s.Converge(convergeLimit(cold), convergeStable)
	r.check(fmt.Sprintf("%s n=%d convergence of the first %d nodes", name, len(nodes), cold), err)
	grown := nodes[cold:]
	o.logf("%s n=%d: the first %d nodes cold-started and converged %v later; the other %d join, %d a second", name, len(nodes), cold, took, len(grown), growJoins)
	r.note("%s n=%d: the first %d nodes cold-started (every node within %v, its ring neighbour as contact) and converged after %v; the other %d then joined, %d a second, each through a random member", name, len(nodes), cold, coldStartOver, took, len(grown), growJoins)
	s.StartStaggered(grown, time.Second/growJoins, 1)
	s.RunFor(time.Duration(len(grown)) * time.Second / growJoins)
}

// progressOf passes a run's progress on to o.Progress, if set.
func progressOf(o Options, name string, n int) func(sim.Progress) {
	if o.Progress == nil {
		return nil
	}
	return func(p sim.Progress) { o.Progress(name, n, p) }
}

// invariants checks the invariants on s and records failures on r.
func invariants(r *Result, what string, s *sim.Sim) sim.Invariants {
	inv, err := s.CheckInvariants()
	r.check(what+" invariants", err)
	r.note("%s: frames and messages the cores dropped, by reason: %v", what, s.Drops())
	return inv
}

// mean, and the maximum of a set of values.
func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

func maxOf[T cmp.Ordered](v []T) T {
	var m T
	if len(v) > 0 {
		m = slices.Max(v)
	}
	return m
}

// percentile returns the p-th percentile (0–100) by nearest rank.
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(v))
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// meanDeviation is the mean absolute deviation from the mean, the spread
// the paper reports for E6.
func meanDeviation(v []float64) float64 {
	m := mean(v)
	d := make([]float64, len(v))
	for i, x := range v {
		d[i] = math.Abs(x - m)
	}
	return mean(d)
}
