# Build, install and package burrow.
#
#   make                      build out/burrow
#   make install              install under PREFIX (default /usr/local), DESTDIR for staging
#   make deb                  build out/burrow_VERSION_ARCH.deb with nfpm; DEB_ARCH=arm64 or armhf for the boards
#   make release              static binaries, packages and SHA256SUMS for amd64, arm64 and armhf in out/release
#   make image                the container image IMAGE for DEB_ARCH, built with podman (packaging/kubernetes)
#   make images               IMAGE-amd64, IMAGE-arm64, IMAGE-armhf and the multi-architecture manifest list IMAGE
#   make test                 the whole test suite (scripts/test)
#   make fuzz-campaign        every fuzz target for 10 CPU-minutes, the corpus kept (scripts/fuzz-campaign)
#   make example-config       rewrite packaging/burrow.example.yaml after the template changed

PREFIX     ?= /usr/local
DESTDIR    ?=
BINDIR     ?= $(PREFIX)/bin
UNITDIR    ?= $(PREFIX)/lib/systemd/system
DATADIR    ?= $(PREFIX)/share
DOCDIR     ?= $(DATADIR)/doc/burrow
GO         ?= go
OUT        := out
VERSION    ?= 0.1.0
DEB_VERSION ?= $(VERSION)+git$(shell git rev-parse --short HEAD 2>/dev/null || echo 0)
LDFLAGS    := -X main.version=$(DEB_VERSION)
# The Debian architecture of 'make deb' and 'make image', this machine's by
# default: amd64, arm64 or armhf (32-bit ARMv7, Raspberry Pi class boards).
DEB_ARCH   ?= $(patsubst arm,armhf,$(shell $(GO) env GOARCH))
# Go's name and the container platform of each.
GOARCH_amd64 := amd64
GOARCH_arm64 := arm64
GOARCH_armhf := arm
GOARM_armhf  := 7
PLATFORM_amd64 := linux/amd64
PLATFORM_arm64 := linux/arm64
PLATFORM_armhf := linux/arm/v7
RELEASE_ARCHES := amd64 arm64 armhf
IMAGE      ?= localhost/burrow:$(VERSION)
PODMAN     ?= podman
# nfpm is pinned: the version must resolve through the module mirror here.
NFPM_VERSION := v2.44.0
NFPM       := $(abspath $(OUT)/tools)/nfpm

.PHONY: all build cross completions install uninstall deb release image images nfpm test fuzz-campaign example-config clean

all: build

# A static binary: no libc mapped into every daemon (1.5 MiB of resident
# memory) and it runs on any Linux distribution.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(OUT)/burrow ./cmd/burrow

# The same for DEB_ARCH, cross-compiled: out/DEB_ARCH/burrow.
cross:
	$(if $(GOARCH_$(DEB_ARCH)),,$(error DEB_ARCH=$(DEB_ARCH) is not one of $(RELEASE_ARCHES)))
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH_$(DEB_ARCH)) GOARM=$(GOARM_$(DEB_ARCH)) \
		$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(OUT)/$(DEB_ARCH)/burrow ./cmd/burrow

completions: build
	mkdir -p $(OUT)/completion
	$(OUT)/burrow completion bash > $(OUT)/completion/burrow.bash
	$(OUT)/burrow completion zsh > $(OUT)/completion/_burrow
	$(OUT)/burrow completion fish > $(OUT)/completion/burrow.fish

# The units name /usr/bin/burrow; installed elsewhere they point at BINDIR.
install: build completions
	install -D -m 0755 $(OUT)/burrow $(DESTDIR)$(BINDIR)/burrow
	for unit in burrow.service burrow@.service; do \
		sed 's|/usr/bin/burrow|$(BINDIR)/burrow|' packaging/systemd/$$unit > $(OUT)/$$unit && \
		install -D -m 0644 $(OUT)/$$unit $(DESTDIR)$(UNITDIR)/$$unit || exit 1; \
	done
	install -D -m 0644 $(OUT)/completion/burrow.bash $(DESTDIR)$(DATADIR)/bash-completion/completions/burrow
	install -D -m 0644 $(OUT)/completion/_burrow $(DESTDIR)$(DATADIR)/zsh/vendor-completions/_burrow
	install -D -m 0644 $(OUT)/completion/burrow.fish $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/burrow.fish
	install -D -m 0644 packaging/burrow.example.yaml $(DESTDIR)$(DOCDIR)/examples/burrow.yaml

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/burrow $(DESTDIR)$(UNITDIR)/burrow.service $(DESTDIR)$(UNITDIR)/burrow@.service \
		$(DESTDIR)$(DATADIR)/bash-completion/completions/burrow $(DESTDIR)$(DATADIR)/zsh/vendor-completions/_burrow \
		$(DESTDIR)$(DATADIR)/fish/vendor_completions.d/burrow.fish $(DESTDIR)$(DOCDIR)/examples/burrow.yaml

nfpm: $(NFPM)

$(NFPM):
	GOBIN=$(dir $(NFPM)) GOFLAGS= $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)

# The completions come from this machine's build: they are the same for
# every architecture.
deb: cross completions $(NFPM)
	DEB_ARCH=$(DEB_ARCH) DEB_VERSION=$(DEB_VERSION) $(NFPM) package --config packaging/nfpm.yaml --packager deb --target $(OUT)/

release:
	rm -rf $(OUT)/release
	mkdir -p $(OUT)/release
	for arch in $(RELEASE_ARCHES); do \
		$(MAKE) --no-print-directory deb DEB_ARCH=$$arch DEB_VERSION=$(DEB_VERSION) && \
		cp $(OUT)/$$arch/burrow $(OUT)/release/burrow_$(DEB_VERSION)_linux_$$arch && \
		cp $(OUT)/burrow_$(DEB_VERSION)_$$arch.deb $(OUT)/release/ || exit 1; \
	done
	cd $(OUT)/release && sha256sum burrow_* > SHA256SUMS

# The image holds the static binary and the CA certificates for wss://
# beacons, nothing else; its build context is a directory of just those.
image: cross
	rm -rf $(OUT)/image/$(DEB_ARCH)
	mkdir -p $(OUT)/image/$(DEB_ARCH)
	cp $(OUT)/$(DEB_ARCH)/burrow /etc/ssl/certs/ca-certificates.crt $(OUT)/image/$(DEB_ARCH)/
	$(PODMAN) build --platform $(PLATFORM_$(DEB_ARCH)) --file packaging/kubernetes/Containerfile \
		--tag $(IMAGE) $(OUT)/image/$(DEB_ARCH)

# One name for every node of a cluster whatever its CPU: each node's
# runtime pulls the image of its own platform from the list.
images:
	for arch in $(RELEASE_ARCHES); do \
		$(MAKE) --no-print-directory image DEB_ARCH=$$arch IMAGE=$(IMAGE)-$$arch DEB_VERSION=$(DEB_VERSION) || exit 1; \
	done
	$(PODMAN) manifest rm $(IMAGE) >/dev/null 2>&1 || $(PODMAN) rmi $(IMAGE) >/dev/null 2>&1 || true
	$(PODMAN) manifest create $(IMAGE)
	for arch in $(RELEASE_ARCHES); do \
		$(PODMAN) manifest add $(IMAGE) containers-storage:$(IMAGE)-$$arch || exit 1; \
	done

test:
	scripts/test

# FUZZ_DURATION per target (default 10m) times FUZZ_WORKERS (default 1).
fuzz-campaign:
	scripts/fuzz-campaign $(or $(FUZZ_DURATION),10m) $(FUZZ_TARGETS)

example-config:
	$(GO) test ./cmd/burrow -run TestPackagedExampleIsTheInitTemplate -update-example

clean:
	rm -rf $(OUT)
