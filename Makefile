# nfsrdma: the front door. `make demo` and `make test` are all a new user needs.
SHELL := /bin/bash
BUILD ?= build
SAN ?= build-san
PREFIX ?= /usr/local
FUZZ_SECONDS ?= 20
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Warnings are errors in CI.
WERROR := $(if $(CI),-Dwerror=true,)

# Debian 12 packages the build and the tests need (the last line: the
# soft-RoCE guest of the kernel suite and bench-kernel, tools/guest/).
PACKAGES := g++ gcc clang libclang-rt-14-dev meson ninja-build pkg-config python3 \
  libspdlog-dev libfmt-dev libcli11-dev libgtest-dev libgmock-dev fio dpkg-dev \
  libfabric-dev libfuse3-dev fuse3 libnfs-utils tshark iproute2 rpcbind nfs-ganesha nfs-ganesha-vfs \
  rsync git libnfs-dev libjs-chart.js chromium prometheus libbenchmark-dev libcpp-httplib-dev nlohmann-json3-dev libsodium-dev \
  qemu-system-x86 busybox-static kmod ibverbs-providers ibverbs-utils perftest libfabric-bin nfs-common

.PHONY: deps build build-san test demo bench bench-kernel stress install fuzz clean
# Where the loader finds `dlopen("nfsrdma")`, so `fio --ioengine=nfsrdma` works by bare name.
FIO_ENGINE_DIR ?= /usr/lib/$(shell gcc -print-multiarch 2>/dev/null || echo .)

deps:
	@missing=$$(for p in $(PACKAGES); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	@tools/fio-source.sh >/dev/null

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(WERROR) --prefix $(PREFIX) -Dfio_src=$$(tools/fio-source.sh)

$(SAN)/build.ninja:
	CXX=clang++ meson setup $(SAN) $(WERROR) -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false -Dfuzz=true

build: deps $(BUILD)/build.ninja
	meson configure $(BUILD) -Dfio_src=$$(tools/fio-source.sh) >/dev/null
	ninja -C $(BUILD)

build-san: deps $(SAN)/build.ninja
	ninja -C $(SAN)

test: build build-san
	FUZZ_SECONDS=$(FUZZ_SECONDS) tests/run_all.sh

# A temporary export served and mounted over RPC-RDMA and TCP, the quick
# comparison matrix, a table and an HTML report (bench/compare/run.py).
demo: build
	python3 bench/compare/run.py --preset quick --build $(BUILD) --out $(BUILD)/demo

# The full matrix with peers (nfs-ganesha, fio's libnfs engine, kernel NFS
# where the host has it), three repeats per cell, and the short kernel
# comparison in the soft-RoCE guest where QEMU runs.
bench: build
	tools/fio-libnfs.sh >/dev/null
	python3 bench/compare/run.py --preset full --build $(BUILD)

# The kernel comparison: the Linux NFS client and nfsd against ours, over
# soft-RoCE and TCP, every job three times, in one guest boot (about an hour).
bench-kernel: build
	python3 bench/compare/run.py --preset kernel --build $(BUILD)

install: build
	$(SUDO) meson install -C $(BUILD)
	$(SUDO) install -D -m 0755 $(BUILD)/fio-engine/nfsrdma.so $(FIO_ENGINE_DIR)/nfsrdma

# The long fault and load tests: 1 GiB through 10 server restarts per
# transport, 100 killed clients, 4 GiB across link cuts, a 10-minute soak.
stress: build
	tests/stress/run.sh $(BUILD)

# Longer fuzzing; new interesting inputs are merged into tests/fuzz/corpus.
fuzz: build-san
	FUZZ_SECONDS=$${FUZZ_SECONDS:-300} FUZZ_MERGE=1 meson test -C $(SAN) --suite fuzz --timeout-multiplier 0 --print-errorlogs

clean:
	rm -rf $(BUILD) $(SAN)
