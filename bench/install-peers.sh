#!/bin/sh
# Installs what `burrow bench` compares burrow against: Debian's
# wireguard-go (with wg from wireguard-tools), tinc 1.0, nebula, n2n v1 and
# iperf3, and builds upstream wireguard-go at a pinned version (never
# @latest: the module mirror here refuses it for some modules) into the
# cache directory where `burrow bench` looks for it. Needs root.
set -eu

# Keep in step with upstreamWireguardVersion in bench/upstream.go.
module=golang.zx2c4.com/wireguard
version=v0.0.0-20260522210424-ecfc5a8d5446

if [ -n "${XDG_CACHE_HOME:-}" ]; then
	cache="$XDG_CACHE_HOME/burrow-bench"
else
	cache=/var/cache/burrow-bench
fi

export DEBIAN_FRONTEND=noninteractive
# Wait for a dpkg lock held briefly by someone else instead of failing.
apt-get -o DPkg::Lock::Timeout=120 update
apt-get -o DPkg::Lock::Timeout=120 install -y wireguard-go wireguard-tools tinc nebula n2n iperf3

echo "building upstream wireguard-go $module@$version into $cache/wireguard-go@$version"
# Run outside any module, without the caller's GOFLAGS.
cd /
GOFLAGS= GOBIN="$cache/wireguard-go@$version" go install "$module@$version"
