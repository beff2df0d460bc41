package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"burrow/netlab/cluster"
)

// Churn settings.
const (
	// churnShare of the daemons are the ones churn and soak kill.
	churnShare = 0.1
	// restartPause is how long a killed daemon stays down: RestartSec of
	// the packaged systemd unit, which restarts a crashed daemon.
	restartPause = 5 * time.Second
	// A long-lived daemon's growth over a soak is flagged when its open
	// files grew by more than filesGrowthAllowed, or its RSS by more than
	// rssGrowthShare and rssGrowthFloor both: a Go heap breathes by a few
	// MiB, a leak keeps going.
	filesGrowthAllowed = 2
	rssGrowthShare     = 0.2
	rssGrowthFloor     = 4 << 20
)

// victims picks churnShare of the daemons, at least one, at random.
func (r *formationRun) victims() []*cluster.Node {
	count := max(1, int(float64(len(r.nodes))*churnShare+0.5))
	var out []*cluster.Node
	for _, i := range rand.Perm(len(r.nodes))[:count] {
		out = append(out, r.nodes[i])
	}
	return out
}

// churnRound is one kill and restart of the victims at once.
type churnRound struct {
	Victims []string
	// Reconvergence is the ring's way back, timed from the restart.
	Reconvergence *convergence
}

// churn kills the victims at once (SIGKILL), starts them again after the
// restart pause and follows the ring until it is consistent again.
func (r *formationRun) churn(ctx context.Context, victims []*cluster.Node) (*churnRound, error) {
	res := &churnRound{}
	for _, v := range victims {
		res.Victims = append(res.Victims, v.Label())
	}
	fmt.Fprintf(r.progress, "   churn: killing %d daemons, restarting them %v later\n", len(victims), restartPause)
	for _, v := range victims {
		if err := v.Kill(); err != nil {
			return nil, err
		}
	}
	if err := sleep(ctx, restartPause); err != nil {
		return nil, err
	}
	restarted := time.Now()
	if err := startAll(victims); err != nil {
		return nil, err
	}
	var err error
	res.Reconvergence, err = r.converge(ctx, restarted, r.opts.Limit, "the restart", victims)
	return res, err
}

// soakResult is a stretch of steady churn.
type soakResult struct {
	Duration, Every time.Duration
	Kills           int
	// Readings counts the ring's readings during the soak, Consistent
	// those that found it consistent; MinJoined is the fewest joined
	// nodes a reading found.
	Readings, Consistent, MinJoined int
	// BackAfter holds, for each restart after which the ring was
	// consistent again before the next kill, how long that took; NotBack
	// counts the others.
	BackAfter []time.Duration
	NotBack   int
	// Final is the ring's way back after the last restart.
	Final   *convergence
	Daemons []daemonGrowth
}

// daemonGrowth is one daemon's resources at the start and the end of the
// soak.
type daemonGrowth struct {
	Name string
	// Restarted says the daemon was among the churned ones: start and
	// end are different processes.
	Restarted            bool
	RSSStart, RSSEnd     uint64
	FilesStart, FilesEnd int
}

// grew says a long-lived daemon's open files or RSS grew beyond what a
// healthy daemon's do.
func (d daemonGrowth) grew() bool {
	rssGrew := float64(d.RSSEnd) > float64(d.RSSStart)*(1+rssGrowthShare) && d.RSSEnd > d.RSSStart+rssGrowthFloor
	return !d.Restarted && (d.FilesEnd > d.FilesStart+filesGrowthAllowed || rssGrew)
}

// soak kills one victim after another, each restarted after the restart
// pause, a kill every SoakEvery, for the soak's duration; then it waits
// for the ring and compares every daemon's RSS and open files with the
// start.
func (r *formationRun) soak(ctx context.Context, victims []*cluster.Node) (*soakResult, error) {
	res := &soakResult{Duration: r.opts.Soak, Every: r.opts.SoakEvery, MinJoined: len(r.nodes)}
	fmt.Fprintf(r.progress, "   soak: for %v, killing one of %d daemons every %v, restarting it %v later\n",
		r.opts.Soak, len(victims), r.opts.SoakEvery, restartPause)
	before, err := r.resources()
	if err != nil {
		return nil, err
	}
	pids := r.pids()
	start := time.Now()
	var restarted time.Time
	var last *cluster.Node
	for step := 0; time.Since(start) < r.opts.Soak; step++ {
		v := victims[step%len(victims)]
		last = v
		if err := v.Kill(); err != nil {
			return nil, err
		}
		res.Kills++
		if _, err := r.soakReadings(ctx, res, restartPause); err != nil {
			return nil, err
		}
		restarted = time.Now()
		if err := v.Start(); err != nil {
			return nil, err
		}
		back, err := r.soakReadings(ctx, res, r.opts.SoakEvery-restartPause)
		if err != nil {
			return nil, err
		}
		if back > 0 {
			res.BackAfter = append(res.BackAfter, back)
		} else {
			res.NotBack++
		}
		fmt.Fprintf(r.progress, "   %7s s  killed and restarted %s; ring consistent %d of %d readings\n",
			seconds(time.Since(start)), v.Label(), res.Consistent, res.Readings)
	}
	if res.Final, err = r.converge(ctx, restarted, r.opts.Limit, "the last restart", []*cluster.Node{last}); err != nil {
		return nil, err
	}
	after, err := r.resources()
	if err != nil {
		return nil, err
	}
	endPIDs := r.pids()
	for i, n := range r.nodes {
		res.Daemons = append(res.Daemons, daemonGrowth{
			Name: n.Name, Restarted: pids[i] != endPIDs[i],
			RSSStart: before[i].rss, RSSEnd: after[i].rss, FilesStart: before[i].files, FilesEnd: after[i].files,
		})
	}
	r.printGrowth(res.Daemons)
	return res, nil
}

// soakReadings reads the ring every snapshotEvery for d, counting the
// readings, and returns when it first found the ring consistent, zero if
// never.
func (r *formationRun) soakReadings(ctx context.Context, res *soakResult, d time.Duration) (time.Duration, error) {
	start := time.Now()
	var first time.Duration
	for time.Since(start) < d {
		began := time.Now()
		s := cluster.TakeRingSnapshot(r.nodes)
		res.Readings++
		res.MinJoined = min(res.MinJoined, s.Joined())
		if s.Consistent() {
			res.Consistent++
			if first == 0 {
				first = time.Since(start)
			}
		}
		if err := sleep(ctx, min(time.Until(began.Add(snapshotEvery)), time.Until(start.Add(d)))); err != nil {
			return 0, err
		}
	}
	return first, nil
}

// resources are a daemon's RSS and open files.
type resources struct {
	rss   uint64
	files int
}

func (r *formationRun) resources() ([]resources, error) {
	out := make([]resources, len(r.nodes))
	for i, n := range r.nodes {
		var err error
		if out[i].rss, err = residentRSS(n.Process.Pid()); err != nil {
			return nil, err
		}
		if out[i].files, err = openFiles(n.Process.Pid()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r *formationRun) pids() []int {
	out := make([]int, len(r.nodes))
	for i, n := range r.nodes {
		out[i] = n.Process.Pid()
	}
	return out
}

// printGrowth lists every daemon's resources at the soak's start and
// end; the report keeps a summary and the flagged ones.
func (r *formationRun) printGrowth(daemons []daemonGrowth) {
	fmt.Fprintf(r.progress, "   %-6s %-9s %16s %12s %s\n", "daemon", "", "RSS (MiB)", "open files", "")
	for _, d := range daemons {
		kind, flag := "", ""
		if d.Restarted {
			kind = "restarted"
		}
		if d.grew() {
			flag = "GREW"
		}
		fmt.Fprintf(r.progress, "   %-6s %-9s %7s → %-6s %5d → %-4d %s\n",
			d.Name, kind, mibText(d.RSSStart), mibText(d.RSSEnd), d.FilesStart, d.FilesEnd, flag)
	}
}

func startAll(nodes []*cluster.Node) error {
	for _, n := range nodes {
		if err := n.Start(); err != nil {
			return err
		}
	}
	return nil
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
