# The two commands: `make run` starts the whole stack, `make test` runs every test.
export GOTOOLCHAIN := local
GO ?= go
BIN := bin/hub
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/thehub/hub/worker.Version=$(VERSION)

.PHONY: build run test bench vet fmt clean

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/hub

## run: build and start everything in one process (see README)
run: build
	./$(BIN) dev

SHELL := bash
.SHELLFLAGS := -eo pipefail -c
BENCH_PKGS := ./activities/site/ ./activities/targets/ ./api/hub/ ./api/cj/

## test: every test, against sqlite and PostgreSQL (started here if needed),
## then every benchmark once at a small size (quick mode) so none rots
## (the benchmarks' own output is kept in bin/bench-quick.out, and its
## failures are printed)
test:
	@mkdir -p bin && url="$${HUB_TEST_POSTGRES_URL:-$$(.ci/postgres.sh | tail -n 1)}" && \
	HUB_TEST_POSTGRES_URL="$$url" $(GO) test -count=1 -timeout 25m ./... && \
	{ HUB_TEST_POSTGRES_URL="$$url" HUB_BENCH_QUICK=1 $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 10m $(BENCH_PKGS) | \
	tee bin/bench-quick.out | \
	$(GO) run ./cmd/benchtable -all -title "Benchmarks in quick mode (small sizes: the run shows they work; make bench gives the figures)" || \
	{ grep -B 3 -A 25 -E -- '--- FAIL|^panic|^FAIL' bin/bench-quick.out; exit 1; }; }

## bench: the benchmarks at the issue's sizes (premigrate job of 100,000
## files, lists over 100,000 jobs, 1M indexed files), then one table of
## figure, baseline, ratio and goal; LARGE=1 adds the million-path job and
## lists over 1M jobs / 10M job stats. -p 1: no package is built while
## another's benchmarks run
bench:
	@mkdir -p bin && url="$${HUB_TEST_POSTGRES_URL:-$$(.ci/postgres.sh | tail -n 1)}" && \
	HUB_TEST_POSTGRES_URL="$$url" HUB_BENCH_LARGE=$(LARGE) \
	HUB_BENCH_JOB_FILES="$${HUB_BENCH_JOB_FILES:-$(if $(LARGE),1000000,100000)}" \
	$(GO) test -p 1 -run '^$$' -bench . -benchtime 3x -timeout 120m $(BENCH_PKGS) | tee bin/bench.out && \
	$(GO) run ./cmd/benchtable -title "make bench, $$(date -u +%F), $$(nproc) cores" < bin/bench.out

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
