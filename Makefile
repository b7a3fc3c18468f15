# git-autokernel: `make`, `make check`, `make check-gpu`, `make bench`,
# `make install PREFIX=...`, `make bundle`, `make asan` (sanitizer build).

PREFIX ?= /usr/local
DESTDIR ?=
B ?= build

CC ?= cc
CFLAGS ?= -O2 -g
WERROR ?=
AK_CFLAGS = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-format-truncation $(WERROR) -fopenmp -Iinclude -I. \
	$(shell pkg-config --cflags libgit2 libcurl jansson)
AK_LIBS = $(shell pkg-config --libs libgit2 libcurl jansson) -lz -ldl -lm -fopenmp
# DT_RPATH, not RUNPATH: it also finds the libraries' own dependencies
# in a bundle's lib/ (make bundle).
RPATH = -Wl,--disable-new-dtags,-rpath,'$$ORIGIN/../lib'

VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
GIT_REV := $(shell git rev-parse --short HEAD 2>/dev/null)
AK_VERSION_STR := $(VERSION)$(if $(GIT_REV),-$(GIT_REV))
AK_CFLAGS += -DAK_VERSION='"$(AK_VERSION_STR)"'
# The objects that write the version (--version, the tool of each result
# and note, report, export) are rebuilt when it changes, as when HEAD
# moves: the stamp is rewritten only then.
VERSIONED_OBJ = $(patsubst %.c,$(B)/%.o,$(shell grep -lw AK_VERSION */*.c))

# Optional GPU toolchains: built when present, skipped with a message.
CUDA_HOME ?= $(firstword $(wildcard /usr/local/cuda) $(patsubst %/bin/nvcc,%,$(shell command -v nvcc 2>/dev/null)))
NVCC ?= $(if $(CUDA_HOME),$(CUDA_HOME)/bin/nvcc,nvcc)
HAVE_CUDA := $(if $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),1)
# HIP: a ROCm install under ROCM_PATH, else Debian's packages (hipcc,
# libamdhip64-dev); headers and library from the same one.
ROCM_PATH ?= /opt/rocm
HIPCC ?= $(firstword $(wildcard $(ROCM_PATH)/bin/hipcc) $(shell command -v hipcc 2>/dev/null))
HIP_INC ?= $(patsubst %/hip/hip_runtime_api.h,%,$(firstword $(wildcard \
	$(ROCM_PATH)/include/hip/hip_runtime_api.h /usr/include/hip/hip_runtime_api.h)))
HIP_LIB ?= $(patsubst %/libamdhip64.so,%,$(firstword $(wildcard \
	$(ROCM_PATH)/lib/libamdhip64.so /usr/lib/*/libamdhip64.so)))
HAVE_HIP := $(if $(and $(HIPCC),$(HIP_INC),$(HIP_LIB)),1)

# The parts, lowest first; includes name their folder ("lib/strbuf.h").
LIB_SRC = $(wildcard lib/*.c)
OPS_SRC = $(wildcard ops/*.c)
VERIFY_SRC = $(wildcard verify/*.c)
AGENT_SRC = $(wildcard agent/*.c)
JUDGE_SRC = $(wildcard judge/*.c)
PROFILE_SRC = $(filter-out profile/cupti-inject.c,$(wildcard profile/*.c))
REPORT_SRC = $(wildcard report/*.c)
EXPORT_SRC = $(wildcard export/*.c)
BIN_SRC = $(wildcard bin/*.c)
CORE_OBJ = $(patsubst %.c,$(B)/%.o,$(LIB_SRC) $(OPS_SRC) $(VERIFY_SRC) \
	$(AGENT_SRC) $(JUDGE_SRC) $(PROFILE_SRC) $(REPORT_SRC) $(EXPORT_SRC) \
	backends/build.c)
BIN_OBJ = $(patsubst %.c,$(B)/%.o,$(BIN_SRC))
UNIT_SRC = $(wildcard tests/unit-*.c)
UNIT_BIN = $(patsubst tests/%.c,$(B)/tests/%,$(UNIT_SRC))
RUNNER_COMMON = backends/runner.c lib/strbuf.c lib/usage.c lib/trace.c

RUNNERS = $(B)/ak-runner-host $(if $(HAVE_CUDA),$(B)/ak-runner-cuda) \
	$(if $(HAVE_HIP),$(B)/ak-runner-hip)

# The CUPTI injection library of `profile -- CMD`, where CUPTI is.
CUPTI_INC ?= $(firstword $(wildcard $(CUDA_HOME)/extras/CUPTI/include \
	$(CUDA_HOME)/include))
CUPTI_LIBDIR ?= $(patsubst %/libcupti.so,%,$(firstword $(wildcard \
	$(CUDA_HOME)/extras/CUPTI/lib64/libcupti.so $(CUDA_HOME)/lib64/libcupti.so)))
HAVE_CUPTI := $(if $(and $(HAVE_CUDA),$(CUPTI_LIBDIR),$(wildcard $(CUPTI_INC)/cupti.h)),1)
CUPTI_LIB = $(if $(HAVE_CUPTI),$(B)/libak-cupti.so)

all: $(B)/git-autokernel $(RUNNERS) $(CUPTI_LIB) $(UNIT_BIN)
	@$(if $(HAVE_CUDA),,echo "nvcc not found, skipping the CUDA runner")
	@$(if $(HAVE_CUPTI),,echo "CUPTI not found, skipping libak-cupti.so (profile -- CMD)")
	@$(if $(HAVE_HIP),,echo "hipcc or libamdhip64 not found, skipping the HIP runner")

$(B)/libak-cupti.so: profile/cupti-inject.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -std=c11 -D_GNU_SOURCE -Wall -Wextra $(WERROR) -fPIC \
		-shared -I$(CUDA_HOME)/include -I$(CUPTI_INC) $(LDFLAGS) -o $@ $< \
		-L$(CUPTI_LIBDIR) -Wl,-rpath,$(CUPTI_LIBDIR) -lcupti -ldl -lpthread

$(B)/%.o: %.c $(wildcard */*.h include/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AK_CFLAGS) -c -o $@ $<

$(VERSIONED_OBJ): $(B)/version.stamp
$(B)/version.stamp: FORCE
	@mkdir -p $(B)
	@echo '$(AK_VERSION_STR)' | cmp -s - $@ || echo '$(AK_VERSION_STR)' >$@

$(B)/git-autokernel: $(BIN_OBJ) $(CORE_OBJ)
	$(CC) $(CFLAGS) $(LDFLAGS) $(RPATH) -o $@ $^ $(AK_LIBS)

$(B)/tests/%: tests/%.c tests/tap.h $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AK_CFLAGS) $(LDFLAGS) $(RPATH) -o $@ \
		$(filter-out %.h,$^) $(AK_LIBS)

$(B)/ak-runner-host: $(RUNNER_COMMON) backends/dev-host.c backends/*.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AK_CFLAGS) -fopenmp $(LDFLAGS) $(RPATH) -o $@ \
		$(RUNNER_COMMON) backends/dev-host.c $(AK_LIBS)

# The benchmark's input generator runs on the device: built by the GPU
# compiler (for Hopper, and as PTX that any later device compiles).
$(B)/backends/gen-cuda.o: backends/gen-gpu.cu include/ak-wire.h include/autokernel.h
	@mkdir -p $(dir $@)
	$(NVCC) -O3 -Iinclude -gencode=arch=compute_90,code=sm_90 \
		-gencode=arch=compute_75,code=compute_75 -c -o $@ $<

# hipcc 5.2 leaves two empty directories in $TMPDIR per compile: there,
# a folder of the build's own.
$(B)/backends/gen-hip.o: backends/gen-gpu.cu include/ak-wire.h include/autokernel.h
	@mkdir -p $(dir $@) $(B)/hipcc-tmp
	TMPDIR=$(CURDIR)/$(B)/hipcc-tmp $(HIPCC) -std=c++17 -O3 -Iinclude \
		-x hip --offload-arch=gfx90a -fPIC -c -o $@ $< && \
		rm -rf $(B)/hipcc-tmp

$(B)/ak-runner-cuda: $(RUNNER_COMMON) backends/dev-gpu.c backends/*.h $(B)/backends/gen-cuda.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AK_CFLAGS) -DAK_CUDA -I$(CUDA_HOME)/include \
		$(LDFLAGS) $(RPATH) -o $@ $(RUNNER_COMMON) backends/dev-gpu.c \
		$(B)/backends/gen-cuda.o -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lstdc++ $(AK_LIBS)

$(B)/ak-runner-hip: $(RUNNER_COMMON) backends/dev-gpu.c backends/*.h $(B)/backends/gen-hip.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AK_CFLAGS) -DAK_HIP -D__HIP_PLATFORM_AMD__ \
		-I$(HIP_INC) $(LDFLAGS) $(RPATH) -o $@ $(RUNNER_COMMON) \
		backends/dev-gpu.c $(B)/backends/gen-hip.o -L$(HIP_LIB) \
		$(if $(filter /usr/lib/%,$(HIP_LIB)),,-Wl,-rpath,$(HIP_LIB)) \
		-lamdhip64 -lstdc++ $(AK_LIBS)

TESTS = $(sort $(wildcard tests/t[0-9]*.sh))
PROVE ?= prove
# A failed test's output is printed again after prove's summary (the end
# of the output is what a CI log keeps).
FAIL_LOG = $(CURDIR)/$(B)/test-failures.log
check: all
	@rm -f $(FAIL_LOG)
	AK_BUILD=$(CURDIR)/$(B) AK_FAIL_LOG=$(FAIL_LOG) $(PROVE) -j2 --timer \
		$(UNIT_BIN) $(TESTS) || { test -f $(FAIL_LOG) && \
		sed -e 's/^/  /' $(FAIL_LOG); exit 1; }

check-gpu: all
	@rm -f $(FAIL_LOG)
	AK_BUILD=$(CURDIR)/$(B) AK_FAIL_LOG=$(FAIL_LOG) $(PROVE) --timer \
		$(sort $(wildcard tests/gpu/t*.sh)) || { test -f $(FAIL_LOG) && \
		sed -e 's/^/  /' $(FAIL_LOG); exit 1; }

bench: all
	AK_BUILD=$(CURDIR)/$(B) ./tests/bench.sh

SAN_CFLAGS = -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=undefined
# Under the sanitizers, the tests of the tool's own code; the starters'
# sweep, the compilers and the demo exercise kernels, not the tool.
TESTS_SLOW = tests/t0002-host-starters.sh tests/t0020-compile-host.sh \
	tests/t0021-compile-cuda.sh tests/t0022-compile-hip.sh \
	tests/t0025-candidates.sh tests/t0026-ncu-op.sh tests/t0027-device-round.sh \
	tests/t0210-demo.sh

asan:
	$(MAKE) B=build-asan CFLAGS="$(SAN_CFLAGS)"

check-asan: asan
	ASAN_OPTIONS=$${ASAN_OPTIONS:-detect_leaks=0} $(MAKE) B=build-asan \
		CFLAGS="$(SAN_CFLAGS)" TESTS="$(filter-out $(TESTS_SLOW),$(TESTS))" check

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/libexec/git-autokernel \
		$(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/share/git-autokernel \
		$(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(B)/git-autokernel $(DESTDIR)$(PREFIX)/bin/
	install -m 755 $(RUNNERS) $(CUPTI_LIB) $(DESTDIR)$(PREFIX)/libexec/git-autokernel/
	install -m 644 include/*.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 doc/git-autokernel.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	rm -rf $(DESTDIR)$(PREFIX)/share/git-autokernel/kernels
	rm -rf $(DESTDIR)$(PREFIX)/share/git-autokernel/python
	cp -R include kernels hooks doc python $(DESTDIR)$(PREFIX)/share/git-autokernel/

# A relocatable tarball: binaries, private copies of the libraries that are
# not part of glibc, data; unpack anywhere and put its bin/ on PATH.
bundle: all
	rm -rf $(B)/bundle && $(MAKE) install PREFIX=/ DESTDIR=$(CURDIR)/$(B)/bundle/git-autokernel
	# the unit test that make check-gpu runs (t0660), beside bin/
	install -d $(B)/bundle/git-autokernel/tests
	install -m 755 $(B)/tests/unit-fresh $(B)/bundle/git-autokernel/tests/
	./scripts/bundle-libs.sh $(B)/bundle/git-autokernel
	tar -C $(B)/bundle -czf $(B)/git-autokernel-$(VERSION).tar.gz git-autokernel
	@echo "bundle: $(B)/git-autokernel-$(VERSION).tar.gz"

clean:
	rm -rf $(B) build-asan

.PHONY: all check check-gpu bench asan check-asan install bundle clean FORCE
