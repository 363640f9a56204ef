# The two commands of the README:
#   make demo   – the main job: several processes write one ledger, then `ledger inspect`
#   make test   – set-up, build, and the whole test suite: the product's, the laboratory's, the sync server's
.PHONY: setup demo test test-root test-lab build build-lab benchmark benchmark-check compare torture fuzz crash-states flows

# The laboratory (benchmarks, comparison, torture, crash states, fuzzer): a package of its own
# that depends on this one by path, with its own build directory ($(LAB)/.build).
LAB := Benchmarks

setup:
	bash scripts/setup.sh

demo:
	bash scripts/demo.sh

# The sync demo (docs/sync.md): a private PostgreSQL, ledger-server, two devices of one user.
.PHONY: demo-sync
demo-sync:
	bash scripts/demo-sync.sh

# The sync server's tests with a real PostgreSQL and real processes (docs/sync.md, "Tests"),
# the last part of `make test`, and its benchmark (docs/sync.md, "Performance"). The server
# package's first build (Hummingbird, postgres-nio, swift-crypto) takes about 7 minutes on 2 cores.
.PHONY: test-sync bench-sync
test-sync: setup
	bash scripts/sync-test.sh

bench-sync: setup
	bash scripts/sync-bench.sh

build: setup
	swift build --build-tests

build-lab: setup
	cd $(LAB) && swift build --build-tests

# The whole test suite (what CI runs): the product's tests first, then the laboratory's (its
# tools run as real processes: torture, the crash-state explorer, ledger-bench --quick), then the
# sync server's (Tools/ledger-server, a real PostgreSQL).
test: test-root test-lab test-sync

test-root: build
	swift test --skip-build --disable-xctest

test-lab: build-lab
	cd $(LAB) && swift test --skip-build --disable-xctest

# package-benchmark (docs/benchmarks.md): the suite in $(LAB)/Benchmarks, thresholds in
# $(LAB)/Benchmarks/Thresholds.
benchmark: setup
	cd $(LAB) && swift package --allow-writing-to-package-directory benchmark

benchmark-check: setup
	cd $(LAB) && swift package benchmark thresholds check --path Benchmarks/Thresholds

# Side by side with raw LMDB, SQLite and whole-file rewrite (docs/benchmarks.md).
compare: setup
	cd $(LAB) && swift build -c release --product ledger-bench && swift build -c release --product ledger-bench-cold
	$(LAB)/.build/release/ledger-bench --svg docs/benchmarks.svg

# The long torture run of docs/reliability.md (ROUNDS=200 by default).
ROUNDS ?= 200
torture: setup
	cd $(LAB) && swift build -c release --product ledger-torture
	$(LAB)/.build/release/ledger-torture --rounds $(ROUNDS) --round-seconds 2 --seed 2026

# libFuzzer on the decoders of untrusted bytes (docs/reliability.md). New inputs that add
# coverage are merged into Tests/Corpus (the root's FuzzCorpusTests replay it); a crash leaves
# its input in $(LAB)/.build-fuzz/crash-*.
FUZZ_SECONDS ?= 300
FUZZ := $(LAB)/.build-fuzz
fuzz: setup
	cd $(LAB) && swift build -c release --build-path .build-fuzz -Xswiftc -sanitize=fuzzer -Xswiftc -parse-as-library \
		-Xswiftc -DFUZZING --product ledger-fuzz
	mkdir -p $(FUZZ)/corpus
	$(FUZZ)/release/ledger-fuzz $(FUZZ)/corpus Tests/Corpus -max_total_time=$(FUZZ_SECONDS) \
		-rss_limit_mb=1024 -timeout=5 -max_len=4096 -artifact_prefix=$(FUZZ)/
	$(FUZZ)/release/ledger-fuzz -merge=1 Tests/Corpus $(FUZZ)/corpus

# Power-cut exploration (docs/reliability.md): every scenario, CUTS cut points each, SUBSETS
# random page subsets of the unsynced writes per cut (plus all, none and a prefix).
CUTS ?= 2000
SUBSETS ?= 40
crash-states: setup
	cd $(LAB) && swift build
	$(LAB)/.build/debug/ledger-crash-states --cuts $(CUTS) --subsets $(SUBSETS) --seed 2026

# The flow model's long run (docs/reliability.md, "Flows"): FLOW_SEEDS seeds of FLOW_STEPS steps,
# three real processes (host, widget, extension) against the independent model of docs/semantics.md.
FLOW_SEEDS ?= 40
FLOW_STEPS ?= 500
flows: build
	FLOW_SEEDS=$(FLOW_SEEDS) FLOW_STEPS=$(FLOW_STEPS) swift test --skip-build --disable-xctest --filter FlowModelTests

# Two devices of one user, a real PostgreSQL and ledger-server against the model of docs/sync.md
# and docs/semantics.md (SyncFlowModelTests; docs/reliability.md, "Sync flows"). CI runs 3 × 80.
SYNC_FLOW_SEEDS ?= 10
SYNC_FLOW_STEPS ?= 300
.PHONY: flows-sync
flows-sync: setup
	cd Tools/ledger-server && swift build --build-tests && SYNC_FLOW_SEEDS=$(SYNC_FLOW_SEEDS) SYNC_FLOW_STEPS=$(SYNC_FLOW_STEPS) swift test --skip-build --disable-xctest --filter SyncFlowModelTests
