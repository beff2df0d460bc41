# Build, install and package burrow.
#
#   make                      build out/burrow
#   make install              install under PREFIX (default /usr/local), DESTDIR for staging
#   make deb                  build out/burrow_VERSION_ARCH.deb with nfpm
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
DEB_ARCH   ?= $(shell $(GO) env GOARCH)
DEB_VERSION ?= $(VERSION)+git$(shell git rev-parse --short HEAD 2>/dev/null || echo 0)
# nfpm is pinned: the version must resolve through the module mirror here.
NFPM_VERSION := v2.44.0
NFPM       := $(abspath $(OUT)/tools)/nfpm

.PHONY: all build completions install uninstall deb nfpm test fuzz-campaign example-config clean

all: build

# A static binary: no libc mapped into every daemon (1.5 MiB of resident
# memory) and it runs on any Linux distribution.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(OUT)/burrow ./cmd/burrow

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

deb: build completions $(NFPM)
	DEB_ARCH=$(DEB_ARCH) DEB_VERSION=$(DEB_VERSION) $(NFPM) package --config packaging/nfpm.yaml --packager deb --target $(OUT)/

test:
	scripts/test

# FUZZ_DURATION per target (default 10m) times FUZZ_WORKERS (default 1).
fuzz-campaign:
	scripts/fuzz-campaign $(or $(FUZZ_DURATION),10m) $(FUZZ_TARGETS)

example-config:
	$(GO) test ./cmd/burrow -run TestPackagedExampleIsTheInitTemplate -update-example

clean:
	rm -rf $(OUT)
