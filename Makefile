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

## test: every test, against sqlite and PostgreSQL (started here if needed)
test:
	@url="$${HUB_TEST_POSTGRES_URL:-$$(.ci/postgres.sh | tail -n 1)}" && \
	HUB_TEST_POSTGRES_URL="$$url" $(GO) test -count=1 -timeout 25m ./...

## bench: the benchmarks whose ratios the issue notes report
bench:
	@url="$${HUB_TEST_POSTGRES_URL:-$$(.ci/postgres.sh | tail -n 1)}" && HUB_TEST_POSTGRES_URL="$$url" \
	$(GO) test -run '^$$' -bench . -benchtime 3x ./activities/... ./api/hub/

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
