package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is the release, set at link time by the Makefile
// (-X main.version=...); a plain 'go build' leaves it "devel".
var version = "devel"

func init() { rootCmd.AddCommand(newVersionCmd()) }

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print burrow's version and the platform it was built for",
		Long: `Print the release, the operating system and CPU architecture this binary
was built for, and the Go version that built it: which of the release
binaries (amd64, arm64, armhf) a machine or container image holds.`,
		Example: `  burrow version`,
		Args:    cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "burrow %s %s/%s%s %s\n", version, runtime.GOOS, runtime.GOARCH, armVariant(), runtime.Version())
		},
	}
}

// armVariant is "/v7" for a 32-bit ARM build with GOARM=7, as container
// image platforms name it (linux/arm/v7), and empty for other builds.
func armVariant() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range info.Settings {
		if s.Key == "GOARM" {
			level, _, _ := strings.Cut(s.Value, ",") // "7" or "7,softfloat"
			return "/v" + level
		}
	}
	return ""
}
