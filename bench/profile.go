package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// `burrow up` serves no pprof endpoint, and the daemon's data path must not
// grow one for a benchmark, so --profile samples the running daemons from
// outside with perf: the cpu-clock software event, which needs no
// hardware counters (virtual machines often have none), with call graphs
// from Go's frame pointers.
const (
	// perfFrequency is the sampling rate per thread: below 1 kHz keeps
	// perf's own cost in the daemons small.
	perfFrequency = 999
	// perfAttach is how long perf gets to attach before the stream starts.
	perfAttach = 300 * time.Millisecond
	// perfStopTimeout bounds perf writing its data once interrupted.
	perfStopTimeout = time.Minute
	// profileTop is how many functions the report lists per daemon,
	// profileAreas how many areas; the inclusive list stops at
	// profileInclusiveTop functions or below profileInclusiveMin %.
	profileTop          = 15
	profileAreas        = 10
	profileInclusiveTop = 20
	profileInclusiveMin = 5.0
)

// ProfileResult is where the burrow daemons' CPU time went during one
// single-stream iperf3 test.
type ProfileResult struct {
	// Dir holds the recordings and the full reports.
	Dir string
	// Round is the round of the test; Seconds its length.
	Round, Seconds int
	// Stream is what the stream carried while profiled.
	Stream throughput
	// Sides are the sender's profile and the receiver's.
	Sides []*profileSide
	// Failed says why there is no profile.
	Failed string
}

// profileSide is the profile of one daemon.
type profileSide struct {
	// Role is "sender" or "receiver", Label the daemon's host.
	Role, Label string
	// Data is the perf recording, Report the full text report with call
	// graphs.
	Data, Report string
	// Samples is how many samples were taken in the daemon's threads.
	Samples int
	// Entries are the functions, most samples first.
	Entries []profileEntry
	// Inclusive are the functions by the share of samples taken in them
	// or in what they called, largest first.
	Inclusive []inclusiveEntry
}

// inclusiveEntry is the share of one function and everything it called
// (Children), beside its own (Self).
type inclusiveEntry struct {
	Children, Self float64
	Kernel         bool
	Symbol         string
}

// profileEntry is the share of one function in a profile, counting only
// samples taken in the function itself (flat).
type profileEntry struct {
	Percent float64
	Samples int
	// Kernel marks a function of the kernel, as perf's [k].
	Kernel bool
	Symbol string
}

// profileArea is the flat share of a Go package, or of the kernel.
type profileArea struct {
	Area    string
	Percent float64
}

// perfAvailable says whether perf can sample here, before minutes of
// measuring rather than after.
func perfAvailable() error {
	if _, err := exec.LookPath("perf"); err != nil {
		return errors.New("bench: --profile needs perf (Debian package linux-perf)")
	}
	if out, err := exec.Command("perf", "stat", "-e", "cpu-clock", "true").CombinedOutput(); err != nil {
		return fmt.Errorf("bench: --profile: perf cannot count cpu-clock here: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// perfRecording is a perf record process attached to one daemon.
type perfRecording struct {
	side *profileSide
	cmd  *exec.Cmd
	log  *os.File
	done chan error
}

// startPerf attaches perf record to the process. perf runs in the
// caller's namespace: it follows the process by PID wherever it is.
func startPerf(side *profileSide, pid int) (*perfRecording, error) {
	log, err := os.Create(strings.TrimSuffix(side.Data, ".data") + ".log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("perf", "record", "-e", "cpu-clock", "-F", strconv.Itoa(perfFrequency), "-g",
		"--no-buildid-cache", "-p", strconv.Itoa(pid), "-o", side.Data)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group keeps a terminal's Ctrl-C away: the run stops
	// it in order. The kernel kills it if the run dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("perf record: %w", err)
	}
	rec := &perfRecording{side: side, cmd: cmd, log: log, done: make(chan error, 1)}
	go func() { rec.done <- cmd.Wait() }()
	return rec, nil
}

// stop interrupts perf, which then writes its data, and waits for it;
// perf that does not finish in time is killed. Safe to call twice.
func (rec *perfRecording) stop() error {
	if rec.done == nil {
		return nil
	}
	defer func() { rec.done = nil; rec.log.Close() }()
	_ = rec.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-rec.done:
		// perf ends an interrupted recording with status 0, or as
		// killed by the signal it caught.
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signaled() {
			return nil
		}
		return err
	case <-time.After(perfStopTimeout):
		_ = rec.cmd.Process.Kill()
		<-rec.done
		return fmt.Errorf("perf record for %s did not finish within %v", rec.side.Label, perfStopTimeout)
	}
}

// profileBurrow runs one more single-stream iperf3 test through the
// burrow tunnel while perf samples both daemons, and reads where their
// time went.
func (b *bencher) profileBurrow(ctx context.Context, t *tunnel, round int) *ProfileResult {
	res := &ProfileResult{Dir: b.opts.ProfileDir, Round: round, Seconds: b.opts.Seconds}
	fmt.Fprintf(b.progress, "   profiling both daemons with perf during another %d s single stream\n", b.opts.Seconds)
	if err := b.recordProfile(ctx, t, res); err != nil {
		res.Failed = err.Error()
		fmt.Fprintf(b.progress, "   profile failed: %s\n", res.Failed)
	}
	return res
}

// recordProfile attaches perf to each daemon of the tunnel, runs the stream
// and reads the recordings into res.
func (b *bencher) recordProfile(ctx context.Context, t *tunnel, res *ProfileResult) (err error) {
	var recs []*perfRecording
	defer func() {
		for _, rec := range recs {
			err = errors.Join(err, rec.stop())
		}
	}()
	for i, p := range t.processes {
		role := [...]string{"sender", "receiver"}[min(i, 1)]
		side := &profileSide{Role: role, Label: p.label}
		base := filepath.Join(res.Dir, fmt.Sprintf("burrow-%s-%s", role, p.label))
		side.Data, side.Report = base+".perf.data", base+".perf.txt"
		rec, err := startPerf(side, p.Pid())
		if err != nil {
			return err
		}
		recs = append(recs, rec)
		res.Sides = append(res.Sides, side)
	}
	if err := sleep(ctx, perfAttach); err != nil {
		return err
	}
	tp, err := runIperf3(ctx, b.a, t.target, b.opts.Seconds, 1)
	if err != nil {
		return fmt.Errorf("iperf3: %w", err)
	}
	res.Stream = tp
	for _, rec := range recs {
		if err := rec.stop(); err != nil {
			return err
		}
	}
	for _, side := range res.Sides {
		if err := side.read(ctx); err != nil {
			return err
		}
		fmt.Fprintf(b.progress, "   %s (%s): %d samples, top: %s\n", side.Role, side.Label, side.Samples, side.topLine(3))
	}
	return nil
}

// read makes perf report the recording: flat shares by function for the
// report, and the full report with call graphs for people to dig into.
func (side *profileSide) read(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "perf", "report", "-i", side.Data, "--stdio", "--no-children",
		"--sort", "sym", "-g", "none", "-F", "overhead,sample,sym").Output()
	if err != nil {
		return fmt.Errorf("perf report %s: %w", side.Data, err)
	}
	side.Entries = parsePerfReport(string(out))
	for _, e := range side.Entries {
		side.Samples += e.Samples
	}
	out, err = exec.CommandContext(ctx, "perf", "report", "-i", side.Data, "--stdio", "--children",
		"--sort", "sym", "-g", "none").Output()
	if err != nil {
		return fmt.Errorf("perf report %s: %w", side.Data, err)
	}
	side.Inclusive = parseInclusiveReport(string(out))
	full, err := exec.CommandContext(ctx, "perf", "report", "-i", side.Data, "--stdio", "--no-children",
		"--percent-limit", "0.5").Output()
	if err != nil {
		return fmt.Errorf("perf report %s: %w", side.Data, err)
	}
	return os.WriteFile(side.Report, full, 0o644)
}

// perfLine is one function of a perf report: two figures, the kind of
// code and the function. Flat reports (-F overhead,sample,sym) give the
// share and the samples: "    97.59%           851  [.] crypto/sha256.block";
// reports with --children the inclusive and the flat share:
// "    33.50%     0.04%  [.] burrow/runtime/udpio.(*Conn).WriteBatch".
var perfLine = regexp.MustCompile(`^\s*([0-9.]+)%\s+([0-9.]+)%?\s+\[(.)\]\s+(.*?)\s*$`)

// perfRow is one function of a perf report.
type perfRow struct {
	first, second float64
	kernel        bool
	symbol        string
}

// parsePerfRows reads the functions of a perf report, in its order.
func parsePerfRows(out string) []perfRow {
	var rows []perfRow
	for line := range strings.Lines(out) {
		m := perfLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		first, err1 := strconv.ParseFloat(m[1], 64)
		second, err2 := strconv.ParseFloat(m[2], 64)
		if err1 == nil && err2 == nil {
			rows = append(rows, perfRow{first: first, second: second, kernel: m[3] == "k", symbol: m[4]})
		}
	}
	return rows
}

// parsePerfReport reads the functions of a flat perf report, most samples
// first.
func parsePerfReport(out string) []profileEntry {
	var entries []profileEntry
	for _, row := range parsePerfRows(out) {
		entries = append(entries, profileEntry{Percent: row.first, Samples: int(row.second), Kernel: row.kernel, Symbol: row.symbol})
	}
	slices.SortStableFunc(entries, func(x, y profileEntry) int {
		return cmp.Or(cmp.Compare(y.Samples, x.Samples), cmp.Compare(x.Symbol, y.Symbol))
	})
	return entries
}

// parseInclusiveReport reads the functions of a perf report with
// children, largest inclusive share first.
func parseInclusiveReport(out string) []inclusiveEntry {
	var entries []inclusiveEntry
	for _, row := range parsePerfRows(out) {
		entries = append(entries, inclusiveEntry{Children: row.first, Self: row.second, Kernel: row.kernel, Symbol: row.symbol})
	}
	slices.SortStableFunc(entries, func(x, y inclusiveEntry) int {
		return cmp.Or(cmp.Compare(y.Children, x.Children), cmp.Compare(x.Symbol, y.Symbol))
	})
	return entries
}

// topLine names the first n functions with their shares, for progress.
func (side *profileSide) topLine(n int) string {
	var parts []string
	for _, e := range side.Entries[:min(n, len(side.Entries))] {
		parts = append(parts, fmt.Sprintf("%.1f %% %s", e.Percent, e.Symbol))
	}
	return strings.Join(parts, ", ")
}

// areas sums the flat shares by Go package, the kernel as one, largest
// first.
func areas(entries []profileEntry) []profileArea {
	byArea := map[string]float64{}
	for _, e := range entries {
		area := "kernel"
		if !e.Kernel {
			area = goPackage(e.Symbol)
		}
		byArea[area] += e.Percent
	}
	var out []profileArea
	for area, percent := range byArea {
		out = append(out, profileArea{Area: area, Percent: percent})
	}
	slices.SortFunc(out, func(x, y profileArea) int {
		return cmp.Or(cmp.Compare(y.Percent, x.Percent), cmp.Compare(x.Area, y.Area))
	})
	return out
}

// goPackage is the package of a Go function as perf names it:
// "burrow/runtime/udpio.(*Conn).ReadBatch" is in burrow/runtime/udpio,
// "runtime.memmove" in runtime. The package ends at the first dot after
// the last slash, looking for slashes only before any receiver or type
// arguments, which hold package paths of their own. A symbol without a
// dot (an address perf could not name) is its own area.
func goPackage(symbol string) string {
	head := symbol
	if i := strings.IndexAny(symbol, "(["); i >= 0 {
		head = symbol[:i]
	}
	start := strings.LastIndex(head, "/") + 1
	dot := strings.Index(symbol[start:], ".")
	if dot <= 0 || strings.HasPrefix(symbol, "0x") {
		return "unnamed"
	}
	return symbol[:start+dot]
}
