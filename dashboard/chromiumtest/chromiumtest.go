// Package chromiumtest loads pages in Debian's headless Chromium for tests:
// the DOM after the page's scripts ran, or a screenshot. Each run gets a
// new empty profile and home directory, reaches nothing but the page's own
// server, and leaves no Chromium process behind when it returns.
package chromiumtest

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Path is where Debian's chromium package installs the browser.
const Path = "/usr/bin/chromium"

// runTimeout bounds one Chromium run; a page that never settles fails the
// test instead of hanging it.
const runTimeout = 2 * time.Minute

// Require skips the test when Chromium is not installed.
func Require(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(Path); err != nil {
		t.Skipf("skipping: needs headless Chromium at %s (Debian package chromium): %v", Path, err)
	}
}

// DumpDOM loads page, lets it run for budget of virtual time and returns
// the serialized DOM.
func DumpDOM(t testing.TB, page string, budget time.Duration) string {
	t.Helper()
	out := run(t, page, "--virtual-time-budget="+strconv.Itoa(int(budget.Milliseconds())), "--dump-dom")
	return string(out)
}

// Screenshot loads page in a window of the given size, lets it run for
// budget of virtual time and writes a PNG of it to file.
func Screenshot(t testing.TB, page, file string, width, height int, budget time.Duration) {
	t.Helper()
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	// A picture left by an earlier run must not pass for this one's.
	if err := os.Remove(abs); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	run(t, page, "--virtual-time-budget="+strconv.Itoa(int(budget.Milliseconds())),
		fmt.Sprintf("--window-size=%d,%d", width, height), "--hide-scrollbars", "--screenshot="+abs)
	if fi, err := os.Stat(abs); err != nil || fi.Size() == 0 {
		t.Fatalf("chromium wrote no screenshot to %s: %v", abs, err)
	}
}

// run loads page in Chromium, started in its own process group with a
// fresh profile, and returns its standard output; it kills whatever is left
// of it before returning.
func run(t testing.TB, page string, args ...string) []byte {
	t.Helper()
	Require(t)
	u, err := url.Parse(page)
	if err != nil {
		t.Fatal(err)
	}
	home, err := os.MkdirTemp("", "burrow-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(home)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, Path, append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
		"--disable-crash-reporter", "--disable-breakpad",
		// The page's console goes to stderr, where failures are looked for.
		"--enable-logging=stderr", "--v=0",
		// No name resolves, and no address but the page's server is reached.
		"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE " + u.Hostname(),
		"--user-data-dir=" + filepath.Join(home, "profile"),
	}, append(args, page)...)...)
	// The crash handler Chromium starts leaves the process group; with HOME
	// here its command line names this directory, which is how
	// killLeftovers finds it.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache")}
	cmd.Dir = home
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Children that outlive the browser may hold its output open.
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	runErr := cmd.Wait()
	if err := killLeftovers(cmd.Process.Pid, home); err != nil {
		t.Error(err)
	}
	if runErr != nil {
		t.Fatalf("chromium %s %s: %v\n%s", strings.Join(args, " "), page, runErr, lastLines(stderr.String(), 20))
	}
	if _, failure, ok := strings.Cut(stderr.String(), "Page load failed"); ok {
		reason, _, _ := strings.Cut(failure, "\n")
		t.Fatalf("chromium could not load %s%s", page, reason)
	}
	for line := range strings.Lines(stderr.String()) {
		// Script errors, and requests the page's security policy refused.
		if strings.Contains(line, ":CONSOLE") && (strings.Contains(line, "Uncaught") || strings.Contains(line, "Refused to")) {
			t.Errorf("%s: %s", page, strings.TrimSpace(line))
		}
	}
	return stdout.Bytes()
}

// killLeftovers kills every process of the group pgid and every process
// whose command line names dir, and waits until they are gone.
func killLeftovers(pgid int, dir string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := leftovers(pgid, dir)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chromium processes %v did not end", left)
		}
		syscall.Kill(-pgid, syscall.SIGKILL)
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leftovers lists the live processes in group pgid or naming dir.
func leftovers(pgid int, dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// After "pid (comm)" come state, ppid and pgrp; comm may hold spaces.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		group, _ := strconv.Atoi(fields[2])
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if group == pgid || bytes.Contains(cmdline, []byte(dir)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

var (
	startTag  = regexp.MustCompile(`<[a-zA-Z][^>]*>`)
	attribute = regexp.MustCompile(`([a-zA-Z_:][-a-zA-Z0-9_:.]*)="([^"]*)"`)
)

// ElementsWith returns the attributes of every element in a dumped DOM
// that has the attribute attr, in document order.
func ElementsWith(dom, attr string) []map[string]string {
	var out []map[string]string
	for _, tag := range startTag.FindAllString(dom, -1) {
		attrs := map[string]string{}
		for _, m := range attribute.FindAllStringSubmatch(tag, -1) {
			attrs[m[1]] = html.UnescapeString(m[2])
		}
		if _, ok := attrs[attr]; ok {
			out = append(out, attrs)
		}
	}
	return out
}
