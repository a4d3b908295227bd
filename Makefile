# The whole test suite: `make test`. CI (.ci/run) calls exactly that, with
# SESSIONS_REQUIRE_BACKENDS=1 so a backend that cannot start fails the run.

SHELL       := bash
.SHELLFLAGS := -eu -o pipefail -c

GO          ?= go
STATICCHECK ?= staticcheck
LAUNCHER    := internal/testkit/testservers/launcher
# Modules of their own, so that their dependencies never enter the library's
# go.mod: the OpenTelemetry wrapper, the framework integrations (eino's v0.7
# checkpoint store and its v0.10 session event store, genkit, openai-go), the
# Dapr adapter (dapr's SDK; its tests run a daprd built by the daprd target), the
# linearizability campaign (porcupine), the tests that need two of these
# modules at once (internal/testkit/crossmodule, so that neither requires the
# other), the test-server launcher (FerretDB, testcontainers) and the slim
# daprd the Dapr tests run (built by the daprd target), whose tests run
# without -race: a race build of FerretDB or of dapr would add minutes and
# test nothing of ours.
DAPRD_MOD   := internal/testkit/testservers/daprd
NESTED      := otelsession integrations/eino integrations/eino/events integrations/genkit integrations/openaigo adapters/dapr internal/testkit/linearize internal/testkit/crossmodule $(LAUNCHER) $(DAPRD_MOD)
UNRACED     := $(LAUNCHER) $(DAPRD_MOD)
# The nested modules' tests run two at a time (scripts/nested-tests.sh),
# the slowest first so that the two lanes end together: SLOWEST is that
# order, and the others follow in NESTED's.
SLOWEST     := integrations/openaigo otelsession adapters/dapr internal/testkit/linearize
RACED       := $(foreach m,$(SLOWEST),$(filter $(m),$(NESTED))) $(filter-out $(SLOWEST) $(UNRACED),$(NESTED))
NESTED_JOBS ?= 2
# The library's packages tested at a time: one more than the two cores,
# since most of them spend their time waiting on a server or a subprocess.
TEST_PKGS_JOBS ?= 3
PKGS        := ./...
# Where the tests note each skip for a server that could not be started.
SKIPLOG     := $(or $(TMPDIR),/tmp)/agentsessions-skipped-backends
# A progress line with the time since make started: $(SAY) "vet otelsession"
# prints "== [2m31s] vet otelsession".
T0          := $(shell date +%s)
SAY          = printf '== [%dm%02ds] %s\n' $$(( ($$(date +%s) - $(T0)) / 60 )) $$(( ($$(date +%s) - $(T0)) % 60 ))

.PHONY: test vet lint bench fuzz launcher daprd outside reliability chart

## test: vet, the launcher's build, the outside build (README.md's go.mod),
## then every test with -race against every backend the suite can start, in
## the library (TEST_PKGS_JOBS packages at a time) and in each nested module
## (NESTED_JOBS modules at a time), each step announced with the time since
## the start. The reliability campaign runs at its short setting as part of
## it (internal/testkit/crashtest, internal/testkit/reliability).
test: vet launcher daprd outside
	@rm -f $(SKIPLOG)
	@$(SAY) "test ./... (the library, -race)"
	SESSIONS_SKIP_LOG=$(SKIPLOG) $(GO) test -race -count=1 -p $(TEST_PKGS_JOBS) -timeout 25m $(PKGS)
	@SESSIONS_SKIP_LOG=$(SKIPLOG) SESSIONS_DAPRD_BIN=$(DAPRD_BIN) GO=$(GO) T0=$(T0) JOBS=$(NESTED_JOBS) \
	  RACED="$(RACED)" UNRACED="$(UNRACED)" scripts/nested-tests.sh
	@$(SAY) "tests done"
	@if [ -s $(SKIPLOG) ]; then \
	  echo; echo "!!! SKIPPED: $$(wc -l < $(SKIPLOG)) tests did not run because a server could not be started:"; \
	  cut -f1 $(SKIPLOG) | sort | uniq -c | sed 's/^/!!!   /'; \
	  echo "!!! This run proves nothing about those backends. Install them (.ci/run does, as root) or set SESSIONS_REQUIRE_BACKENDS=1 to fail instead."; \
	else echo "every backend ran: nothing skipped for a server that could not be started"; fi

## reliability: the crash loop, network faults, restarts and the two-process
## load, with their counts (KILLS kills per backend, LOAD of load per process),
## then the linearizability campaign at its long setting (internal/testkit/linearize;
## 40 minutes or more: its 30-minute timeout stopped it before its last rows).
KILLS ?= 40
LOAD  ?= 1500ms
reliability: launcher
	CRASHTEST_KILLS=$(KILLS) RELIABILITY_LOAD_DURATION=$(LOAD) $(GO) test -count=1 -timeout 60m -v \
	  -run 'TestCrashLoop|TestTwoCopies|TestNetworkFaults|TestRedisRestartUnderLoad|TestMongoRestartUnderLoad|TestMongoConnectionsDropUnderLoad|TestTwoProcessLoad' \
	  ./internal/testkit/crashtest/ ./internal/testkit/reliability/ | grep -E '^(---|ok|FAIL|PASS)|crash loop|two copies|load |restart:|drop:|faults='
	LOADTEST_RUNS=1000 $(GO) test -count=1 -timeout 30m -v -run TestFrontDoorLoad ./internal/testkit/loadtest/ | grep -E '^(---|ok|FAIL|PASS)|    --- |front door|killed'
	cd internal/testkit/linearize && LINEARIZE_LONG=1 $(GO) test -count=1 -timeout 100m -v ./... | grep -E '^(---|ok|FAIL|PASS)|RESULT|NOT linearizable'

## launcher: build the test-server launcher (FerretDB, testcontainers) once, so
## a cold build (minutes on a fresh machine) happens here and not inside a test.
launcher:
	@$(SAY) "build $(LAUNCHER) (minutes on a cold build cache)"
	$(GO) build -C $(LAUNCHER) -o /dev/null .

## daprd: build the Dapr sidecar the adapters/dapr tests run: dapr v1.14.0's
## daprd with the Redis state store alone (internal/testkit/testservers/daprd;
## about 2.5 minutes of CPU and 107 MB of modules on a cold cache).
DAPRD_BIN   := $(or $(TMPDIR),/tmp)/agentsessions-daprd-bin/daprd
daprd:
	@$(SAY) "build daprd ($(DAPRD_MOD), minutes on a cold build cache)"
	@mkdir -p $(dir $(DAPRD_BIN))
	GOWORK=off $(GO) build -C $(DAPRD_MOD) -gcflags='all=-N -l' -o $(DAPRD_BIN) ./cmd/daprd

## outside: README.md's "Depend on it" go.mod, byte for byte, in modules
## outside the checkout: go mod tidy, go build, go run (scripts/outside.sh).
outside:
	@$(SAY) "outside: README.md's go.mod in modules outside the checkout (scripts/outside.sh)"
	GO=$(GO) scripts/outside.sh

vet:
	@$(SAY) "vet ./... (the library)"
	$(GO) vet $(PKGS)
	@for m in $(NESTED); do $(SAY) "vet $$m"; (cd $$m && $(GO) vet ./...) || exit 1; done

## lint: gofmt, go vet and staticcheck, on the library and every nested module.
lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@$(SAY) "staticcheck ./... (the library)"
	$(STATICCHECK) $(PKGS)
	@for m in $(NESTED); do $(SAY) "staticcheck $$m"; (cd $$m && $(STATICCHECK) ./...) || exit 1; done

## bench: every adapter against its raw driver in the same run (ratios are reported as metrics),
## and the crash-safe save ratio on every backend (runstate).
bench:
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 ./adapters/... ./internal/pyjson/
	$(GO) test -run='^$$' -bench=RunTurnRatio -count=1 ./runstate/

## fuzz: every fuzz target for FUZZTIME, FUZZJOBS targets at a time
## (the budget run: make fuzz FUZZTIME=10m FUZZJOBS=2).
FUZZTIME ?= 30s
FUZZJOBS ?= 1
fuzz:
	FUZZTIME=$(FUZZTIME) JOBS=$(FUZZJOBS) GO=$(GO) scripts/fuzz.sh

## chart: the single operations of SQLite, PostgreSQL, Redis and Mongo-wire,
## each interleaved with the tightest raw code, and the crash-safe save ratio,
## CHART_COUNT runs each (ratios: median [min–max] of the per-run ratios), and
## the concurrent appends; charts and tables into docs/benchmarks, with the
## machine and its load average. Needs the test servers (redis-server,
## initdb/postgres, FerretDB; see internal/testkit/testservers).
## `make chart CHART_FLAGS=-quick` is a smoke run.
CHART_COUNT ?= 6
CHART_FLAGS ?=
chart: launcher
	$(GO) run ./internal/testkit/benchchart -out docs/benchmarks -count $(CHART_COUNT) $(CHART_FLAGS)
