package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCommandLineQuotesWhatAShellWouldSplit(t *testing.T) {
	got := commandLine([]string{"/tmp/burrow-bench", "bench", "--peers", "none,burrow", "--out", "", "--burrow", "my burrow's"})
	want := `/tmp/burrow-bench bench --peers none,burrow --out '' --burrow 'my burrow'\''s'`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestAppendSectionSeparatesSections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	for _, section := range []string{"# Intro\n", "## Run 1\n", "## Run 2\n"} {
		if err := appendSection(path, section); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), "# Intro\n\n## Run 1\n\n## Run 2\n"; got != want {
		t.Errorf("file %q, want %q", got, want)
	}
}
