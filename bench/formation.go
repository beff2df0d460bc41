package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"burrow/netlab"
	"burrow/netlab/cluster"
)

// FormationOptions configures `burrow bench formation`.
type FormationOptions struct {
	// Sizes are the numbers of daemons, each started on a fresh lab in
	// turn.
	Sizes []int
	// Limit bounds the ring's formation, and each reconvergence after
	// churn.
	Limit time.Duration
	// Sample is the most TAPs the broadcast check watches.
	Sample int
	// Quiet is how long the formed network idles while its daemons' CPU
	// time is measured.
	Quiet time.Duration
	// Churn kills and restarts a tenth of the daemons once the ring is
	// formed.
	Churn bool
	// Soak, when not zero, keeps killing and restarting those daemons,
	// one every SoakEvery, for this long.
	Soak, SoakEvery time.Duration
	// Burrow is the burrow executable to measure.
	Burrow string
	// Progress receives the run's steps, and a line a second while a ring
	// forms.
	Progress io.Writer
}

// FormationReport is the outcome of a formation run.
type FormationReport struct {
	Started time.Time
	Options FormationOptions
	Results []*FormationResult
	// LoadBefore and LoadAfter are the one-minute load averages.
	LoadBefore, LoadAfter string
}

// FormationResult is one size's run.
type FormationResult struct {
	Nodes int
	// Skipped says why the size did not run (it does not fit here);
	// Failed what went wrong once it did. The parts measured before a
	// failure are kept.
	Skipped, Failed string
	// StartedWithin is the time from starting the first daemon to having
	// started the last.
	StartedWithin time.Duration
	Formation     *convergence
	// Phases is each daemon's own account of its join, read once it idled.
	Phases *joinPhases
	Idle   *idleResult
	// MemoryUsed is how far the machine's available memory fell from
	// before the lab was built to the end of the quiet window: daemons,
	// namespaces, links and TAPs, and whatever else the machine's other
	// programs took or gave back meanwhile.
	MemoryUsed uint64
	// Broadcast counts the copies of the broadcast check's requests; nil
	// when the check failed.
	Broadcast *cluster.BroadcastCount
	// BroadcastDrops is what each node dropped while the requests spread.
	BroadcastDrops cluster.DropCounts
	Churn          *churnRound
	Soak           *soakResult
}

// Settings of a formation run.
const (
	// snapshotEvery is the shortest time between two readings of every
	// daemon's status; a reading of hundreds takes longer than this on a
	// busy machine, and the next starts right after.
	snapshotEvery = 500 * time.Millisecond
	// progressEvery is how often a forming ring's counts are printed.
	progressEvery = time.Second
	// broadcastRequests is how many ARP requests the sender broadcasts.
	broadcastRequests = 3
	// memoryPerDaemon is what one daemon is budgeted for before a size
	// runs: its RSS (about 20 MiB) with room for its peak, its namespace,
	// veth pair and TAP, and a tcpdump.
	memoryPerDaemon = 48 << 20
	// filesPerDaemon is the file descriptors this program holds for one
	// daemon at the worst moment: its log, a tcpdump's log, status
	// connections. The daemons themselves inherit the raised limit.
	filesPerDaemon = 8
)

// formationSubnet holds the nodes' virtual addresses; absentAddress is
// one of them that no node has, the target of the broadcast check.
var (
	formationSubnet = netip.MustParsePrefix("10.80.0.0/16")
	absentAddress   = netip.MustParseAddr("10.80.255.254")
)

// RunFormation starts each size of network in turn and measures how its
// ring forms, what the formed network costs at rest, whether a broadcast
// reaches every node once and, as asked, how it recovers from churn. A
// size that does not fit here or fails is recorded as such and the run
// goes on; the error is for bad options or a cancelled ctx.
func RunFormation(ctx context.Context, opts FormationOptions) (*FormationReport, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if err := raiseFileLimit(uint64(slices.Max(opts.Sizes)) * filesPerDaemon); err != nil {
		return nil, err
	}
	report := &FormationReport{Started: time.Now(), Options: opts, LoadBefore: loadAverage()}
	for _, size := range opts.Sizes {
		report.Results = append(report.Results, runFormationSize(ctx, opts, size))
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	report.LoadAfter = loadAverage()
	return report, nil
}

func (o *FormationOptions) validate() error {
	switch {
	case len(o.Sizes) == 0:
		return errors.New("bench: no sizes to run")
	case slices.Min(o.Sizes) < 2:
		return fmt.Errorf("bench: a ring needs at least 2 nodes, not %d", slices.Min(o.Sizes))
	case slices.Max(o.Sizes) > 1<<(32-formationSubnet.Bits())-3:
		return fmt.Errorf("bench: at most %d nodes fit in %s", 1<<(32-formationSubnet.Bits())-3, formationSubnet)
	case o.Limit <= 0:
		return fmt.Errorf("bench: the limit must be positive, not %v", o.Limit)
	case o.Sample < 1:
		return fmt.Errorf("bench: the broadcast check must watch at least 1 TAP, not %d", o.Sample)
	case o.Quiet <= 0:
		return fmt.Errorf("bench: the quiet window must be positive, not %v", o.Quiet)
	case o.Soak < 0:
		return fmt.Errorf("bench: the soak must not be negative, not %v", o.Soak)
	case o.Soak > 0 && o.SoakEvery < restartPause:
		return fmt.Errorf("bench: soak kills must be at least the %v restart pause apart, not %v", restartPause, o.SoakEvery)
	}
	return nil
}

// formationRun is one size's network in progress.
type formationRun struct {
	opts     FormationOptions
	progress io.Writer
	nodes    []*cluster.Node // in start order: nodes[0] is everyone's bootstrap
}

func runFormationSize(ctx context.Context, opts FormationOptions, size int) *FormationResult {
	res := &FormationResult{Nodes: size}
	fmt.Fprintf(opts.Progress, "== %d daemons\n", size)
	available, err := availableMemory()
	if err != nil {
		res.Failed = err.Error()
		return res
	}
	if need := uint64(size) * memoryPerDaemon; need > available {
		res.Skipped = fmt.Sprintf("does not fit: %d daemons are budgeted %.1f GiB, the machine has %.1f GiB available", size, gib(need), gib(available))
		fmt.Fprintf(opts.Progress, "   skipped: %s\n", res.Skipped)
		return res
	}
	lab, err := newLab(fmt.Sprintf("burrow-bench-formation-%d-", size), opts.Progress)
	if err != nil {
		res.Failed = err.Error()
		return res
	}
	defer lab.Close()
	r := &formationRun{opts: opts, progress: opts.Progress}
	if err := r.build(ctx, lab, size); err != nil {
		res.Failed = err.Error()
		return res
	}
	if err := r.measure(ctx, res, available); err != nil {
		res.Failed = err.Error()
		fmt.Fprintf(r.progress, "   failed: %s\n", res.Failed)
	}
	return res
}

// build adds the hosts and nodes: everyone's settings are the defaults, as
// a new user's, and n0 is everyone's only bootstrap contact.
func (r *formationRun) build(ctx context.Context, lab *netlab.Lab, size int) error {
	fmt.Fprintf(r.progress, "   building %d hosts on one bridge\n", size)
	nw, err := cluster.New(lab, "formation", r.opts.Burrow)
	if err != nil {
		return err
	}
	if r.nodes, err = nw.AddJoiningRing(size, formationSubnet); err != nil {
		return err
	}
	for _, n := range r.nodes {
		// The cluster logs at debug level, for tests; a user gets the
		// default.
		n.Config.Log.Level = ""
	}
	return ctx.Err()
}

// measure starts the daemons and takes the size's measurements in turn.
func (r *formationRun) measure(ctx context.Context, res *FormationResult, availableBefore uint64) error {
	fmt.Fprintf(r.progress, "   starting %d daemons\n", len(r.nodes))
	start := time.Now()
	if err := startAll(r.nodes); err != nil {
		return err
	}
	res.StartedWithin = time.Since(start)
	fmt.Fprintf(r.progress, "   all started within %s s\n", seconds(res.StartedWithin))
	var err error
	if res.Formation, err = r.converge(ctx, start, r.opts.Limit, "the start", r.nodes); err != nil {
		return err
	}
	if res.Idle, err = r.idle(ctx); err != nil {
		return err
	}
	res.Phases = readJoinPhases(r.nodes)
	if available, err := availableMemory(); err == nil && available < availableBefore {
		res.MemoryUsed = availableBefore - available
	}
	before := cluster.ReadDrops(ctx, r.nodes)
	res.Broadcast, err = r.broadcast(ctx)
	if err != nil {
		return fmt.Errorf("broadcast check: %w", err)
	}
	res.BroadcastDrops = cluster.ReadDrops(ctx, r.nodes).Since(before)
	fmt.Fprintf(r.progress, "   dropped meanwhile, all nodes: %s\n", cluster.DescribeDrops(res.BroadcastDrops.Total()))
	victims := r.victims()
	if r.opts.Churn {
		if res.Churn, err = r.churn(ctx, victims); err != nil {
			return err
		}
	}
	if r.opts.Soak > 0 {
		if res.Soak, err = r.soak(ctx, victims); err != nil {
			return err
		}
	}
	return nil
}

// joinPhases is what the daemons' statuses say of their joins (the
// overlay's formation part): for each phase, the seconds from each
// daemon's own start to reaching it, for the daemons that did.
type joinPhases struct {
	FirstLink, Joined, Settled, LongLinks []float64
	// Read counts the daemons whose status was read; Unjoins sums their
	// falls back from joined.
	Read, Unjoins int
}

func readJoinPhases(nodes []*cluster.Node) *joinPhases {
	p := &joinPhases{}
	for _, place := range cluster.TakeRingSnapshot(nodes).Places {
		if place.Status == nil {
			continue
		}
		f := place.Status.Overlay.Formation
		p.Read++
		p.Unjoins += f.Unjoins
		for _, phase := range []struct {
			to    *[]float64
			after float64
		}{{&p.FirstLink, f.FirstLinkAfter}, {&p.Joined, f.JoinedAfter}, {&p.Settled, f.SettledAfter}, {&p.LongLinks, f.LongLinksAfter}} {
			if phase.after > 0 {
				*phase.to = append(*phase.to, phase.after)
			}
		}
	}
	return p
}

// convergence is how a ring came together, after the start or after
// churn; times are from that moment.
type convergence struct {
	// Newcomers counts the nodes started at that moment; JoinedAfter
	// holds, for each of them seen joined, when its status first said so.
	Newcomers   int
	JoinedAfter []time.Duration
	// AllJoinedAfter is when every node was joined at once; zero if
	// never within the limit.
	AllJoinedAfter time.Duration
	// ConsistentAfter is when the ring was first consistent; zero if not
	// within Limit, and Misplaced then describes the nodes still
	// misplaced.
	ConsistentAfter time.Duration
	Limit           time.Duration
	Misplaced       []string
	// Drops are the times the count of joined nodes went down; Unjoined
	// names the nodes that said they were joined and later that they
	// were not.
	Drops    []joinedDrop
	Unjoined []string
	// SnapshotTimes is how long each reading of every status took: the
	// resolution of the times above.
	SnapshotTimes []time.Duration
}

// joinedDrop is a fall of the count of joined nodes between two readings.
type joinedDrop struct {
	At       time.Duration
	From, To int
}

// ringWatch follows the ring's readings and what they say about joins.
type ringWatch struct {
	c     *convergence
	since time.Time
	// waiting holds the newcomers not yet seen joined.
	waiting map[*cluster.Node]bool
	// joined is each node's last readable answer: a status that cannot be
	// read is no news.
	joined map[*cluster.Node]bool
	count  int
}

func newRingWatch(newcomers []*cluster.Node, since time.Time, limit time.Duration) *ringWatch {
	w := &ringWatch{
		c:     &convergence{Newcomers: len(newcomers), Limit: limit},
		since: since, waiting: map[*cluster.Node]bool{}, joined: map[*cluster.Node]bool{},
	}
	for _, n := range newcomers {
		w.waiting[n] = true
	}
	return w
}

// read takes a reading of every node's status and records it.
func (w *ringWatch) read(nodes []*cluster.Node) cluster.RingSnapshot {
	began := time.Now()
	s := cluster.TakeRingSnapshot(nodes)
	w.record(s, time.Since(began))
	return s
}

// record notes what a reading, which took took, says about joins.
func (w *ringWatch) record(s cluster.RingSnapshot, took time.Duration) {
	w.c.SnapshotTimes = append(w.c.SnapshotTimes, took)
	var last time.Time
	for _, p := range s.Places {
		if p.ReadAt.After(last) {
			last = p.ReadAt
		}
		if p.Status == nil {
			continue
		}
		switch {
		case p.Joined() && w.waiting[p.Node]:
			delete(w.waiting, p.Node)
			w.c.JoinedAfter = append(w.c.JoinedAfter, p.ReadAt.Sub(w.since))
		case !p.Joined() && w.joined[p.Node]:
			w.c.Unjoined = append(w.c.Unjoined, fmt.Sprintf("at %s s %s", seconds(p.ReadAt.Sub(w.since)), s.Describe(p)))
		}
		w.joined[p.Node] = p.Joined()
	}
	count := 0
	for _, j := range w.joined {
		if j {
			count++
		}
	}
	at := last.Sub(w.since)
	if count < w.count {
		w.c.Drops = append(w.c.Drops, joinedDrop{At: at, From: w.count, To: count})
	}
	w.count = count
	if count == len(s.Places) && w.c.AllJoinedAfter == 0 {
		w.c.AllJoinedAfter = at
	}
}

// converge reads the ring every snapshotEvery, printing the counts every
// progressEvery, until it is consistent or limit has passed since since,
// the moment named by what, when newcomers were started. The error is for
// a daemon that exited or a cancelled ctx; not converging in time is a
// result.
func (r *formationRun) converge(ctx context.Context, since time.Time, limit time.Duration, what string, newcomers []*cluster.Node) (*convergence, error) {
	w := newRingWatch(newcomers, since, limit)
	var lastProgress time.Time
	for {
		began := time.Now()
		s := w.read(r.nodes)
		if err := r.exited(); err != nil {
			return w.c, err
		}
		if time.Since(lastProgress) >= progressEvery || s.Consistent() {
			lastProgress = time.Now()
			fmt.Fprintf(r.progress, "   %7s s  joined %d/%d  placed %d/%d  unreadable %d\n",
				seconds(time.Since(since)), s.Joined(), len(s.Places), s.Placed(), len(s.Places), s.Unreadable())
		}
		if s.Consistent() {
			w.c.ConsistentAfter = time.Since(since)
			fmt.Fprintf(r.progress, "   ring consistent %s s after %s\n", seconds(w.c.ConsistentAfter), what)
			return w.c, nil
		}
		if time.Since(since) >= limit {
			for _, p := range s.Misplaced() {
				w.c.Misplaced = append(w.c.Misplaced, s.Describe(p))
			}
			fmt.Fprintf(r.progress, "   not consistent after %v; misplaced:\n      %s\n", limit, strings.Join(w.c.Misplaced, "\n      "))
			return w.c, nil
		}
		if err := sleep(ctx, time.Until(began.Add(snapshotEvery))); err != nil {
			return w.c, err
		}
	}
}

// exited names the daemons that should run and do not.
func (r *formationRun) exited() error {
	var gone []string
	for _, n := range r.nodes {
		if n.Process != nil && n.Process.Exited() {
			gone = append(gone, fmt.Sprintf("%s (log %s)", n.Name, n.Process.LogPath()))
		}
	}
	if len(gone) > 0 {
		return fmt.Errorf("daemons exited: %s", strings.Join(gone, ", "))
	}
	return nil
}

// idleResult is what the formed network costs at rest.
type idleResult struct {
	Window time.Duration
	// CPUSeconds is each daemon's CPU time over the window; RSS its
	// VmRSS at the end, PeakRSS its VmHWM and PSS its proportional set
	// size.
	CPUSeconds []float64
	RSS        []uint64
	PeakRSS    []uint64
	PSS        []uint64
	// StillConsistent says the ring was consistent after the window;
	// Misplaced describes the nodes that were not.
	StillConsistent bool
	Misplaced       []string
}

// idle lets the formed network run untouched — no status polls, no
// traffic — for the quiet window, and reads each daemon's CPU time
// before and after, then its memory and the ring.
func (r *formationRun) idle(ctx context.Context) (*idleResult, error) {
	res := &idleResult{Window: r.opts.Quiet}
	fmt.Fprintf(r.progress, "   idling for %v\n", r.opts.Quiet)
	before := make([]float64, len(r.nodes))
	for i, n := range r.nodes {
		var err error
		if before[i], err = cpuSeconds(n.Process.Pid()); err != nil {
			return nil, err
		}
	}
	if err := sleep(ctx, r.opts.Quiet); err != nil {
		return nil, err
	}
	for i, n := range r.nodes {
		if err := res.add(n.Process.Pid(), before[i]); err != nil {
			return nil, err
		}
	}
	s := cluster.TakeRingSnapshot(r.nodes)
	res.StillConsistent = s.Consistent()
	for _, p := range s.Misplaced() {
		res.Misplaced = append(res.Misplaced, s.Describe(p))
	}
	fmt.Fprintf(r.progress, "   idle CPU %s %% of a core per daemon (min / median / max), RSS %s MiB; ring still consistent: %v\n",
		spread(res.cpuPercents(), percent), spread(res.RSS, mibText), res.StillConsistent)
	return res, nil
}

// add reads one daemon's figures at the end of the window; cpuBefore is
// its CPU time at the start.
func (res *idleResult) add(pid int, cpuBefore float64) error {
	cpu, err := cpuSeconds(pid)
	if err != nil {
		return err
	}
	rss, rssErr := residentRSS(pid)
	peak, peakErr := peakRSS(pid)
	pss, pssErr := proportionalRSS(pid)
	if err := errors.Join(rssErr, peakErr, pssErr); err != nil {
		return err
	}
	res.CPUSeconds = append(res.CPUSeconds, cpu-cpuBefore)
	res.RSS, res.PeakRSS, res.PSS = append(res.RSS, rss), append(res.PeakRSS, peak), append(res.PSS, pss)
	return nil
}

// cpuPercents is each daemon's idle CPU as a percentage of one core.
func (res *idleResult) cpuPercents() []float64 {
	out := make([]float64, len(res.CPUSeconds))
	for i, s := range res.CPUSeconds {
		out[i] = 100 * s / res.Window.Seconds()
	}
	return out
}

// broadcast has the node in the middle of the start order broadcast ARP
// requests for an address nobody has and counts their copies on a sample
// of the TAPs, spread evenly around the ring.
func (r *formationRun) broadcast(ctx context.Context) (*cluster.BroadcastCount, error) {
	sender := r.nodes[len(r.nodes)/2]
	var others []*cluster.Node
	for _, n := range cluster.ByRing(r.nodes) {
		if n != sender {
			others = append(others, n)
		}
	}
	watched := evenSample(others, r.opts.Sample)
	fmt.Fprintf(r.progress, "   %s broadcasts %d ARP requests for %s; tcpdump on %d TAPs\n", sender.Name, broadcastRequests, absentAddress, len(watched))
	b, err := cluster.CountARPBroadcast(ctx, sender, watched, absentAddress, broadcastRequests)
	if err != nil {
		return nil, err
	}
	for i := range b.Sent {
		never, once, more := b.Tally(i)
		fmt.Fprintf(r.progress, "   request %d seen never on %d TAPs, once on %d, more than once on %d\n", i+1, never, once, more)
	}
	if b.Echoes > 0 {
		fmt.Fprintf(r.progress, "   %d copies came back to %s\n", b.Echoes, sender.Name)
	}
	if off := b.Off(); off != "" {
		fmt.Fprintf(r.progress, "   not exactly once: %s\n", off)
	}
	return b, nil
}

// evenSample picks at most n of items, spread evenly over them.
func evenSample[T any](items []T, n int) []T {
	if n >= len(items) {
		return items
	}
	out := make([]T, n)
	for i := range n {
		out[i] = items[i*len(items)/n]
	}
	return out
}

// raiseFileLimit lifts this program's open-files limit, soft and hard, to
// at least need; the daemons it starts inherit it.
func raiseFileLimit(need uint64) error {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Cur >= need {
		return nil
	}
	lim.Cur, lim.Max = max(need, lim.Max), max(need, lim.Max)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("bench: raising the open-files limit to %d: %w", need, err)
	}
	return nil
}

// availableMemory reads MemAvailable from /proc/meminfo, in bytes.
func availableMemory() (uint64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	return parseMemoryField(string(data), "MemAvailable")
}

func gib(bytes uint64) float64 { return float64(bytes) / (1 << 30) }

func mibText(bytes uint64) string { return fmt.Sprintf("%.1f", mib(bytes)) }

func percent(p float64) string { return fmt.Sprintf("%.2f", p) }
