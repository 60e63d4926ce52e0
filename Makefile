# Every target sets up .venv on its own (torch==2.13.0 is the CPU build on this machine's
# disk; any other torch spec would download a multi-GB CUDA build).
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST := $(VENV)/bin/pytest

.PHONY: demo test bench image install clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[train,dev]"
	touch $(STAMP)

# Builds the sandbox image when a Docker engine is reachable (a no-op when the recipe is unchanged).
# Without one, agent code runs in the process sandbox, which needs bubblewrap: installed
# here when this is a Debian machine and we are root, else the sandbox says what to do.
image: $(STAMP)
	@if docker info >/dev/null 2>&1; then $(VENV)/bin/agentgym build-image; \
	else echo "No Docker engine reachable: skipping the sandbox image (the process sandbox will be used)."; fi
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		{ echo "Installing bubblewrap for the process sandbox"; apt-get install -y -qq bubblewrap >/dev/null 2>&1 || \
		  { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq bubblewrap >/dev/null; }; }; } || \
		echo "bubblewrap is not installed: without Docker, the process sandbox will refuse to run agent code."

demo: image
	$(VENV)/bin/agentgym envs
	$(VENV)/bin/agentgym run agentgym/Calculator-v0 --policy oracle --episodes 500 --concurrency 64
	$(VENV)/bin/agentgym run agentgym/Search-v0 --policy oracle --episodes 200 --concurrency 64
	$(VENV)/bin/agentgym run agentgym/DataAnalysis-v0 --policy oracle --episodes 64 --concurrency 16
	$(VENV)/bin/agentgym run agentgym/SearchTeam-v0 --policy oracle --episodes 100 --concurrency 32
	$(PY) -m baselines.demo

test: image
	$(PYTEST) -q -p no:randomly

bench: image
	mkdir -p benchmarks/results
	$(PYTEST) benchmarks -q --benchmark-only --benchmark-sort=name \
		--benchmark-json=benchmarks/results/bench-$$(date +%Y%m%d-%H%M%S).json

clean:
	rm -rf $(VENV) .benchmarks benchmarks/results
