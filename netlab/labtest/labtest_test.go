package labtest_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"burrow/netlab"
	"burrow/netlab/labtest"
)

// recordingTB stands in for a test whose outcome the test decides: it
// collects cleanups and log lines instead of handing them to testing.
type recordingTB struct {
	testing.TB
	failed   bool
	cleanups []func()
	logs     strings.Builder
}

func (r *recordingTB) Cleanup(fn func()) { r.cleanups = append(r.cleanups, fn) }
func (r *recordingTB) Failed() bool      { return r.failed }
func (r *recordingTB) Logf(format string, args ...any) {
	fmt.Fprintf(&r.logs, format+"\n", args...)
}

// end runs the cleanups as testing does when a test ends.
func (r *recordingTB) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// startCounter starts a process that prints line-1 to line-100 and then
// keeps running, and waits until all lines are written.
func startCounter(t *testing.T, lab *netlab.Lab) *netlab.Process {
	t.Helper()
	host, err := lab.AddHost("a")
	if err != nil {
		t.Fatal(err)
	}
	p, err := host.Start("sh", "-c", "for i in $(seq 1 100); do echo line-$i; done; exec sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		data, _ := os.ReadFile(p.LogPath())
		if strings.Contains(string(data), "line-100\n") {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process did not write its lines; log:\n%s", data)
		}
	}
}

func requireLabs(t *testing.T) {
	if err := netlab.Available(); err != nil {
		t.Skipf("skipping: %v", err)
	}
}

func TestFailedTestShowsLogTailsAndKeepsLogs(t *testing.T) {
	requireLabs(t)
	tb := &recordingTB{TB: t, failed: true}
	lab := labtest.New(tb)
	p := startCounter(t, lab)
	tb.end()

	if err := p.Wait(); err == nil {
		t.Error("the process was not stopped")
	}
	if _, err := os.Stat(filepath.Join(netlab.StateDir, lab.Prefix()+".json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state file of the closed lab: %v, want it gone", err)
	}
	logs := tb.logs.String()
	for _, want := range []string{p.LogPath(), "line-71\n", "line-100\n", lab.LogDir()} {
		if !strings.Contains(logs, want) {
			t.Errorf("test log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "line-70\n") {
		t.Errorf("test log shows more than the tail:\n%s", logs)
	}
	if _, err := os.Stat(p.LogPath()); err != nil {
		t.Errorf("log of a failed test was not kept: %v", err)
	}
	os.RemoveAll(lab.LogDir())
}

func TestPassedTestRemovesLogs(t *testing.T) {
	requireLabs(t)
	tb := &recordingTB{TB: t}
	lab := labtest.New(tb)
	p := startCounter(t, lab)
	tb.end()

	if err := p.Wait(); err == nil {
		t.Error("the process was not stopped")
	}
	if tb.logs.Len() != 0 {
		t.Errorf("a passing test logged:\n%s", tb.logs.String())
	}
	if _, err := os.Stat(lab.LogDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("log dir of a passing test: %v, want it removed", err)
	}
}
