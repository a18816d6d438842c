# `make demo` and `make test` create .venv when it is missing: the product's pins
# (requirements.lock, from pyproject.toml's dependencies), the tests' and tools' pins
# (requirements-dev.lock, from requirements-dev.in) and this package.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Bytecode caches on, even where the environment turns them off (this sandbox's image sets
# PYTHONDONTWRITEBYTECODE=1): the suite starts hundreds of Python processes (Ray workers,
# CLI runs, previews) that import this project's modules, and each pytest worker rewrites
# every test module's asserts; without caches each of them compiles it all again (collection
# 6.5 -> 4.6 s per worker, `make test-fast` 74 -> 69 s, measured; docs/testing.md).
export PYTHONDONTWRITEBYTECODE =

.PHONY: venv demo test test-fast mutation lint lock clean-venv cluster-tools test-joint

venv: $(STAMP)

# uv (pinned in requirements-dev.lock) syncs the venv to both lock files' exact pins in one
# resolve: about 1 min on 2 cores, where pip took 2.7; --compile-bytecode as pip does, so no
# process compiles the SDKs again. Sync, not install: a package a lock no longer names is
# removed (python-hcl2 and checkov's bc-python-hcl2 both install `hcl2`: a leftover one would
# change what the Terraform tests parse). uv is bootstrapped with pip only when missing: the
# sync removes pip, which no lock names.
LOCKS := requirements.lock requirements-dev.lock
$(STAMP): $(LOCKS) pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -x $(BIN)/uv || $(BIN)/python -m pip install --quiet "$$(grep '^uv==' requirements-dev.lock)"
	$(BIN)/uv pip sync --quiet --compile-bytecode --python $(BIN)/python $(LOCKS)
	# A venv made before python-hcl2 left the dev lock: removing it took the files of the `hcl2`
	# module it shared with bc-python-hcl2, which the sync then counts as installed.
	$(BIN)/python -c "import hcl2.api" 2>/dev/null || $(BIN)/uv pip install --quiet --reinstall --no-deps \
	  --python $(BIN)/python "$$(grep '^bc-python-hcl2==' requirements.lock)"
	$(BIN)/uv pip install --quiet --no-deps --python $(BIN)/python -e .
	touch $(STAMP)

# The main job: offline preview, emulated TPU slices, training, serving (a few minutes).
demo: venv
	$(BIN)/tpuray demo dev

# Every test, measuring branch coverage; tests/coverage_gate.py then holds tpuray/policies/ at
# 100 % and tpuray/config/ at >= 95 % and names any line no test reaches. Two xdist workers
# (one per core: the suite keeps both busy, and four took as long), one whole test file at a
# time (a module's emulated cluster starts once), the longest files first (tests/ordering.py)
# so that neither worker ends alone on a long one. Tests that start Serve use free ports,
# never Serve's default 8000. Then the joint end-to-end runs (marker joint_e2e: prod's RayJob,
# dev's RayService on the joint substrate), alone on one worker: under the first run's load
# eight raylets starting at once missed Ray's hard-coded 30 s registration wait (docs/testing.md).
test: venv
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --cov --cov-report= -m "not joint_e2e"
	$(BIN)/python -m pytest -q -n 0 --cov --cov-append --cov-report= -m joint_e2e
	$(BIN)/python tests/coverage_gate.py

# Only the joint end-to-end runs, as `make test` ends (issue 33).
test-joint: venv cluster-tools
	$(BIN)/python -m pytest -q -n 0 -m joint_e2e

# Everything that needs no Ray cluster (tests not marked slow): the inner loop, about two minutes (114 s measured, 2,605 tests)
# (docs/testing.md has the figures). Work stealing: xdist's default `load` hands each worker
# its first eighth of the tests up front, the longest modules among them, and one worker
# then ran alone for up to 15 s at the end.
test-fast: venv
	$(BIN)/python -m pytest -q -n 2 --dist worksteal -m "not slow"

# kube-apiserver, etcd and the KubeRay operator from pinned Go modules, for the
# control-plane tests (reused when built; needs Go and the Go module proxy).
cluster-tools:
	bash tools/cluster/build.sh

# Mutation testing of the core modules against the fast suite, from scratch (docs/testing.md):
# the score per module goes to benchmarks/mutation.json. Not part of `make test`.
mutation: venv
	TPURAY_SHARED="$${TPURAY_SHARED:-$(CURDIR)/../shared}" $(BIN)/python benchmarks/mutation_run.py --jobs 2 --max-children 1 $(MUTATION_GROUPS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Resolve pyproject.toml's dependencies into requirements.lock, then requirements-dev.in into
# requirements-dev.lock under requirements.lock's pins (its `-c` line), so the two never pin one
# package at two versions (needs network to PyPI). uv keeps every version the lock files
# already pin that still fits; `make lock LOCK_FLAGS=--upgrade` (or
# `--upgrade-package NAME`) moves them. tests/test_dependencies.py checks the result.
LOCK_FLAGS ?=
lock:
	rm -rf /tmp/tpuray-lock && $(PYTHON) -m venv /tmp/tpuray-lock
	/tmp/tpuray-lock/bin/pip install --quiet "$$(grep '^uv==' requirements-dev.lock)"
	/tmp/tpuray-lock/bin/uv pip compile --quiet --python $(PYTHON) --custom-compile-command "make lock" \
	  $(LOCK_FLAGS) pyproject.toml -o requirements.lock
	/tmp/tpuray-lock/bin/uv pip compile --quiet --python $(PYTHON) --custom-compile-command "make lock" \
	  $(LOCK_FLAGS) requirements-dev.in -o requirements-dev.lock

clean-venv:
	rm -rf $(VENV)
