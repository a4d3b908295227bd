# The whole test suite: `make test`. CI (.ci/run) calls exactly that, with
# SESSIONS_REQUIRE_BACKENDS=1 so a backend that cannot start fails the run.

GO          ?= go
STATICCHECK ?= staticcheck
LAUNCHER    := internal/testservers/launcher
PKGS        := ./...

.PHONY: test vet lint bench fuzz launcher

## test: vet, then every test with -race against every backend the suite can start.
test: vet launcher
	$(GO) test -race -count=1 -timeout 25m $(PKGS)
	cd $(LAUNCHER) && $(GO) test -count=1 -timeout 10m ./...

## launcher: build the test-server launcher (FerretDB, testcontainers) once, so
## a cold build (minutes on a fresh machine) happens here and not inside a test.
launcher:
	$(GO) build -C $(LAUNCHER) -o /dev/null .

vet:
	$(GO) vet $(PKGS)
	cd $(LAUNCHER) && $(GO) vet ./...

## lint: gofmt, go vet and staticcheck, on the library and the nested test-server module.
lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(STATICCHECK) $(PKGS)
	cd $(LAUNCHER) && $(STATICCHECK) ./...

## bench: every adapter against its raw driver in the same run (ratios are reported as metrics).
bench:
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 ./adapters/... ./internal/pyjson/

## fuzz: a short run of every fuzz target (FUZZTIME each).
FUZZTIME ?= 30s
fuzz:
	@$(GO) list -f '{{.ImportPath}} {{.Dir}}' $(PKGS) | while read pkg dir; do \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
	    echo "== $$pkg $$f"; $(GO) test -run='^$$' -fuzz="^$$f\$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
	  done; done
