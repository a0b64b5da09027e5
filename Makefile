# rltrain: `make train` and `make test` each install what they need into .venv first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# torch is installed first and pinned below 2.14: any newer range pulls a multi-GB CUDA build on
# a CPU-only machine (shared/notes/dependency-facts.md, section 1).
TORCH_SPEC ?= torch>=2.2,<2.14
STAMP  := $(VENV)/.installed
# Extras installed with rltrain so that their tests run instead of skipping: sweep/slurm
# (tests/e2e/test_sweeps.py), video (PyAV), export (ONNX), wandb (offline run), bench (SB3 for
# `make bench`). Not `ray` (~360 MB; its cloudpickle<3 clashes with joblib's) and not `swanlab`
# (it downgrades protobuf): only their missing-package messages are tested.
EXTRAS ?= dev,sweep,slurm,video,export,wandb,bench,box2d,mujoco,atari

.PHONY: install train test test-float test-wheel test-gpu test-ray test-all bench bench-sbx bench-quality bench-presets lint docs clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP)

train: install          ## train PPO on Pendulum-v1 with the tuned preset
	$(BIN)/rltrain algo=ppo env=Pendulum-v1 $(ARGS)

# The suite runs in WORKERS processes (pytest-xdist), one test file per worker at a time: many tests
# wait on subprocesses, so 2 workers on 2 cores took 3.5 min instead of 5.5 (2026-11-23).
WORKERS ?= 2

test: install           ## the CI suite (slow learning checks excluded)
	$(BIN)/python -m pytest -m "not slow" -q -n $(WORKERS) --dist loadfile $(ARGS)

# Tests that compare two computation orders (a seed in a batch against its single run, resumed
# against uninterrupted where the paths differ, GPU against CPU) carry the marker `orders`; they
# must hold on any CPU, so they run again under the kernel paths other CPUs take: MKL's AVX2 code
# (an AMD EPYC's), MKL's reproducible mode, and ATen without vector instructions.
ORDER_SETTINGS ?= MKL_ENABLE_INSTRUCTIONS=AVX2 MKL_CBWR=COMPATIBLE ATEN_CPU_CAPABILITY=default

test-float: install     ## the `orders` tests once per CPU kernel setting in ORDER_SETTINGS
	@for setting in $(ORDER_SETTINGS); do \
	  echo "== $$setting"; \
	  env $$setting $(BIN)/python -m pytest -m orders -q -n $(WORKERS) --dist loadfile $(ARGS) || exit 1; \
	done

# What users of a release install: the wheel, not an editable tree. A fresh venv each time (a
# stale one could hide a missing dependency), the wheel built from this tree and installed with
# its dependencies, then run from a folder without the source (.ci/wheel_smoke.sh); and the
# EnvPool twin checks (EnvPool is ~926 MB, so only this venv has it), run from a copy of tests/
# so that they import the installed package.
WHEEL_VENV ?= .venv-wheel
WHEEL_EXTRAS ?= dev,export,envpool,mujoco,box2d

test-wheel:             ## build the wheel, install it into a fresh venv ($(WHEEL_VENV)), run the CLI and the EnvPool twin tests from it
	rm -rf $(WHEEL_VENV) dist build
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(WHEEL_VENV)/bin/python -m pip install --quiet "$(TORCH_SPEC)"
	$(WHEEL_VENV)/bin/python -m pip wheel --quiet --no-deps --wheel-dir dist .
	$(WHEEL_VENV)/bin/python -m pip install --quiet "$$(ls dist/rltrain-*.whl)[$(WHEEL_EXTRAS)]"
	bash .ci/wheel_smoke.sh $(WHEEL_VENV)/bin
	@copy="$$(mktemp -d)" && cp -r tests pyproject.toml "$$copy" && cd "$$copy" && \
	  "$(CURDIR)/$(WHEEL_VENV)/bin/python" -m pytest -q -p no:cacheprovider tests/envs/test_envpool_twins.py tests/envs/test_engines.py $(ARGS); \
	  status=$$?; rm -rf "$$copy"; exit $$status

# On a machine with a CUDA GPU (CI has none: there these tests skip): every algorithm, resume
# across devices, seed batches, native torch envs, uint8 pixels, Atari replay; torchrun over NCCL
# on a machine with two GPUs.
test-gpu: install       ## the CUDA paths (tests/gpu, marker `gpu`) on a machine with a CUDA GPU
	$(BIN)/python -m pytest -m gpu -q tests/gpu $(ARGS)

# A venv of its own for extras that cannot share .venv: $(call own_venv,<folder>,<extras>)
# creates it, installs torch as .venv does, then rltrain with the extras, and stamps it.
define own_venv
	test -x $(1)/bin/python || $(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install --quiet --upgrade pip
	$(1)/bin/python -m pip install --quiet "$(TORCH_SPEC)"
	$(1)/bin/python -m pip install --quiet -e ".[$(2)]"
	touch $(1)/.installed
endef

# The Ray launcher lives in its own venv: ray's hydra-ray-launcher pins cloudpickle<3, which the
# joblib launcher of .venv does not accept (shared/notes/dependency-facts.md, section 3).
RAY_VENV ?= .venv-ray
RAY_STAMP := $(RAY_VENV)/.installed
RAY_EXTRAS := dev,ray

$(RAY_STAMP): pyproject.toml
	$(call own_venv,$(RAY_VENV),$(RAY_EXTRAS))

test-ray: $(RAY_STAMP)  ## a two-job sweep through hydra/launcher=ray on a local Ray instance (own venv: .venv-ray)
	$(RAY_VENV)/bin/python -m pytest -q tests/e2e/test_ray.py $(ARGS)

# gymnasium-robotics in its own venv: its release cannot build its models with the mujoco 4.0 of
# .venv (the `robotics` extra pins mujoco<3.12; pyproject.toml says why).
ROBOTICS_VENV ?= .venv-robotics
ROBOTICS_STAMP := $(ROBOTICS_VENV)/.installed
ROBOTICS_EXTRAS := dev,robotics

$(ROBOTICS_STAMP): pyproject.toml
	$(call own_venv,$(ROBOTICS_VENV),$(ROBOTICS_EXTRAS))

test-robotics: $(ROBOTICS_STAMP)  ## goal envs: SAC + HER on gymnasium-robotics' FetchReach, success rates (own venv: .venv-robotics)
	$(ROBOTICS_VENV)/bin/python -m pytest -q tests/envs/test_goal_success.py "tests/test_config.py::test_every_tuned_preset_composes_and_validates[sac_fetchreach]" $(ARGS)

# SBX (jax) in its own venv, beside rltrain and SB3: `make bench-sbx`.
SBX_VENV ?= .venv-sbx
SBX_STAMP := $(SBX_VENV)/.installed
SBX_EXTRAS := bench,sbx,mujoco,box2d

$(SBX_STAMP): pyproject.toml
	$(call own_venv,$(SBX_VENV),$(SBX_EXTRAS))

bench-sbx: $(SBX_STAMP)  ## rltrain (eager and compiled), SB3 and SBX on the same hyperparameters, interleaved: benchmarks/results/equal_work.{json,md}, then one DQN gradient step on each, taken apart: dqn_step.{json,md} (own venv: .venv-sbx)
	$(SBX_VENV)/bin/python benchmarks/equal_work.py --out benchmarks/results $(ARGS)
	$(SBX_VENV)/bin/python benchmarks/dqn_step.py --out benchmarks/results

test-all: install       ## everything, slow learning checks included, 100 damaged checkpoints
	RLTRAIN_FUZZ_EXAMPLES=100 $(BIN)/python -m pytest -q $(ARGS)

bench: install          ## speed vs SB3 + RL-Zoo (seeds 0-2) and throughput, process wall-clock vs SB3 at RL-Zoo budgets, torchrun scaling (1 vs 2 ranks), start-up, seeds as a batch: benchmarks/results/{speed,process_gaps,scaling,seed_batch}.{json,md}
	$(BIN)/python benchmarks/speed.py $(ARGS)
	$(BIN)/python benchmarks/process_gaps.py
	$(BIN)/python benchmarks/scaling.py
	$(BIN)/python benchmarks/startup.py
	$(BIN)/python benchmarks/seed_batch.py --distribution 20

bench-quality: install  ## the `slow` learning tests (pytest -m slow), then benchmarks/quality.py: median final eval over seeds 0-2 per tuned task, then benchmarks/update_floor.py: each task's update against its matrix-product floor, to benchmarks/results/
	$(BIN)/python -m pytest -m slow -q
	$(BIN)/python benchmarks/quality.py $(ARGS)
	$(BIN)/python benchmarks/update_floor.py

bench-presets: install  ## one seed of each tuned preset outside the quality table (PPO/SAC/TD3 MuJoCo, TD3 LunarLanderContinuous) against random actions and RL-Zoo's published return: benchmarks/results/preset_check.{json,md} (hours)
	$(BIN)/python benchmarks/preset_check.py $(ARGS)

lint: install
	$(BIN)/ruff check rltrain tests benchmarks

# The documentation site: mkdocs.yml, docs/ -> site/. --strict turns mkdocs.yml's `validation`
# warnings into errors: a page left out of the navigation, a broken link or anchor fails the build.
# Its own stamp: the `docs` extra, installed on top of `make install`'s .venv (the config
# reference page is generated from the package, so the site builds from the installed rltrain).
DOCS_STAMP := $(VENV)/.installed-docs

$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)     ## build the documentation site into site/ (mkdocs build --strict)
	$(BIN)/mkdocs build --strict --site-dir site $(ARGS)

clean:
	rm -rf $(VENV) $(RAY_VENV) $(WHEEL_VENV) build dist site *.egg-info .pytest_cache
