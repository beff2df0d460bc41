package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// The upstream wireguard-go that burrow's targets refer to, pinned: the
// module mirror here refuses @latest for some modules, and a moving
// reference would make runs incomparable. bench/install-peers.sh pins the
// same version.
const (
	upstreamWireguardModule  = "golang.zx2c4.com/wireguard"
	upstreamWireguardVersion = "v0.0.0-20260522210424-ecfc5a8d5446"
)

// systemCacheDir keeps the upstream wireguard-go build without
// XDG_CACHE_HOME.
const systemCacheDir = "/var/cache/burrow-bench"

// DefaultCacheDir is where the upstream wireguard-go build is kept:
// $XDG_CACHE_HOME/burrow-bench, or systemCacheDir without it.
func DefaultCacheDir() string {
	if dir := os.Getenv("XDG_CACHE_HOME"); dir != "" {
		return filepath.Join(dir, "burrow-bench")
	}
	return systemCacheDir
}

// upstreamWireguardPath is where the pinned build lives in the cache; the
// module's main package is its root, so go install names it wireguard.
func upstreamWireguardPath(cacheDir string) string {
	return filepath.Join(cacheDir, "wireguard-go@"+upstreamWireguardVersion, "wireguard")
}

// upstreamWireguard returns the pinned upstream wireguard-go, building it
// into the cache first when it is not there.
func upstreamWireguard(ctx context.Context, cacheDir string, progress io.Writer) (string, error) {
	if cacheDir == "" {
		cacheDir = DefaultCacheDir()
	}
	path := upstreamWireguardPath(cacheDir)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	module := upstreamWireguardModule + "@" + upstreamWireguardVersion
	if _, err := exec.LookPath("go"); err != nil {
		return "", fmt.Errorf("upstream wireguard-go (Go module %s) is not built in %s and there is no go command to build it; bench/install-peers.sh builds it", module, filepath.Dir(path))
	}
	fmt.Fprintf(progress, "   building upstream wireguard-go %s into %s\n", module, filepath.Dir(path))
	cmd := exec.CommandContext(ctx, "go", "install", module)
	// Outside any module, with no GOFLAGS of the caller's (-mod=vendor,
	// say) in the way.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOBIN="+filepath.Dir(path))
	cmd.Stdout, cmd.Stderr = progress, progress
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building upstream wireguard-go (Go module %s): %w", module, err)
	}
	return path, nil
}
