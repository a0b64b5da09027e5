"""The CUDA paths, end to end: every algorithm trains with `device=cuda`, keeps its tensors there,
is deterministic, resumes exactly, and its checkpoint loads, evaluates and exports on a machine
without a GPU; a run moves between CPU and GPU on resume; seed batches, the native torch envs,
uint8 pixels, the Atari frame replay, recurrent and masked policies run there; with two GPUs,
torchrun over NCCL.

Skipped without a CUDA GPU (CI has none): `make test-gpu` runs them on a GPU machine.
`RLTRAIN_TEST_DEVICE=cpu pytest -m gpu tests/gpu` runs the same checks on CPU, which is how the
tests themselves are checked where no GPU is at hand.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rltrain.api import train
from rltrain.checkpoint import format as checkpoint
from rltrain.config.compose import compose_train_config
from rltrain.config.registry import ALGOS
from rltrain.config.validation import to_train_config
from rltrain.evaluation.agent import build_agent
from rltrain.evaluation.command import evaluate
from rltrain.runner.runner import Runner
from tests.e2e.harness import run_cli
from tests.runner.test_every_algo import resumed_halfway, same, tiny, weights

DEVICE = os.environ.get("RLTRAIN_TEST_DEVICE", "cuda")
ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(DEVICE.startswith("cuda") and not torch.cuda.is_available(),
                       reason="no CUDA GPU on this machine (make test-gpu runs these on one)"),
]


def on(name: str, seed: int = 0, *extra: str):
    """`tiny(name)` (CartPole or Pendulum, 96 steps, a checkpoint halfway) on the test device."""
    return tiny(name, seed, (f"device={DEVICE}", *extra))


def device_types(module: torch.nn.Module) -> set[str]:
    return {p.device.type for p in module.parameters()} | {b.device.type for b in module.buffers()}


def cpu_tree(node):
    """Every tensor of a nested dict/list on the CPU (for comparing across devices)."""
    if isinstance(node, torch.Tensor):
        return node.detach().cpu()
    if isinstance(node, dict):
        return {k: cpu_tree(v) for k, v in node.items()}
    if isinstance(node, list):
        return [cpu_tree(v) for v in node]
    return node


@pytest.mark.parametrize("name", sorted(ALGOS))
def test_every_algo_trains_on_the_device_deterministically_and_resumes_exactly(name, tmp_path):
    runner = Runner(on(name), tmp_path / "a")
    result = runner.run()
    want = torch.device(DEVICE).type
    assert device_types(runner.algo.policy) == {want}
    assert result["episodes"] == 2 and torch.isfinite(torch.tensor(result["mean_reward"]))
    straight = weights(tmp_path / "a")
    Runner(on(name), tmp_path / "b").run()
    assert same(straight, weights(tmp_path / "b")), "same seed on the device, different weights"
    assert same(straight, resumed_halfway(tmp_path / "a", tmp_path / "r")), \
        "resumed run ended elsewhere"


@pytest.mark.parametrize("name", sorted(ALGOS))
def test_a_device_checkpoint_rebuilds_and_evaluates_on_the_cpu(name, tmp_path):
    runner = Runner(on(name), tmp_path)
    runner.run()
    path = tmp_path / "checkpoints" / "final.pt"
    payload = checkpoint.load(path)
    rebuilt = build_agent(to_train_config(payload["config"]), runner.eval_env, payload, path,
                          "cpu")
    assert device_types(rebuilt.policy) == {"cpu"}
    trained = cpu_tree(runner.algo.policy.state_dict())
    for key, tensor in rebuilt.policy.state_dict().items():
        assert torch.equal(tensor, trained[key]), key
    for device in ("cpu", DEVICE):
        scores = evaluate(path, episodes=2, num_envs=2, device=device, write=False)
        assert scores["episodes"] == 2, device


@pytest.mark.parametrize("name", ["ppo", "sac", "dqn"])
def test_a_run_moves_between_cpu_and_the_device_on_resume(name, tmp_path):
    """A CPU run resumed with device=<gpu>, and back: the optimizer state and the replay follow
    the weights, and the run finishes its budget with finite weights."""
    cpu_half = tiny(name)  # on the CPU
    Runner(cpu_half, tmp_path / "cpu").run()
    first = sorted((tmp_path / "cpu" / "checkpoints").glob("step_*.pt"))[0]
    payload = checkpoint.load(first)
    moved = to_train_config({**payload["config"], "device": DEVICE})
    runner = Runner(moved, tmp_path / "to_device", resume_from=payload)
    runner.run()
    assert device_types(runner.algo.policy) == {torch.device(DEVICE).type}
    there = weights(tmp_path / "to_device")
    assert all(torch.isfinite(t).all() for t in there.values() if t.is_floating_point())
    back = checkpoint.load(sorted((tmp_path / "to_device" / "checkpoints").glob("step_*.pt"))[-1])
    cpu_again = to_train_config({**back["config"], "device": "cpu"})
    Runner(cpu_again, tmp_path / "back", resume_from=back).run()
    assert (tmp_path / "back" / "checkpoints" / "final.pt").is_file()


@pytest.mark.parametrize("name", ["ppo", "sac"])
def test_gsde_on_the_device_resumes_exactly(name, tmp_path):
    extra = {"ppo": ("env=Pendulum-v1", "algo.use_sde=true", "algo.sde_sample_freq=3"),
             "sac": ("algo.use_sde=true", "algo.sde_sample_freq=5")}[name]
    Runner(on(name, 0, *extra), tmp_path / "a").run()
    straight = weights(tmp_path / "a")
    assert same(straight, resumed_halfway(tmp_path / "a", tmp_path / "r"))


@pytest.mark.parametrize("name", ["ppo", "sac", "dqn"])
def test_a_seed_batch_trains_on_the_device(name, tmp_path):
    from rltrain.seed_batch.runner import SeedRunner

    cfg = to_train_config({**_plain(on(name)), "num_seeds": 3})
    batch = SeedRunner(cfg, tmp_path / "batch")
    batch.run()
    finals = sorted(tmp_path.glob("batch/**/checkpoints/final.pt"))
    assert len(finals) == 3, sorted(str(p) for p in tmp_path.rglob("final.pt"))
    agents = [weights(p.parent.parent) for p in finals]
    assert not same(agents[0], agents[1])  # three seeds, three agents
    for agent in agents:
        assert all(torch.isfinite(t).all() for t in agent.values() if t.is_floating_point())


@pytest.mark.orders
@pytest.mark.parametrize("algo,env_id,budget,updates,rel,extra", [
    ("ppo", "CartPole-v1", 5 * 32 * 8, 5, 1e-4, []),
    ("dqn", "CartPole-v1", 1700, 3, 1e-4, []),
    ("sac", "Pendulum-v1", 1000 + 49, 50, 1e-4, []),
    ("sac", "Pendulum-v1", 1000 + 49, 50, 1e-4,
     ["algo.lr_decay_steps=${total_timesteps}", "algo.actor_lr=2e-3"]),
    ("td3", "Pendulum-v1", 1000 + 49, 50, 1e-4, []),
    ("ppo_lstm", "CartPoleNoVel-v1", 3 * 32 * 8, 3, 0.0, []),
], ids=["ppo", "dqn", "sac", "sac-lr-decay", "td3", "ppo_lstm"])
def test_a_seed_in_a_device_batch_matches_its_single_device_run(tmp_path, algo, env_id, budget,
                                                                updates, rel, extra):
    """Each seed draws from a generator on the device holding what its single run's device
    generator holds (tests/seed_batch/test_equivalence.py on the CPU): metric by metric, to the
    rounding of batched sums (stacked) or exactly (seed by seed: ppo_lstm); with a decaying
    learning rate too (the batch's rates set on the device's optimizers)."""
    from tests.seed_batch.helpers import assert_batch_matches_single_runs

    cfg = compose_train_config([
        f"algo={algo}", f"env={env_id}", "num_seeds=3", "seed=5", f"total_timesteps={budget}",
        f"device={DEVICE}", "eval.freq=0", "eval.episodes=1", "logger=none", "progress=off",
        *extra])
    assert_batch_matches_single_runs(cfg, tmp_path, updates, rel=rel)


def _plain(cfg) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)


QUIET = ["eval.freq=0", "eval.episodes=2", "eval.num_envs=2", "logger=none", "progress=off",
         "checkpoint.freq=0"]


@pytest.mark.parametrize("algo,env", [("ppo", "CartPole-v1"), ("sac", "Pendulum-v1")])
def test_the_native_torch_envs_step_on_the_device(algo, env, tmp_path):
    extra = (["algo.n_steps=16", "algo.batch_size=256", "algo.n_epochs=1"] if algo == "ppo" else
             ["algo.learning_starts=256", "algo.batch_size=64", "algo.buffer_size=4096"])
    cfg = compose_train_config([f"algo={algo}", f"env={env}", "env.backend=torch",
                                "env.num_envs=64", f"device={DEVICE}", "total_timesteps=2048",
                                "algo.hidden_sizes=[32]", *extra, *QUIET])
    runner = Runner(cfg, tmp_path)
    obs = []
    runner.add_callback("post_iteration", lambda state: obs.append(runner.ctx.obs))
    result = runner.run()
    assert obs and {o.device.type for o in obs} == {torch.device(DEVICE).type}
    assert result["episodes"] == 2 and torch.isfinite(torch.tensor(result["mean_reward"]))


def test_pixels_stay_uint8_into_the_network_on_the_device(tmp_path):
    from rltrain.nets.encoder import NatureCNN
    from tests.e2e.test_networks import PIXELS, TRAINERS

    for algo in ("ppo", "dqn"):
        seen: set = set()
        cfg = compose_train_config([*TRAINERS[algo], *PIXELS, f"device={DEVICE}"])
        runner = Runner(cfg, tmp_path / algo)
        cnns = [m for m in runner.algo.policy.modules() if isinstance(m, NatureCNN)]
        assert cnns, f"{algo}: no CNN encoder"
        for cnn in cnns:
            cnn.register_forward_pre_hook(
                lambda module, inputs, seen=seen: seen.add((inputs[0].dtype,
                                                            inputs[0].device.type)))
        assert runner.run()["episodes"] == 2
        assert seen == {(torch.uint8, torch.device(DEVICE).type)}, (algo, seen)


def test_atari_dqn_keeps_its_frame_replay_on_the_device_and_resumes(tmp_path, monkeypatch):
    pytest.importorskip("ale_py")
    import rltrain.runner.setup as setup
    from tests.e2e.test_atari_dqn import RUN

    made: list = []
    make_replay = setup.make_replay
    monkeypatch.setattr(setup, "make_replay",
                        lambda *a, **k: made.append(make_replay(*a, **k)) or made[-1])
    train([*RUN, "total_timesteps=400", f"device={DEVICE}"], run_dir=tmp_path / "a")
    replay = made[0]
    assert replay.frames.dtype == torch.uint8
    assert replay.frames.device.type == torch.device(DEVICE).type
    batch = replay.sample(32)
    assert batch.obs.dtype == torch.uint8 and batch.obs.device.type == replay.frames.device.type
    path = tmp_path / "a" / "checkpoints" / "latest.pt"
    again = [a for a in RUN if not a.startswith("tuned=")]
    train([*again, "total_timesteps=440", f"resume={path}", "device=cpu"],
          run_dir=tmp_path / "cpu")
    assert made[1].frames.device.type == "cpu" and made[1].size >= replay.size


@pytest.mark.parametrize("extra", [("env=CartPoleNoVel-v1", "algo.recurrent=lstm"),
                                   ("env=PendulumNoVel-v1", "algo.recurrent=gru",
                                    "algo.bptt_len=8")], ids=["lstm", "gru"])
def test_recurrent_ppo_on_the_device_resumes_exactly(extra, tmp_path):
    cfg = compose_train_config(["algo=ppo", *extra, "env.num_envs=2", "algo.n_steps=16",
                                "algo.batch_size=16", "algo.n_epochs=2", "algo.hidden_sizes=[16]",
                                "algo.recurrent_hidden_size=8", "total_timesteps=96",
                                "checkpoint.freq=48", f"device={DEVICE}",
                                *[q for q in QUIET if not q.startswith("checkpoint")]])
    Runner(cfg, tmp_path / "a").run()
    straight = weights(tmp_path / "a")
    assert same(straight, resumed_halfway(tmp_path / "a", tmp_path / "r"))


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_masked_actions_hold_on_the_device(algo, tmp_path):
    from tests.algos.test_masks import run_on

    result = run_on("PickTarget", algo, tmp_path, device=DEVICE)  # the env raises on a bad action
    assert result["episodes"] == 4


def test_cli_trains_evaluates_and_exports_a_device_run(tmp_path, monkeypatch, capfd):
    pytest.importorskip("onnxruntime")
    run = tmp_path / "run"
    done = run_cli(["algo=sac", "env=Pendulum-v1", f"device={DEVICE}", "total_timesteps=300",
                    "algo.learning_starts=100", "algo.batch_size=32", "algo.hidden_sizes=[32]",
                    "eval.episodes=2", "eval.num_envs=2", f"hydra.run.dir={run}"],
                   tmp_path, monkeypatch, capfd)
    assert done.rc == 0, done.describe()
    assert "Traceback" not in done.out + done.err
    ckpt = run / "checkpoints" / "final.pt"
    for device in ("cpu", DEVICE):
        ev = run_cli(["eval", f"ckpt={ckpt}", "episodes=2", f"device={device}"], tmp_path,
                     monkeypatch, capfd)
        assert ev.rc == 0, ev.describe()
    ex = run_cli(["export", f"ckpt={ckpt}", "format=onnx"], tmp_path, monkeypatch, capfd)
    assert ex.rc == 0 and "matches the torch policy" in ex.out, ex.describe()


@pytest.mark.skipif(not DEVICE.startswith("cuda") or torch.cuda.device_count() < 2,
                    reason="torchrun over NCCL needs two CUDA GPUs (one rank each)")
def test_torchrun_with_device_cuda_trains_over_nccl(tmp_path):
    """Two ranks, cuda:0 and cuda:1 (one rank alone is a plain run: no process group)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH",
                                                                                   "")]),
           "OMP_NUM_THREADS": "1", "RLTRAIN_DIST_TIMEOUT": "60"}
    args = ["algo=ppo", "env=CartPole-v1", "env.num_envs=2", "algo.n_steps=32",
            "algo.batch_size=32", "algo.n_epochs=2", "algo.hidden_sizes=[16]", "eval.episodes=2",
            "eval.num_envs=2", "logger=none", "progress=off", "total_timesteps=256",
            "device=cuda", "hydra.run.dir=run"]
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc_per_node=2", "-m", "rltrain", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    saved = checkpoint.load(tmp_path / "run" / "checkpoints" / "final.pt")
    assert saved["counters"]["global_step"] >= 256


@pytest.mark.orders
@pytest.mark.parametrize("kl_stop", [False, True], ids=["in-step", "per-seed"])
def test_seed_adam_on_the_device_is_each_seeds_own_adam(kl_stop, monkeypatch):
    """The batch's Adam over stacked parameters on the device, against each seed's fused torch
    Adam there, within rounding (the CPU's vectorized kernel rounds a seed's slice of a stacked
    tensor differently in the last bit): while every seed steps (the fused kernel over the
    stacked tensors), and when seed 1 sits out two steps (a KL stop: the fused kernel over each
    active seed's slices with its own step count on the device; Linear weights laid out as
    `nets/seeded.py` lays them out). The foreach fallback is barred: it must not stand in unseen."""
    from rltrain.algos import seed_optim
    from tests.seed_batch.test_optim import _nets, _stacked, _step_once

    def no_fallback(opt, active):
        raise AssertionError("the seed batch's Adam fell back to its foreach path")

    monkeypatch.setattr(seed_optim, "_seed_foreach", no_fallback)

    nets = [net.to(DEVICE) for net in _nets(3)]
    opts = [torch.optim.Adam(n.parameters(), lr=1e-2, eps=1e-5, fused=True) for n in nets]
    stacked = _stacked(nets, transposed=kl_stop)
    seed_adam = seed_optim.stacked_optimizer(stacked, opts)
    gen = torch.Generator().manual_seed(1)
    for step in range(5):
        active = [True, not (kl_stop and step in (2, 3)), True]
        _step_once(stacked, seed_adam, nets, opts, active,
                   [torch.randn(p.shape, generator=gen).to(DEVICE) for p in stacked])
    for k, net in enumerate(nets):
        for p, s in zip(net.parameters(), stacked, strict=True):
            torch.testing.assert_close(s[k].detach(), p.detach(), rtol=1e-5, atol=1e-6)
    assert seed_adam.steps.tolist() == ([5.0, 3.0, 5.0] if kl_stop else [5.0] * 3)
