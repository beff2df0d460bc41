package netlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Command returns a command that runs the program inside the host's
// namespace. `ip netns exec` replaces itself with the program, so the
// command's PID is the program's.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Namespace, name}, args...)...)
	if _, err := exec.LookPath(name); err != nil {
		cmd.Err = err
	}
	return cmd
}

// Run runs the program inside the host's namespace and returns its combined
// output; a failure's error includes that output.
func (h *Host) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := h.Command(ctx, name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s: %w", h.Name, commandError(cmd, err, out))
	}
	return out, nil
}

// Process is a program started in the background with Host.Start.
type Process struct {
	host    *Host
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

// Start starts the program inside the host's namespace in the background,
// with stdout and stderr going to LogDir/<host>-<program>-<n>.log. The
// process gets its own process group, so a terminal's Ctrl-C reaches only
// the program driving the lab, which can then stop it in order (see
// CloseAllOnSignal); the kernel kills it if that program dies.
func (h *Host) Start(name string, args ...string) (*Process, error) {
	l := h.lab
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errors.New("netlab: lab is closed")
	}
	l.logCount++
	logPath := filepath.Join(l.logDir, fmt.Sprintf("%s-%s-%d.log", h.Name, filepath.Base(name), l.logCount))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logFile, "$ %s\n", strings.Join(append([]string{name}, args...), " "))
	cmd := h.Command(context.Background(), name, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := startTiedToProgram(cmd); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("netlab: start %s on %s: %w", name, h.Name, err)
	}
	p := &Process{host: h, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	l.processes = append(l.processes, p)
	l.state.Processes = append(l.state.Processes, recordedProcess{PID: p.Pid(), Namespace: h.Namespace, Program: name})
	err = l.saveLocked()
	go p.reap(logFile)
	if err == nil {
		err = p.waitEntered()
	}
	if err != nil {
		// Unrecorded or astray, it could outlive a crash: better not run it.
		go p.Stop()
		return nil, err
	}
	return p, nil
}

// waitEntered waits until the process has switched into its host's
// namespace or ended. Until then it is still ip in the caller's namespace,
// where cleanup would not recognize it as the lab's.
func (p *Process) waitEntered() error {
	want, ok := statNamespace(filepath.Join("/run/netns", p.host.Namespace))
	if !ok {
		return fmt.Errorf("netlab: namespace %s is gone", p.host.Namespace)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if id, running := statNamespace(processNamespacePath(p.Pid())); !running || id == want {
			return nil
		}
	}
	return fmt.Errorf("netlab: process %d did not enter namespace %s", p.Pid(), p.host.Namespace)
}

// reap waits for the process to end, then forgets it in the state file.
func (p *Process) reap(logFile *os.File) {
	p.err = p.cmd.Wait()
	logFile.Close()
	l := p.host.lab
	l.mu.Lock()
	for i, r := range l.state.Processes {
		if r.PID == p.Pid() {
			l.state.Processes = append(l.state.Processes[:i], l.state.Processes[i+1:]...)
			break
		}
	}
	// A failed update leaves a stale PID behind, which is harmless: cleanup
	// only kills recorded PIDs still running inside the lab's namespaces.
	_ = l.saveLocked()
	l.mu.Unlock()
	close(p.done)
}

// Pid returns the program's process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath returns the file receiving the program's stdout and stderr.
func (p *Process) LogPath() string { return p.logPath }

// Wait waits for the program to end and returns its exit error, nil when
// it exited with status 0.
func (p *Process) Wait() error {
	<-p.done
	return p.err
}

// Exited says the program has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends the program SIGTERM, then SIGKILL if it is still running a few
// seconds later, and waits for it to end. It returns nil once the program
// is gone, however it ended; Wait tells how.
func (p *Process) Stop() error {
	if p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("netlab: stop %d: %w", p.Pid(), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopGrace):
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("netlab: kill %d: %w", p.Pid(), err)
	}
	<-p.done
	return nil
}

// The kernel sends a child its Pdeathsig when the thread that forked it
// exits, not the whole program, and Go ends threads that a goroutine left
// locked. Forking every lab process from one locked thread that is never
// released ties the children's lives to the program's.
var (
	spawnOnce     sync.Once
	spawnRequests = make(chan spawnRequest)
)

type spawnRequest struct {
	cmd    *exec.Cmd
	result chan error
}

func startTiedToProgram(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		go func() {
			runtime.LockOSThread()
			for r := range spawnRequests {
				r.result <- r.cmd.Start()
			}
		}()
	})
	r := spawnRequest{cmd: cmd, result: make(chan error, 1)}
	spawnRequests <- r
	return <-r.result
}

// WaitListening waits until a socket inside the host's namespace listens on
// the port, for network "tcp" or "udp", or ctx ends.
func (h *Host) WaitListening(ctx context.Context, network string, port uint16) error {
	flags := map[string]string{"tcp": "-t", "udp": "-u"}
	flag, ok := flags[network]
	if !ok {
		return fmt.Errorf("netlab: WaitListening: network %q is neither tcp nor udp", network)
	}
	for {
		out, err := h.Run(ctx, "ss", "-H", "-l", "-n", flag, fmt.Sprintf("sport = :%d", port))
		if err == nil && len(bytes.TrimSpace(out)) > 0 {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("netlab: nothing listens on %s port %d on %s: %w", network, port, h.Name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Do runs fn on a thread inside the host's namespace: sockets fn opens
// stay there after it returns, so a test can talk from inside the lab.
func (h *Host) Do(fn func() error) error { return inNamespace(h.Namespace, fn) }
