// Package leaktest checks that a test leaves no goroutine of the code
// under test behind.
package leaktest

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// Check registers a cleanup that fails t when, three seconds after the
// test, a goroutine whose stack mentions one of markers (package paths or
// function names) is still running.
func Check(t testing.TB, markers ...string) {
	t.Helper()
	t.Cleanup(func() {
		left := running(markers)
		for deadline := time.Now().Add(3 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = running(markers) {
			time.Sleep(10 * time.Millisecond)
		}
		if len(left) > 0 {
			t.Errorf("goroutines left behind:\n%s", strings.Join(left, "\n\n"))
		}
	})
}

// running returns the stacks of the other goroutines that mention markers.
func running(markers []string) []string {
	buf := make([]byte, 1<<20)
	all := strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n")
	var left []string
	for _, g := range all[1:] { // the first is this goroutine
		for _, m := range markers {
			if strings.Contains(g, m) {
				left = append(left, g)
				break
			}
		}
	}
	return left
}
