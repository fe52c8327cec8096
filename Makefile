# Two commands do all the set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A GPU machine wants its CUDA build of torch (the default); CI installs a CPU build.
TORCH_SPEC ?= torch>=2.4
PARAMS ?= params/acceptance.yaml
STAGES ?=
UI_PORT ?= 5000
# The team server (`make server`): a PostgreSQL store, artifacts proxied into SERVER_ARTIFACTS.
SERVER_DB ?= postgresql://$(USER)@localhost:5432/stagelab
SERVER_ARTIFACTS ?= $(CURDIR)/server-artifacts
SERVER_HOST ?= 127.0.0.1
SERVER_PORT ?= 5000
# Wheels for an offline GPU machine: its Python and platform, not this one's.
WHEEL_PYTHON ?= 3.12
WHEEL_PLATFORMS ?= manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 any
WHEELHOUSE ?= wheelhouse

.PHONY: setup run test test-kernels test-fast test-gpu ui server lab wheelhouse resources notebooks report clean FORCE

# The torch spec in use, rewritten only when it changes, so a new TORCH_SPEC reinstalls torch.
TORCH_STAMP := $(VENV)/.torch-spec
$(TORCH_STAMP): FORCE
	@mkdir -p $(VENV)
	@echo '$(TORCH_SPEC)' | cmp -s - $@ || echo '$(TORCH_SPEC)' > $@

$(VENV)/.installed: pyproject.toml $(TORCH_STAMP)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	@touch $@

setup: $(VENV)/.installed

# STRICT=1: exit non-zero when a stage errs, fails to build or its gates, or is incorrect, or when
# no stage could be judged (every one no_gpu: no GPU on this machine).
run: setup
	$(VENV)/bin/stagelab run --params $(PARAMS) $(if $(STAGES),--stages $(STAGES)) $(if $(STRICT),--strict)

# The one test command (README, CI): everything, the slow build and notebook tests included, on
# TEST_WORKERS pytest-xdist workers: on the 2-core machine one worker's nvcc builds run beside the
# other's notebook, server and browser tests, which mostly wait. Each file stays on one worker
# (loadfile), so a module's expensive fixture (a PostgreSQL cluster, a browser) is set up once; the
# longest files start first (tests/conftest.py).
TEST_WORKERS ?= 2
test: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not kernels"

# The sweep: every sdpa stage and variant compiled by nvcc and held to its gates (most of the suite's
# CPU time, so apart from `make test`; CI runs both).
# --dist load: the stages of one file go to both workers (no module fixture to keep together here).
test-kernels: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist load -m kernels

# The edit loop: no kernel builds, no notebook executions (seconds, not minutes).
test-fast: setup
	$(PY) -m pytest -q -m "not slow"

test-gpu: setup
	$(PY) -m pytest -q -m gpu

resources: setup
	$(VENV)/bin/stagelab resources $(STAGES)

FAMILY ?= sdpa
report: setup
	$(VENV)/bin/stagelab report --family $(FAMILY)

notebooks: setup
	$(VENV)/bin/stagelab notebooks

# The store stagelab writes to: MLFLOW_TRACKING_URI when set, else the default SQLite store.
ui: setup
	$(VENV)/bin/stagelab ui --port $(UI_PORT)

# Clients: export MLFLOW_TRACKING_URI=http://<server>:$(SERVER_PORT). SERVER_HOST=0.0.0.0 opens it to the network.
server: setup
	$(VENV)/bin/stagelab server --backend-store-uri $(SERVER_DB) --artifacts-destination $(SERVER_ARTIFACTS) \
		--host $(SERVER_HOST) --port $(SERVER_PORT)

lab: setup
	$(VENV)/bin/stagelab lab

wheelhouse: setup
	rm -rf $(WHEELHOUSE) && mkdir -p $(WHEELHOUSE)
	$(PY) -m pip download -q --only-binary=:all: --python-version $(WHEEL_PYTHON) --implementation cp \
		$(foreach p,$(WHEEL_PLATFORMS),--platform $(p)) -d $(WHEELHOUSE) \
		"mlflow-skinny>=3,<4" sqlalchemy alembic papermill ipykernel tabulate
	# Liger-Kernel's Triton kernels: a contender of the rmsnorm family (pure Python, no deps taken)
	$(PY) -m pip download -q --no-deps --only-binary=:all: -d $(WHEELHOUSE) "liger-kernel==0.8.5"
	# SageAttention's Triton kernels (20 kB, pure Python, no deps taken): the INT8 stage's contender
	$(PY) -m pip download -q --no-deps --only-binary=:all: -d $(WHEELHOUSE) "sageattention==1.0.6"
	$(PY) -m pip wheel -q --no-deps -w $(WHEELHOUSE) .
	# The kernel's debugger (5 MB) and IPython's completion engine jedi (5 MB, imported only when a
	# completion is asked for) run nowhere here: left out, so the wheelhouse and the tree stay under a
	# device call's 64 MiB carry (with jedi the tree and wheelhouse came to 67 MB on 2026-11-28).
	# cuobjdump and nvdisasm are not carried either (5 MB): the device image has both, next to its
	# nvcc (/work/.library/device/KINDS.md, seen working); the tree's records had grown past the
	# carry with them on 2026-11-29.
	rm -f $(WHEELHOUSE)/debugpy-*.whl $(WHEELHOUSE)/jedi-*.whl
	@$(PY) tools/carry_size.py $(WHEELHOUSE)

clean:
	rm -rf build runs .pytest_cache
FORCE:
