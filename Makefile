# vmgroup-operator: a Kubernetes operator, in C, for groups of vSphere VMs.
#
#   make            build bin/vmgroup-operator
#   make demo       the operator deployed in a one-node cluster with vcsim (stays up)
#   make demo-run   the manager as a process against the demo's cluster and vCenter
#   make demo-local the manager as a process beside a control plane with no node
#   make env-down   stops the demo's environment (.env, or ENV_DIR)
#   make test       every test (installs what it needs); ends "N passed, N failed"
#   make fuzz       the fuzz targets, FUZZ_TIME seconds each (make fuzz FUZZ_TIME=300)
#   make e2e-cluster  the suites that need a real node (hack/env/up --cluster)
#   make lint       clang-format (check) and cppcheck
#   make bench      benchmarks, printing their figures
#   make run        the manager against the current kubeconfig and VC_* vCenter
#   make image      the image (IMG=..., CONTAINER_TOOL=docker or podman); image-push pushes it
#   make image-check  the Dockerfile's stages, built in chroots (no engine needed)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
CC ?= cc
PKGS := libuv libcurl openssl libxml-2.0 libcjson yaml-0.1

PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lhttp_parser

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wformat=2 -Wvla -Wno-unused-parameter
CFLAGS ?= -O2 -g
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) -I. $(PKG_CFLAGS) \
	-DVMG_VERSION=\"$(VERSION)\" -DKUBE_AGENT=\"vmgroup-operator\" \
	-fstack-protector-strong -D_FORTIFY_SOURCE=2
SAN_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARN) -O1 -g -fno-omit-frame-pointer \
	-fsanitize=address,undefined -fno-sanitize-recover=undefined -I. $(PKG_CFLAGS) \
	-DVMG_VERSION=\"$(VERSION)\" -DKUBE_AGENT=\"vmgroup-operator\" -DVMG_TESTING=1

# Every .c under lib/, kube/, vsphere/ and controller/ is part of the library
# that the manager, the unit tests, the fuzzers and the benchmarks link.
SRCS := $(sort $(wildcard lib/*.c kube/*.c vsphere/*.c controller/*.c))
HDRS := $(sort $(wildcard lib/*.h kube/*.h vsphere/*.h controller/*.h))
OBJS := $(SRCS:%.c=build/obj/%.o)
SAN_OBJS := $(SRCS:%.c=build/san/%.o)
UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=build/unit/%)
# What several unit tests share (tests/unit/*.c that are not test_*.c),
# linked from an archive so that each test takes only what it uses.
UNIT_SUPPORT_SRCS := $(filter-out $(UNIT_SRCS),$(sort $(wildcard tests/unit/*.c)))
UNIT_SUPPORT_HDRS := $(sort $(wildcard tests/unit/*.h))
# Small programs the e2e suites drive (tests/e2e/drivers/*.c), built with
# the sanitizers so that e2e runs catch memory errors too.
DRIVER_SRCS := $(sort $(wildcard tests/e2e/drivers/*.c))
DRIVER_BINS := $(DRIVER_SRCS:tests/e2e/drivers/%.c=build/e2e/%)
# The manager itself under ASan/UBSan, for the e2e tests that look for
# memory errors on paths a peer drives (the suites run the plain binary,
# whose timing and memory figures they measure).
DRIVER_BINS += build/e2e/vmgroup-operator-san

.PHONY: FORCE all build deps tools demo demo-run demo-local run test unit e2e e2e-cluster fuzz lint format bench clean drivers \
	deploy undeploy image image-push image-check env-up env-down driver-bins

all: build
build: bin/vmgroup-operator

bin/vmgroup-operator: build/obj/cmd/vmgroup-operator/main.o build/libvmgroup.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(PKG_LIBS) -lm

build/libvmgroup.a: $(OBJS)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

build/obj/%.o: %.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

# The sources that print VMG_VERSION (the log's "starting" line, --version,
# the user agents) are compiled again whenever it changes: build/version
# holds the one they were built with, rewritten only when `git describe`
# (or VERSION=) says another, so that a build after a commit or a pull
# names that commit rather than the one its objects were first built at.
VERSIONED_SRCS := cmd/vmgroup-operator/main.c lib/options.c kube/kube.c controller/manager.c \
	controller/vcworld.c
$(VERSIONED_SRCS:%.c=build/obj/%.o) $(VERSIONED_SRCS:%.c=build/san/%.o) \
	build/e2e/vmgroup-operator-san: build/version
build/version: FORCE
	@mkdir -p $(@D)
	@[ "$$(cat $@ 2>/dev/null)" = "$(VERSION)" ] || printf '%s\n' "$(VERSION)" >$@
FORCE:

build/san/%.o: %.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(SAN_CFLAGS) -c -o $@ $<

build/libvmgroup-san.a: $(SAN_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

build/unit-support/%.o: tests/unit/%.c $(HDRS) $(UNIT_SUPPORT_HDRS)
	@mkdir -p $(@D)
	$(CC) $(SAN_CFLAGS) -c -o $@ $<

# The benchmarks' own programs (tests/bench/*.c, and the e2e vCenter
# driver that converge, vc_cost and vs_clone time), optimized and without
# sanitizers. `make test` builds them too, so that a change of an API they
# use cannot leave `make bench` broken unnoticed.
BENCH_SRCS := $(sort $(wildcard tests/bench/*.c))
BENCH_BINS := $(BENCH_SRCS:tests/bench/%.c=build/bench/%) build/bench/vsdrv

build/bench/vsdrv: tests/e2e/drivers/vsdrv.c build/libvmgroup.a $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< build/libvmgroup.a $(PKG_LIBS) -lm

build/bench/%: tests/bench/%.c build/libvmgroup.a $(HDRS) $(wildcard tests/bench/*.h)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< build/libvmgroup.a $(PKG_LIBS) -lm

build/unit-support/libunit.a: $(UNIT_SUPPORT_SRCS:tests/unit/%.c=build/unit-support/%.o)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

# Through the linker's --wrap, test_session makes curl_easy_init fail on
# demand (a request that cannot be started), test_authn calloc (no memory),
# and test_kubeconfig looks at the blocks freed.
build/unit/test_session: UNIT_LDFLAGS = -Wl,--wrap=curl_easy_init
build/unit/test_authn: UNIT_LDFLAGS = -Wl,--wrap=calloc
build/unit/test_kubeconfig: UNIT_LDFLAGS = -Wl,--wrap=free

build/unit/%: tests/unit/%.c build/unit-support/libunit.a build/libvmgroup-san.a $(HDRS) \
		$(UNIT_SUPPORT_HDRS)
	@mkdir -p $(@D)
	$(CC) $(SAN_CFLAGS) -o $@ $< build/unit-support/libunit.a build/libvmgroup-san.a \
		$(PKG_LIBS) -lcmocka -lm $(UNIT_LDFLAGS)

build/e2e/vmgroup-operator-san: cmd/vmgroup-operator/main.c build/libvmgroup-san.a $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(SAN_CFLAGS) -o $@ $< build/libvmgroup-san.a $(PKG_LIBS) -lm

build/e2e/%: tests/e2e/drivers/%.c build/libvmgroup-san.a $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(SAN_CFLAGS) -o $@ $< build/libvmgroup-san.a $(PKG_LIBS) -lm

drivers: deps
	@$(MAKE) --no-print-directory driver-bins

# The e2e drivers alone, installing nothing (tests/e2e/run builds them).
driver-bins: $(DRIVER_BINS)

deps:
	@hack/env/deps

tools: deps
	@hack/env/tools ensure

unit-bins: deps
	@$(MAKE) --no-print-directory $(UNIT_BINS)

unit: deps
	@$(MAKE) --no-print-directory $(UNIT_BINS)
	@tests/run unit $(UNIT_BINS)

e2e: tools build
	@$(MAKE) --no-print-directory $(DRIVER_BINS)
	@tests/run e2e

e2e-cluster: deps build
	@hack/env/tools ensure cluster
	@tests/run cluster

# FUZZ_TIME: seconds per target (make fuzz FUZZ_TIME=300 for a long run);
# FUZZ_FILTER: a regular expression choosing targets (fuzz_url, ...).
FUZZ_TIME ?=
FUZZ_FILTER ?=
fuzz: deps
	@FUZZ_TIME='$(FUZZ_TIME)' FUZZ_FILTER='$(FUZZ_FILTER)' tests/fuzz/run

# The whole suite: unit tests under ASan/UBSan, the fuzzers' short runs, and
# the e2e tests against a real kube-apiserver and vcsim, and the cluster suites
# against a real one-node cluster. One summary line.
test: deps
	@hack/env/tools ensure cluster
	@$(MAKE) --no-print-directory build
	@$(MAKE) --no-print-directory $(UNIT_BINS) $(DRIVER_BINS) $(BENCH_BINS)
	@tests/run all $(UNIT_BINS)

bench: tools build
	@$(MAKE) --no-print-directory $(BENCH_BINS)
	@tests/bench/run

# make demo: the operator deployed with make image, image-push and deploy
# into hack/env/up --cluster's one-node cluster (CONTAINER_TOOL=podman when
# docker has no engine), then the samples; it stays up (make env-down).
demo: tools build
	@hack/demo

# make demo-run ARGS=...: bin/vmgroup-operator on this machine against the
# demo's cluster and vCenter (the deployed one scaled to 0), like make run.
demo-run: build
	@hack/demo run $(ARGS)

demo-local: tools build
	@hack/demo-local

env-up: tools
	@hack/env/up $${ENV_DIR:-$(CURDIR)/.env}

env-down:
	@hack/env/down $${ENV_DIR:-$(CURDIR)/.env}

run: build
	bin/vmgroup-operator $(ARGS)

lint: deps
	@hack/lint

format:
	@git ls-files '*.c' '*.h' | xargs clang-format -i

# The image, kubebuilder's way: `make image image-push IMG=REGISTRY/NAME:TAG`
# with docker, or the same commands with CONTAINER_TOOL=podman.
IMG ?= vmgroup-operator:$(VERSION)
CONTAINER_TOOL ?= docker
# Extra flags for the build and the push, e.g. --network=host where the
# build's own network cannot reach the package mirror.
CONTAINER_BUILD_FLAGS ?=
CONTAINER_PUSH_FLAGS ?=
# docker trusts a registry on loopback over plain HTTP; podman is told to.
IMG_REGISTRY = $(firstword $(subst /, ,$(IMG)))
ifeq ($(notdir $(CONTAINER_TOOL)),podman)
ifneq ($(filter 127.0.0.1:% localhost:% [::1]:%,$(IMG_REGISTRY)),)
CONTAINER_PUSH_FLAGS += --tls-verify=false
endif
endif
image:
	$(CONTAINER_TOOL) build $(CONTAINER_BUILD_FLAGS) --build-arg VERSION=$(VERSION) -t $(IMG) .

image-push:
	$(CONTAINER_TOOL) push $(CONTAINER_PUSH_FLAGS) $(IMG)

# The Dockerfile's stages built with debootstrap and chroot (no engine needed).
image-check:
	@hack/image/check

deploy:
	@hack/deploy apply $(IMG)

undeploy:
	@hack/deploy delete

clean:
	rm -rf build bin
