# The two commands of the README:
#   make demo   – the main job: several processes write one ledger, then `ledger inspect`
#   make test   – set-up, build, and the whole test suite
.PHONY: setup demo test build benchmark benchmark-check compare torture

setup:
	bash scripts/setup.sh

demo:
	bash scripts/demo.sh

build: setup
	swift build --build-tests

test: build
	swift test --skip-build --disable-xctest

benchmark: setup
	swift package --allow-writing-to-package-directory benchmark

benchmark-check: setup
	swift package benchmark thresholds check --path Benchmarks/Thresholds

# Side by side with raw LMDB, SQLite and whole-file rewrite (docs/benchmarks.md).
compare: setup
	swift build -c release
	.build/release/ledger-bench --svg docs/benchmarks.svg

# The long torture run of docs/reliability.md (ROUNDS=200 by default).
ROUNDS ?= 200
torture: setup
	swift build -c release --product ledger-torture
	.build/release/ledger-torture --rounds $(ROUNDS) --round-seconds 2 --seed 2026
