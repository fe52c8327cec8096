# Two commands do all the set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A GPU machine wants its CUDA build of torch (the default); CI installs a CPU build.
TORCH_SPEC ?= torch>=2.4
PARAMS ?= params/acceptance.yaml
STAGES ?=
UI_PORT ?= 5000
# Wheels for an offline GPU machine: its Python and platform, not this one's.
WHEEL_PYTHON ?= 3.12
WHEEL_PLATFORMS ?= manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 any
WHEELHOUSE ?= wheelhouse

.PHONY: setup run test test-gpu ui lab wheelhouse resources report clean

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	@touch $@

setup: $(VENV)/.installed

run: setup
	$(VENV)/bin/stagelab run --params $(PARAMS) $(if $(STAGES),--stages $(STAGES))

test: setup
	$(PY) -m pytest -q

test-gpu: setup
	$(PY) -m pytest -q -m gpu

resources: setup
	$(VENV)/bin/stagelab resources $(STAGES)

report: setup
	$(VENV)/bin/stagelab report

ui: setup
	$(VENV)/bin/mlflow server --backend-store-uri sqlite:///$(CURDIR)/mlruns/mlflow.db \
		--default-artifact-root $(CURDIR)/mlruns/artifacts --host 127.0.0.1 --port $(UI_PORT)

lab: setup
	$(PY) -m ipykernel install --sys-prefix --name stagelab --display-name "Python (stagelab)"
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks

wheelhouse: setup
	rm -rf $(WHEELHOUSE) && mkdir -p $(WHEELHOUSE)
	$(PY) -m pip download -q --only-binary=:all: --python-version $(WHEEL_PYTHON) --implementation cp \
		$(foreach p,$(WHEEL_PLATFORMS),--platform $(p)) -d $(WHEELHOUSE) \
		"mlflow-skinny>=3,<4" sqlalchemy alembic papermill ipykernel tabulate
	$(PY) -m pip wheel -q --no-deps -w $(WHEELHOUSE) .
	@du -sh $(WHEELHOUSE)

clean:
	rm -rf build runs .pytest_cache
