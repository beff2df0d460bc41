package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// TestVersionNamesThePlatform: the release binaries for amd64, arm64 and
// armhf tell themselves apart, and so do the container images holding them.
func TestVersionNamesThePlatform(t *testing.T) {
	var out bytes.Buffer
	cmd := newVersionCmd()
	cmd.SetOut(&out)
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(out.String())
	platform := runtime.GOOS + "/" + runtime.GOARCH
	if runtime.GOARCH == "arm" {
		platform += armVariant()
	}
	if len(fields) != 4 || fields[0] != "burrow" || fields[1] != version || fields[2] != platform || fields[3] != runtime.Version() {
		t.Errorf("burrow version printed %q, want burrow %s %s %s", out.String(), version, platform, runtime.Version())
	}
}
