// Package labtest creates netlab labs for tests: the test is skipped where
// labs cannot run, and the lab is closed when the test ends, with the tail
// of every process log shown when the test failed.
package labtest

import (
	"bytes"
	"os"
	"sync"
	"testing"

	"burrow/netlab"
)

// tailLines is how many last lines of each process log a failed test shows.
const tailLines = 30

var prepare sync.Once

// New returns a new lab for the test, or skips the test with the reason
// when labs cannot run here. The first call in a test binary also removes
// labs left behind by crashed runs (see netlab.CleanupAll) and makes
// SIGINT and SIGTERM close the open labs. When the test ends the lab is
// closed; if the test failed, the tail of every process log is logged and
// the logs are kept, otherwise they are removed.
func New(t testing.TB) *netlab.Lab {
	t.Helper()
	if err := netlab.Available(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	prepare.Do(func() {
		netlab.CloseAllOnSignal()
		if err := netlab.CleanupAll(); err != nil {
			t.Logf("labtest: removing labs of crashed runs: %v", err)
		}
	})
	logDir, err := os.MkdirTemp("", "burrow-labtest-")
	if err != nil {
		t.Fatal(err)
	}
	lab, err := netlab.New(netlab.Options{LogDir: logDir})
	if err != nil {
		os.RemoveAll(logDir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Closing first lets the processes write their last words.
		if err := lab.Close(); err != nil {
			t.Errorf("closing lab %s: %v", lab.Prefix(), err)
		}
		if !t.Failed() {
			os.RemoveAll(logDir)
			return
		}
		for _, p := range lab.Processes() {
			t.Logf("last lines of %s:\n%s", p.LogPath(), tail(p.LogPath(), tailLines))
		}
		t.Logf("process logs of lab %s kept in %s", lab.Prefix(), logDir)
	})
	return lab
}

// tail returns the last n lines of a file, or why it cannot be read.
func tail(path string, n int) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		return []byte(err.Error())
	}
	data = bytes.TrimRight(data, "\n")
	for i := len(data) - 1; i >= 0; i-- {
		if data[i] == '\n' {
			n--
			if n == 0 {
				return data[i+1:]
			}
		}
	}
	return data
}
