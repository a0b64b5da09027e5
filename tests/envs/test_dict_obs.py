"""Dict and Tuple observations for every algorithm: a few hundred steps of training, eval, a
checkpoint round trip and an exact resume; one tensor per entry in storage (images uint8,
categorical entries int64); encoders per entry and `algo.net.encoders`; per-entry observation
normalization; export parity with one named input per entry; the refusals."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rltrain.checkpoint import format as checkpoint
from rltrain.config.compose import compose_train_config
from rltrain.config.registry import ALGOS
from rltrain.config.validation import to_train_config
from rltrain.envs.trust import NamedCode
from rltrain.envs.vec_env import GymVecEnv
from rltrain.errors import UserError
from rltrain.evaluation.command import evaluate
from rltrain.export.command import export_policy
from rltrain.nets.encoder import DictEncoder, NatureCNN, OneHot, describe
from rltrain.nets.spec import resolve_nets
from rltrain.runner.runner import Runner
from tests.envs.dict_envs import CueTask
from tests.envs.small_runs import final_weights, small_run

TRUSTED = NamedCode(frozenset({"tests.envs.dict_envs"}))  # as env.import= on the command line
FORMS = {"dict": ["+env.kwargs.nested=true"], "tuple": ["+env.kwargs.tuple=true"]}
KEYS = {"dict": ["body.pos", "cue"], "tuple": ["0", "1"]}


def overrides(algo: str, steps: int = 192, *extra: str) -> list[str]:
    return small_run(algo, "tests.envs.dict_envs:CueTask", steps, *extra)


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("algo", [*sorted(ALGOS), "ppo_lstm"])
def test_every_algo_trains_evaluates_reloads_and_resumes_on_dict_and_tuple_obs(algo, form,
                                                                               tmp_path):
    cfg = compose_train_config(overrides(algo, 192, *FORMS[form]))
    runner = Runner(cfg, tmp_path / "a")
    assert [e.key for e in runner.env.spec.obs_entries] == KEYS[form]
    result = runner.run()
    assert result["episodes"] == 2 and np.isfinite(result["mean_reward"])
    if runner.replay is not None:  # one tensor per entry, each in its own dtype
        cue, pos = ("cue", "body.pos") if form == "dict" else ("0", "1")
        assert runner.replay.obs[cue].dtype == torch.int64 and runner.replay.obs[cue].shape[1:] == (1,)
        assert runner.replay.next_obs[pos].dtype == torch.float32
        assert runner.replay.obs[pos].shape == (500, 2)
    again = evaluate(tmp_path / "a", episodes=2, named=TRUSTED)
    assert again["episodes"] == 2 and np.isfinite(again["mean_reward"])
    half = checkpoint.load(sorted((tmp_path / "a" / "checkpoints").glob("step_*.pt"))[0])
    assert isinstance(half["loop"]["obs"], dict)
    Runner(to_train_config(half["config"]), tmp_path / "r", resume_from=half).run()
    a, r = final_weights(tmp_path / "a"), final_weights(tmp_path / "r")
    assert a.keys() == r.keys() and all(torch.equal(a[k], r[k]) for k in a)


def test_the_adapter_gives_each_entry_its_dtype_and_the_true_final_observation():
    venv = gym.vector.SyncVectorEnv([lambda: CueTask(length=1, nested=True, image=True)] * 2,
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    env = GymVecEnv(venv)
    obs = env.reset(seed=0)
    assert sorted(obs) == ["body.pos", "camera", "cue"]
    assert obs["camera"].dtype == torch.uint8 and obs["camera"].shape == (2, 36, 36, 3)
    assert obs["cue"].dtype == torch.int64 and obs["body.pos"].dtype == torch.float32
    res = env.step(torch.zeros(2, dtype=torch.long))  # length 1: both rows end and reset
    assert res.truncated.all()
    shown = torch.as_tensor(np.stack([e.last_step_pos for e in venv.envs]))
    assert torch.equal(res.final_obs["body.pos"], shown)  # the step's own observation ...
    assert torch.equal(res.obs["body.pos"], torch.as_tensor(np.stack([e.pos for e in venv.envs])))
    assert not torch.equal(res.final_obs["body.pos"], res.obs["body.pos"])  # ... not the reset's
    assert res.final_obs["camera"].dtype == torch.uint8


def test_a_space_rltrain_cannot_encode_is_refused_naming_its_entry():
    space = gym.spaces.Dict({"ok": gym.spaces.Discrete(3), "note": gym.spaces.Text(5)})
    venv = gym.vector.SyncVectorEnv([lambda: _Fixed(space)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    with pytest.raises(UserError, match=r"entry 'note'.*Dict / Tuple of these"):
        GymVecEnv(venv)


class _Fixed(gym.Env):
    def __init__(self, space):
        self.observation_space, self.action_space = space, gym.spaces.Discrete(2)


def test_entries_get_cnn_one_hot_or_flatten_and_net_encoders_picks_per_key(tmp_path):
    cfg = compose_train_config(overrides("ppo", 64, "+env.kwargs.image=true"))
    runner = Runner(cfg, tmp_path / "a")
    encoder = runner.algo.policy.actor_encoder
    assert isinstance(encoder, DictEncoder)
    assert isinstance(encoder.encoders["camera"], NatureCNN)
    assert isinstance(encoder.encoders["cue"], OneHot) and "pos" not in encoder.encoders
    assert encoder.features == 512 + 2 + 2
    lines = describe(resolve_nets(cfg.algo, runner.env.spec).actor)
    assert lines == ["camera [36, 36, 3] uint8 -> cnn (512 features)",
                     "cue [1] categorical -> one-hot (2 features)", "pos [2] -> flatten (2 features)"]
    flat = compose_train_config(overrides("ppo", 64, "+env.kwargs.image=true",
                                          "+algo.net.encoders.camera=flatten"))
    runner = Runner(flat, tmp_path / "b")
    assert "camera" not in runner.algo.policy.actor_encoder.encoders
    assert runner.algo.policy.actor_encoder.features == 36 * 36 * 3 + 2 + 2
    assert runner.run()["episodes"] == 2


@pytest.mark.parametrize("extra, message", [
    (["+algo.net.encoders.nope=flatten"], r"net.encoders names nope.*entries: cue, pos"),
    (["+algo.net.encoders.pos=cnn"], r"net.encoders.pos=cnn needs an image entry"),
    (["algo.net.encoder=cnn"], r"net.encoder=cnn \(for every entry.*entry 'cue' is categorical"),
    (["+algo.net.encoders.pos=mlp"], r"net.encoders.pos='mlp': choose one of auto, cnn, flatten"),
    (["env.frame_stack=2"], r"env.frame_stack=2 stacks vector observations.*Dict / Tuple"),
])
def test_bad_encoder_and_wrapper_choices_are_one_line_errors(extra, message, tmp_path):
    with pytest.raises(UserError, match=message):
        Runner(compose_train_config(overrides("ppo", 64, *extra)), tmp_path)


def test_net_encoders_on_an_env_with_one_observation_tensor_is_refused(tmp_path):
    with pytest.raises(UserError, match="use net.encoder"):
        Runner(compose_train_config(["algo=ppo", "env=CartPole-v1", "logger=none",
                                     "+algo.net.encoders.x=flatten"]), tmp_path)


def test_normalize_obs_normalizes_float_vector_entries_only_and_resumes_their_statistics(
        tmp_path):
    cfg = compose_train_config(overrides("ppo", 192, "+env.kwargs.image=true",
                                         "+env.kwargs.scale=50.0", "env.normalize_obs=true"))
    runner = Runner(cfg, tmp_path / "a")
    obs = runner.env.reset(seed=0)
    assert obs["cue"].dtype == torch.int64 and obs["camera"].dtype == torch.uint8  # untouched
    assert obs["pos"].abs().max() <= 10.0  # normalized (the raw values reach 50)
    runner.run()
    saved = checkpoint.load(tmp_path / "a" / "checkpoints" / "final.pt")
    assert sorted(saved["env"]["obs_rms"]) == ["pos"]
    assert float(saved["env"]["obs_rms"]["pos"]["var"].mean()) > 100  # uniform on [-50, 50]
    half = checkpoint.load(sorted((tmp_path / "a" / "checkpoints").glob("step_*.pt"))[0])
    Runner(to_train_config(half["config"]), tmp_path / "r", resume_from=half).run()
    a, r = final_weights(tmp_path / "a"), final_weights(tmp_path / "r")
    assert all(torch.equal(a[k], r[k]) for k in a)


def test_normalize_obs_with_no_float_entry_is_refused(tmp_path):
    with pytest.raises(UserError, match="no float vector entry to normalize"):
        Runner(compose_train_config(overrides("ppo", 64, "+env.kwargs.cue_only=true",
                                              "env.normalize_obs=true")), tmp_path)


def test_a_checkpoint_of_a_dict_env_does_not_resume_into_a_box_env(tmp_path):
    cfg = compose_train_config(overrides("ppo", 64))
    Runner(cfg, tmp_path / "a").run()
    payload = checkpoint.load(tmp_path / "a" / "checkpoints" / "final.pt")
    payload["config"]["env"]["kwargs"] = {"tuple": True}  # same entries, other keys
    with pytest.raises(UserError, match=r"loop.obs.0 does not fit this env: this env has that "
                                        r"entry, the checkpoint does not"):
        Runner(to_train_config(payload["config"]), tmp_path / "r", resume_from=payload).run()


@pytest.mark.parametrize("algo, fmt", [("ppo", "onnx"), ("sac", "onnx"), ("dqn", "torchscript")])
def test_export_of_a_dict_policy_has_one_input_per_entry_and_matches_torch(algo, fmt, tmp_path):
    pytest.importorskip("onnxruntime")
    cfg = compose_train_config(overrides(algo, 128, "+env.kwargs.nested=true",
                                         "+env.kwargs.scale=5.0", "env.normalize_obs=true"))
    Runner(cfg, tmp_path / "a").run()
    result = export_policy(tmp_path / "a" / "checkpoints" / "final.pt", fmt, check_samples=500,
                           named=TRUSTED)
    assert result["ok"] and result["max_abs_diff"] <= 1e-5, result
    assert result["metadata"]["inputs"] == ["obs.body.pos", "obs.cue"]
    assert result["obs_shape"] == {"body.pos": [2], "cue": [1]}
    assert result["metadata"]["obs_nvec"] == {"cue": [2]}
    if fmt == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(result["path"], providers=["CPUExecutionProvider"])
        assert [i.name for i in session.get_inputs()] == ["obs.body.pos", "obs.cue"]


def test_eval_records_videos_of_a_dict_policy_with_normalized_entries(tmp_path):
    pytest.importorskip("av")
    cfg = compose_train_config(overrides("ppo", 64, "+env.kwargs.scale=5.0",
                                         "env.normalize_obs=true"))
    Runner(cfg, tmp_path / "a").run()
    result = evaluate(tmp_path / "a", episodes=2, num_envs=2, video=True, video_episodes=1,
                      named=TRUSTED)
    assert result["episodes"] == 2 and len(result["videos"]) == 1
