# Tether: `make run` starts the whole system locally, `make test` runs every test.
# Both start what they need (a private Postgres, embedded NATS) when
# DATABASE_URL / TEST_DATABASE_URL are not set.

GO ?= go
# Trials of each fault scenario in `make test-faults`.
TETHER_FAULT_TRIALS ?= 10

.PHONY: run test test-go test-ui test-e2e test-faults bench bench-go build ui ui-deps clean vet

## run: build everything and start Postgres, the gateway (embedded NATS) and one runner
run: build
	./scripts/run.sh

## build: the two binaries, with the UI embedded in the gateway
build: ui
	$(GO) build -o bin/gateway ./cmd/gateway
	$(GO) build -o bin/runner ./cmd/runner

## ui: build the browser client and chat UI into internal/webui/dist
ui: ui-deps
	cd frontend && npm run build

ui-deps:
	./scripts/ensure-node-deps.sh

## test: every test: Go (race detector on), frontend unit tests, browser end-to-end
test: vet test-go test-ui test-e2e

vet:
	$(GO) vet ./...

test-go:
	./scripts/with-test-pg.sh $(GO) test -race -count=1 -timeout 20m ./...

## test-faults: the whole fault harness (internal/faults): a NATS cluster, two gateways, two
## runners and real faults, every scenario 10 times; figures in test-artifacts/faults/figures.txt
test-faults:
	TETHER_FAULTS=all TETHER_FAULT_TRIALS=$(TETHER_FAULT_TRIALS) ./scripts/with-test-pg.sh $(GO) test -count=1 -timeout 80m ./internal/faults/
	@cat test-artifacts/faults/figures.txt

test-ui: ui-deps
	cd frontend && npm test

test-e2e: build
	./scripts/with-test-pg.sh ./scripts/e2e.sh

## bench: the load program (cmd/bench): the gateway, a runner and nats-server as processes, real
## WebSocket clients, and each scenario's raw baseline in the same run; prints the table and
## writes docs/BENCHMARKS.md with its plots (several minutes on 2 cores; Postgres with fsync on)
bench:
	TETHER_PG_FSYNC=on ./scripts/with-test-pg.sh $(GO) run ./cmd/bench

## bench-go: the Go micro-benchmarks of the store, the bus, the protocol and the gateway
bench-go:
	TETHER_PG_FSYNC=on ./scripts/with-test-pg.sh $(GO) test -run '^$$' -bench . -benchtime 2s ./...

## bench-ui: the browser rendering benchmark (frontend/bench/render.mjs): Chromium's main-thread
## time for a 20,000-token answer streamed into the page and for opening a 300-message
## conversation; prints the table for frontend/README.md ("Browser rendering")
.PHONY: bench-ui
bench-ui: build
	./scripts/ensure-chromium.sh
	./scripts/with-test-pg.sh node frontend/bench/render.mjs

clean:
	rm -rf bin test-artifacts
