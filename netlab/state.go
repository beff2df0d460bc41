package netlab

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// StateDir holds one state file per lab, <prefix>.json.
const StateDir = "/run/burrow-netlab"

// stopGrace is how long a process gets between SIGTERM and SIGKILL.
const stopGrace = 3 * time.Second

// labState is what a crashed run needs to be cleaned up: the namespaces the
// lab created (recorded before creating them) and the processes it started.
type labState struct {
	Prefix     string            `json:"prefix"`
	Owner      processIdentity   `json:"owner"`
	Namespaces []string          `json:"namespaces"`
	Processes  []recordedProcess `json:"processes"`
}

// processIdentity names a process across PID reuse: the kernel never gives
// the same PID and start time to two processes.
type processIdentity struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
}

type recordedProcess struct {
	PID       int    `json:"pid"`
	Namespace string `json:"namespace"`
	Program   string `json:"program"`
}

func (s labState) clone() labState {
	s.Namespaces = append([]string(nil), s.Namespaces...)
	s.Processes = append([]recordedProcess(nil), s.Processes...)
	return s
}

func statePath(prefix string) string {
	return filepath.Join(StateDir, prefix+".json")
}

// createStateFile writes the first version of a lab's state, failing when a
// lab with the same prefix already exists or left leftovers behind.
func createStateFile(s labState) error {
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(statePath(s.Prefix), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("netlab: lab %s already exists (netlab.Cleanup removes leftovers)", s.Prefix)
	}
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return writeState(s)
}

// writeState replaces the content of an existing state file atomically, so
// a crash never leaves a truncated one. Exchanging instead of renaming over
// it means a state file that Cleanup or Close removed is never recreated by
// a late update; that update fails with fs.ErrNotExist.
func writeState(s labState) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(s.Prefix) + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, statePath(s.Prefix), unix.RENAME_EXCHANGE)
	if err != nil {
		err = &fs.PathError{Op: "exchange", Path: statePath(s.Prefix), Err: err}
	}
	return errors.Join(err, os.Remove(tmp))
}

func readState(prefix string) (labState, error) {
	var s labState
	data, err := os.ReadFile(statePath(prefix))
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("netlab: state file %s: %w", statePath(prefix), err)
	}
	return s, nil
}

// saveLocked writes the lab's state; the caller holds l.mu.
func (l *Lab) saveLocked() error {
	return writeState(l.state)
}

// Cleanup removes the lab with the given prefix as recorded in its state
// file, even if the program that created it still runs: it kills the
// recorded processes that still run inside the lab's namespaces, then
// anything else inside them, deletes the namespaces and the state file.
func Cleanup(prefix string) error {
	if !prefixPattern.MatchString(prefix) {
		return fmt.Errorf("netlab: %q is not a lab prefix", prefix)
	}
	s, err := readState(prefix)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("netlab: no lab %s: %w", prefix, err)
	}
	if err != nil {
		return err
	}
	return teardown(s)
}

// CleanupAll removes every lab whose creating program is no longer running,
// as Cleanup does. Labs of running programs are left alone, so it is safe to
// call while other labs are in use.
func CleanupAll() error {
	files, err := filepath.Glob(filepath.Join(StateDir, "*.json"))
	if err != nil {
		return err
	}
	var errs []error
	for _, file := range files {
		s, err := readState(strings.TrimSuffix(filepath.Base(file), ".json"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // closed meanwhile
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if s.Owner.alive() {
			continue
		}
		errs = append(errs, teardown(s))
	}
	return errors.Join(errs...)
}

// teardown removes what a state records: processes inside the lab's
// namespaces, the namespaces, then the state file.
func teardown(s labState) error {
	namespaces := map[namespaceID]bool{}
	for _, name := range s.Namespaces {
		if id, ok := statNamespace(filepath.Join("/run/netns", name)); ok {
			namespaces[id] = true
		}
	}
	var polite []int
	for _, p := range s.Processes {
		// A recorded PID outside the lab's namespaces is a reused PID that
		// belongs to someone else.
		if id, ok := statNamespace(processNamespacePath(p.PID)); ok && namespaces[id] {
			if syscall.Kill(p.PID, syscall.SIGTERM) == nil {
				polite = append(polite, p.PID)
			}
		}
	}
	waitGone(polite, namespaces, stopGrace)
	// Whatever remains inside the namespaces, such as daemonized children,
	// belongs to the lab too.
	var errs []error
	for _, pid := range processesIn(namespaces) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("netlab: kill %d: %w", pid, err))
		}
	}
	for i := len(s.Namespaces) - 1; i >= 0; i-- {
		if err := deleteNamespace(s.Namespaces[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(statePath(s.Prefix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// waitGone waits until none of pids runs inside the namespaces any more, or
// the timeout passes.
func waitGone(pids []int, namespaces map[namespaceID]bool, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for len(pids) > 0 && time.Now().Before(deadline) {
		var running []int
		for _, pid := range pids {
			if id, ok := statNamespace(processNamespacePath(pid)); ok && namespaces[id] {
				running = append(running, pid)
			}
		}
		pids = running
		time.Sleep(20 * time.Millisecond)
	}
}

// namespaceID identifies a network namespace by its nsfs inode.
type namespaceID struct{ dev, ino uint64 }

func statNamespace(path string) (namespaceID, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return namespaceID{}, false
	}
	return namespaceID{dev: st.Dev, ino: st.Ino}, true
}

func processNamespacePath(pid int) string {
	return fmt.Sprintf("/proc/%d/ns/net", pid)
}

// processesIn lists the PIDs of all processes inside the namespaces. Exited
// processes, zombies included, have no namespace and are not listed.
func processesIn(namespaces map[namespaceID]bool) []int {
	if len(namespaces) == 0 {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if id, ok := statNamespace(processNamespacePath(pid)); ok && namespaces[id] {
			pids = append(pids, pid)
		}
	}
	return pids
}

func currentProcess() (processIdentity, error) {
	pid := os.Getpid()
	start, err := processStartTime(pid)
	if err != nil {
		return processIdentity{}, err
	}
	return processIdentity{PID: pid, StartTime: start}, nil
}

func (p processIdentity) alive() bool {
	start, err := processStartTime(p.PID)
	return err == nil && start == p.StartTime
}

// processStartTime reads field 22 of /proc/<pid>/stat, the start time in
// clock ticks after boot.
func processStartTime(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may contain spaces and parentheses; the
	// fields after its closing parenthesis start at field 3.
	end := strings.LastIndexByte(string(data), ')')
	if end < 0 {
		return 0, fmt.Errorf("netlab: cannot parse /proc/%d/stat", pid)
	}
	fields := strings.Fields(string(data[end+1:]))
	if len(fields) < 20 {
		return 0, fmt.Errorf("netlab: cannot parse /proc/%d/stat", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}
