# The two commands of the README:
#   make demo   – the main job: several processes write one ledger, then `ledger inspect`
#   make test   – set-up, build, and the whole test suite
.PHONY: setup demo test build benchmark

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
