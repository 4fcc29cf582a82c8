# nfsrdma: the front door. `make demo` and `make test` are all a new user needs.
SHELL := /bin/bash
BUILD ?= build
SAN ?= build-san
PREFIX ?= /usr/local
FUZZ_SECONDS ?= 20
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Warnings are errors in CI.
WERROR := $(if $(CI),-Dwerror=true,)

# Debian 12 packages, in four sets: to build (the unit tests are built with
# everything else, so GoogleTest and Google Benchmark are here), to run, for
# the demo's report (what `make demo` needs beyond those: a first try installs
# no browser, QEMU or peer servers), and to test (peers, tools, the soft-RoCE
# guest of the kernel suite, packaging).
BUILD_PACKAGES := g++ meson ninja-build pkg-config python3 dpkg-dev fio libspdlog-dev libfmt-dev libcli11-dev \
  libfabric-dev libfuse3-dev libcpp-httplib-dev nlohmann-json3-dev libsodium-dev libgtest-dev libgmock-dev \
  libbenchmark-dev libsqlite3-dev
RUNTIME_PACKAGES := fuse3 python3 ibverbs-providers
DEMO_PACKAGES := libjs-chart.js
TEST_PACKAGES := gcc clang libclang-rt-14-dev libnfs-utils tshark iproute2 rpcbind nfs-ganesha nfs-ganesha-vfs \
  rsync git libnfs-dev chromium prometheus nfs-common man-db groff-base debhelper systemd \
  qemu-system-x86 busybox-static kmod ibverbs-utils perftest libfabric-bin nftables

.PHONY: deps deps-build deps-runtime deps-demo deps-test build build-san test demo bench bench-kernel stress install deb fuzz clean

# apt-get installs whichever of $(1) are missing.
define apt_install
	@missing=$$(for p in $(1); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "make: installing" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
endef

deps: deps-build deps-runtime deps-demo deps-test
deps-build:
	$(call apt_install,$(BUILD_PACKAGES))
	@tools/fio-source.sh >/dev/null
deps-runtime:
	$(call apt_install,$(RUNTIME_PACKAGES))
deps-demo:
	$(call apt_install,$(DEMO_PACKAGES))
deps-test:
	$(call apt_install,$(TEST_PACKAGES))

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(WERROR) --prefix $(PREFIX) -Dfio_src=$$(tools/fio-source.sh)

$(SAN)/build.ninja:
	CXX=clang++ meson setup $(SAN) $(WERROR) -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false -Dfuzz=true

build: deps-build $(BUILD)/build.ninja
	meson configure $(BUILD) -Dfio_src=$$(tools/fio-source.sh) >/dev/null
	ninja -C $(BUILD)

build-san: deps-build deps-test $(SAN)/build.ninja
	ninja -C $(SAN)

test: deps build build-san
	FUZZ_SECONDS=$(FUZZ_SECONDS) tests/run_all.sh

# A temporary export served and mounted over RPC-RDMA and TCP, the quick
# comparison matrix, a table and an HTML report (bench/compare/run.py).
demo: deps-build deps-runtime deps-demo build
	python3 bench/compare/run.py --preset quick --build $(BUILD) --out $(BUILD)/demo

# The full matrix with peers (nfs-ganesha, fio's libnfs engine, kernel NFS
# where the host has it), three repeats per cell, and the short kernel
# comparison in the soft-RoCE guest where QEMU runs.
bench: deps build
	tools/fio-libnfs.sh >/dev/null
	python3 bench/compare/run.py --preset full --build $(BUILD)

# The kernel comparison: the Linux NFS client and nfsd against ours, over
# soft-RoCE and TCP, every job three times, in one guest boot (about an hour).
bench-kernel: deps build
	python3 bench/compare/run.py --preset kernel --build $(BUILD)

# Programs, man pages, the systemd unit, /etc/nfsrdma/exports and the fio
# engine (dist/meson.build says where). `make deb` builds the same as a package.
install: deps-runtime build
	$(SUDO) meson install -C $(BUILD)

# A Debian package from this tree: ../nfsrdma_VERSION_ARCH.deb (debian/).
deb: deps-build deps-runtime
	$(call apt_install,debhelper)
	dpkg-buildpackage -b -us -uc

# The long fault and load tests: 1 GiB through 10 server restarts per
# transport, 100 killed clients, 4 GiB across link cuts, a 10-minute soak.
stress: deps build
	tests/stress/run.sh $(BUILD)

# Longer fuzzing; new interesting inputs are merged into tests/fuzz/corpus.
fuzz: build-san
	FUZZ_SECONDS=$${FUZZ_SECONDS:-300} FUZZ_MERGE=1 meson test -C $(SAN) --suite fuzz --timeout-multiplier 0 --print-errorlogs

clean:
	rm -rf $(BUILD) $(SAN)
