package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"burrow/netlab"
	"burrow/runtime/kernelpath"
)

// tunnel is one VPN running between the two hosts: the processes it is
// made of and the address the far end has inside it.
type tunnel struct {
	processes []*vpnProcess
	// target is host b's address inside the tunnel, or on the underlay for
	// the baseline.
	target netip.Addr
	// started is when the first process started.
	started time.Time
	// programs are a kernel path's eBPF programs, whose run time the
	// kernel counts while the tunnel runs.
	programs []kernelProgram
	// closers undo, when the tunnel stops, what it turned on.
	closers []io.Closer
}

// kernelProgram is the kernel path's program attached to a device of a
// host: the sending program to the TAP's egress, the receiving program
// to the underlay's ingress.
type kernelProgram struct {
	label  string
	host   *netlab.Host
	device string
	egress bool
}

// programRunTimes reads the run time so far of each of the tunnel's
// eBPF programs, in the order they were added.
func (t *tunnel) programRunTimes() ([]programRunTime, error) {
	var out []programRunTime
	for _, p := range t.programs {
		var d time.Duration
		var runs uint64
		err := p.host.Do(func() error {
			ifc, err := net.InterfaceByName(p.device)
			if err != nil {
				return err
			}
			var ok bool
			if d, runs, ok, err = kernelpath.RunTime(ifc.Index, p.egress); err == nil && !ok {
				err = fmt.Errorf("no kernel path attached to %s", p.device)
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.label, err)
		}
		out = append(out, programRunTime{Label: p.label, Seconds: d.Seconds(), Runs: runs})
	}
	return out, nil
}

// vpnProcess is one process of a VPN, labelled for the report.
type vpnProcess struct {
	label string
	*netlab.Process
	ended chan struct{}
	// exit is how the process ended, set before ended is closed.
	exit error
}

// add makes the process part of the tunnel: it is measured and stopped with
// it.
func (t *tunnel) add(label string, p *netlab.Process) {
	if len(t.processes) == 0 {
		t.started = time.Now()
	}
	vp := &vpnProcess{label: label, Process: p, ended: make(chan struct{})}
	go func() {
		vp.exit = p.Wait()
		close(vp.ended)
	}()
	t.processes = append(t.processes, vp)
}

// endedEarly describes the first of the tunnel's processes that is no
// longer running, or returns "".
func (t *tunnel) endedEarly() string {
	for _, p := range t.processes {
		select {
		case <-p.ended:
			if p.exit == nil {
				return p.label + " exited"
			}
			return fmt.Sprintf("%s exited (%v)", p.label, p.exit)
		default:
		}
	}
	return ""
}

// waitFor polls cond until it holds, failing early when one of the
// tunnel's processes ends or ctx does.
func (t *tunnel) waitFor(ctx context.Context, what string, cond func() bool) error {
	for {
		if cond() {
			return nil
		}
		if ended := t.endedEarly(); ended != "" {
			return fmt.Errorf("%s while waiting for %s", ended, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// cpuSeconds returns the CPU time used so far by each process of the
// tunnel, in the order they were added.
func (t *tunnel) cpuSeconds() ([]float64, error) {
	var out []float64
	for _, p := range t.processes {
		s, err := cpuSeconds(p.Pid())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.label, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// processRSS is the peak resident set size of one VPN process.
type processRSS struct {
	Label string
	Bytes uint64
}

// peakRSS reads every process's peak RSS; call it before stopping them.
func (t *tunnel) peakRSS() ([]processRSS, error) {
	var out []processRSS
	for _, p := range t.processes {
		rss, err := peakRSS(p.Pid())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.label, err)
		}
		out = append(out, processRSS{Label: p.label, Bytes: rss})
	}
	return out, nil
}

// stop ends every process of the tunnel, the last started first, and
// undoes what it turned on.
func (t *tunnel) stop() error {
	var errs []error
	for i := len(t.processes) - 1; i >= 0; i-- {
		errs = append(errs, t.processes[i].Stop())
	}
	for _, c := range t.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// logTail returns the last lines of every process's log, for a report on a
// VPN that failed.
func (t *tunnel) logTail(lines int) string {
	var b strings.Builder
	for _, p := range t.processes {
		data, err := os.ReadFile(p.LogPath())
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", p.label, err)
			continue
		}
		fmt.Fprintf(&b, "--- %s (%s)\n%s\n", p.label, p.LogPath(), lastLines(data, lines))
	}
	return b.String()
}

// lastLines returns the last n lines of data.
func lastLines(data []byte, n int) string {
	all := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return string(bytes.Join(all, []byte("\n")))
}
