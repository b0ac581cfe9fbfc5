# Builds spank-lama against the Slurm installed on this host (docs/admin.md):
#   make                  ./configure (when config.mk is missing), then the plugin and lama
#   make install          into PLUGINDIR, PREFIX and SYSCONFDIR of config.mk (DESTDIR= stages)
#   make deb              a .deb for this host's Slurm (scripts/make-deb.sh)
#   make dist             spank-lama-VERSION.tar.gz: the sources, every crate vendored, the RPM
#                         spec at its top (rpmbuild -ta builds it offline)
#   make rpm              make dist, then rpmbuild -ta for this host's Slurm
#   make static           target/static/lama, statically linked, for sites to copy to login
#                         nodes (scripts/static.sh; needs no Slurm and no configure)
#   make uninstall, make clean
# CONFIG_MK=FILE reads another configuration (./configure writes the same variable's file);
# CARGO_TARGET_DIR=DIR builds elsewhere.
CONFIG_MK ?= config.mk
CARGO ?= cargo
CARGO_TARGET_DIR ?= target
# --offline --frozen where every crate is vendored (the dist tarball's .cargo/config.toml).
CARGO_FLAGS ?=
STRIP ?= strip --strip-unneeded
export CARGO_TARGET_DIR

# dist, static and clean need no configuration.
ifneq ($(filter-out dist static clean,$(or $(MAKECMDGOALS),all)),)
include $(CONFIG_MK)
endif

VERSION := $(shell awk -F'"' '/^version = / { print $$2; exit }' Cargo.toml)
RELEASE_DIR := $(CARGO_TARGET_DIR)/release
BINDIR := $(PREFIX)/bin
DATADIR := $(PREFIX)/share
MANDIR := $(DATADIR)/man
DOCDIR := $(DATADIR)/doc/spank-lama
ZSHDIR ?= $(DATADIR)/zsh/site-functions
# What the crates are built with: the headers of this Slurm (clang and cc search CPATH; the
# bindings also take -I), and the plugin directory the manual pages and lama --version name.
BUILD_ENV := CPATH=$(SLURM_INCLUDE) BINDGEN_EXTRA_CLANG_ARGS=-I$(SLURM_INCLUDE) \
	LAMA_PLUGINDIR=$(PLUGINDIR)
# lama reads no Slurm header: built without them, its dependencies (Scotch's bindings, whose
# bindgen follows BINDGEN_EXTRA_CLANG_ARGS) are the same for every Slurm release, and a
# build for another release compiles only what names the plugin directory.
CLI_ENV := LAMA_PLUGINDIR=$(PLUGINDIR)

.PHONY: all built install uninstall deb rpm dist static clean
all:
	$(BUILD_ENV) $(CARGO) build --release $(CARGO_FLAGS) -p spank-lama --lib --example manpage
	$(CLI_ENV) $(CARGO) build --release $(CARGO_FLAGS) $(LAMA_FEATURES) -p lama-cli
	@built=$$(grep -ao 'spank-lama built for Slurm [0-9.]*' $(RELEASE_DIR)/libspank_lama.so | head -n1); \
	case "$$built" in *" $(SLURM_VERSION)") ;; \
	*) echo "make: $(RELEASE_DIR)/libspank_lama.so says '$$built', not Slurm $(SLURM_VERSION)" >&2; exit 1 ;; esac; \
	echo "make: built $(RELEASE_DIR)/libspank_lama.so for Slurm $(SLURM_VERSION) (headers $(SLURM_INCLUDE)/slurm) and $(RELEASE_DIR)/lama"

$(CONFIG_MK):
	CONFIG_MK=$(CONFIG_MK) ./configure

# What `make` built, for this configuration's Slurm; install builds nothing (cargo is not
# run as root, and is not on root's PATH with rustup): run make first, as yourself.
built:
	@for f in $(RELEASE_DIR)/libspank_lama.so $(RELEASE_DIR)/lama $(RELEASE_DIR)/examples/manpage; do \
		[ -e "$$f" ] || { echo "make: $$f is not built: run make (as yourself: it runs cargo), then make install (as root)" >&2; exit 1; }; \
	done
	@built=$$(grep -ao 'spank-lama built for Slurm [0-9.]*' $(RELEASE_DIR)/libspank_lama.so | head -n1); \
	case "$$built" in *" $(SLURM_VERSION)") ;; \
	*) echo "make: $(RELEASE_DIR)/libspank_lama.so says '$$built', not Slurm $(SLURM_VERSION): run make again for this configuration" >&2; exit 1 ;; esac

# The files a package or a node needs, staged under DESTDIR. lama.conf is installed only where
# none is (an admin's edited line is kept: the new one goes beside it as lama.conf.new).
install: built
	install -d $(DESTDIR)$(PLUGINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(DATADIR)/bash-completion/completions \
		$(DESTDIR)$(ZSHDIR) $(DESTDIR)$(DATADIR)/fish/vendor_completions.d \
		$(DESTDIR)$(SYSCONFDIR)/plugstack.conf.d $(DESTDIR)$(DOCDIR)
	$(STRIP) -o $(DESTDIR)$(PLUGINDIR)/.spank_lama.so.new $(RELEASE_DIR)/libspank_lama.so
	chmod 0755 $(DESTDIR)$(PLUGINDIR)/.spank_lama.so.new
	mv -f $(DESTDIR)$(PLUGINDIR)/.spank_lama.so.new $(DESTDIR)$(PLUGINDIR)/spank_lama.so
	$(STRIP) -o $(DESTDIR)$(BINDIR)/lama $(RELEASE_DIR)/lama
	chmod 0755 $(DESTDIR)$(BINDIR)/lama
	$(RELEASE_DIR)/lama manpage | gzip -9n > $(DESTDIR)$(MANDIR)/man1/lama.1.gz
	$(RELEASE_DIR)/examples/manpage | gzip -9n > $(DESTDIR)$(MANDIR)/man8/spank-lama.8.gz
	$(RELEASE_DIR)/lama completions bash > $(DESTDIR)$(DATADIR)/bash-completion/completions/lama
	$(RELEASE_DIR)/lama completions zsh > $(DESTDIR)$(ZSHDIR)/_lama
	$(RELEASE_DIR)/lama completions fish > $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/lama.fish
	sed -e 's|^required @PLUGINDIR@/|# required $(PLUGINDIR)/|' plugstack.conf.example \
		> $(DESTDIR)$(DOCDIR)/plugstack.conf.example
	grep -q '^# required $(PLUGINDIR)/spank_lama.so$$' $(DESTDIR)$(DOCDIR)/plugstack.conf.example
	if [ -e $(DESTDIR)$(SYSCONFDIR)/plugstack.conf.d/lama.conf ]; then \
		install -m 0644 $(DESTDIR)$(DOCDIR)/plugstack.conf.example $(DESTDIR)$(SYSCONFDIR)/plugstack.conf.d/lama.conf.new; \
	else \
		install -m 0644 $(DESTDIR)$(DOCDIR)/plugstack.conf.example $(DESTDIR)$(SYSCONFDIR)/plugstack.conf.d/lama.conf; \
	fi
	install -m 0644 README.md LICENSE-MIT LICENSE-APACHE $(DESTDIR)$(DOCDIR)/
	@echo "make: installed $(DESTDIR)$(PLUGINDIR)/spank_lama.so (Slurm $(SLURM_VERSION)) and $(DESTDIR)$(BINDIR)/lama; enable the plugin's line in $(SYSCONFDIR)/plugstack.conf.d/lama.conf (docs/admin.md)"

# The configuration file stays (it may hold the site's line; its plugin is gone, so it is
# commented out as the packages do on removal).
uninstall:
	rm -f $(DESTDIR)$(PLUGINDIR)/spank_lama.so $(DESTDIR)$(BINDIR)/lama \
		$(DESTDIR)$(MANDIR)/man1/lama.1.gz $(DESTDIR)$(MANDIR)/man8/spank-lama.8.gz \
		$(DESTDIR)$(DATADIR)/bash-completion/completions/lama $(DESTDIR)$(ZSHDIR)/_lama \
		$(DESTDIR)$(DATADIR)/fish/vendor_completions.d/lama.fish
	rm -rf $(DESTDIR)$(DOCDIR)
	conf=$(DESTDIR)$(SYSCONFDIR)/plugstack.conf.d/lama.conf; \
	if [ -f "$$conf" ]; then sed -i -E 's|^([[:space:]]*(required\|optional)[[:space:]].*spank_lama\.so.*)$$|#lama-removed# \1|' "$$conf"; fi

# The packages' scriptlets for this configuration, rendered into SCRIPTLET_DIR for the package
# manager MANAGER (dpkg or rpm): preinst (packaging/check-slurm.sh.in: the release check),
# postinst and postrm (the plugin line enabled again, disabled on removal). make deb and the
# RPM spec both use them.
SCRIPTLET_DIR ?= scriptlets
MANAGER ?= dpkg
.PHONY: scriptlets
scriptlets:
	install -d $(SCRIPTLET_DIR)
	sed -e 's|@SLURM_RELEASE@|$(SLURM_RELEASE)|g' -e 's|@SLURM_PACKAGE@|$(SLURM_PACKAGE)|g' \
		-e 's|@SLURM_BINDIR@|$(SLURM_BINDIR)|g' -e 's|@MANAGER@|$(MANAGER)|g' \
		packaging/check-slurm.sh.in > $(SCRIPTLET_DIR)/preinst
	sed 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' packaging/postinst.in > $(SCRIPTLET_DIR)/postinst
	sed 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' packaging/postrm.in > $(SCRIPTLET_DIR)/postrm
	chmod 0755 $(SCRIPTLET_DIR)/preinst $(SCRIPTLET_DIR)/postinst $(SCRIPTLET_DIR)/postrm

deb: all
	SLURM_RELEASE=$(SLURM_RELEASE) SLURM_PACKAGE=$(SLURM_PACKAGE) SLURM_BINDIR=$(SLURM_BINDIR) \
		PLUGINDIR=$(PLUGINDIR) SYSCONFDIR=$(SYSCONFDIR) VERSION=$(VERSION) \
		CONFIG_MK=$(CONFIG_MK) scripts/make-deb.sh

dist:
	scripts/make-dist.sh

# rpmbuild's own build of the tarball, for the Slurm configure found (its prefix and plugin
# directory; RPMBUILD_FLAGS adds, e.g. --nodeps or --define '_topdir DIR').
RPMBUILD_FLAGS ?=
rpm: dist
	rpmbuild -ta spank-lama-$(VERSION).tar.gz $(RPMBUILD_FLAGS) \
		--define 'slurm_include $(SLURM_INCLUDE)' --define 'slurm_plugindir $(PLUGINDIR)' \
		--define 'slurm_package $(or $(SLURM_PACKAGE),none)' --define 'slurm_sysconfdir $(SYSCONFDIR)'

static:
	CARGO=$(CARGO) scripts/static.sh

clean:
	$(CARGO) clean
	rm -f spank-lama-*.tar.gz
