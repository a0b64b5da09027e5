"""The Stable-Baselines3 side of the speed benchmark: RL-Zoo's hyperparameters, timed to threshold.

`run_sb3` builds what `python -m rl_zoo3.train --algo ALGO --env ENV --seed SEED` builds (the same
hyperparameters, `make_vec_env` with `n_envs` DummyVecEnv copies seeded `seed + i`, `VecNormalize`
when the entry asks for it, action noise, linear schedules, `model.learn(n_timesteps)`) and times
it with the protocol of `rltrain_side.time_to_threshold`:

- evaluation at iteration ends (after the update; for SB3 the next `on_rollout_start`) once
  `num_timesteps` has crossed a multiple of `eval_every` since the last one, plus a final one;
- `eval_episodes` deterministic episodes on a separate env; their time is off the clock;
- the clock starts when `learn()` is called (env and model construction are off it).

`learn()` always gets RL-Zoo's `n_timesteps`, so the linear schedules (PPO CartPole's learning
rate and clip range, DQN's exploration) decay exactly as in RL-Zoo; `max_steps` and
`budget="until_solved_plus"` only stop training early.

Not reproduced: RL-Zoo's `PatchedTimeLimit` (it only adds `info["TimeLimit.truncated"]`, which
SB3's DummyVecEnv sets from `truncated` anyway), its log folders, Monitor CSV files and
checkpoints. RL-Zoo's EvalCallback evaluates on 1 env inside a rollout; here `eval_envs` (default
5, like the rltrain side's `eval.num_envs=5`) envs at iteration ends. `device` is "cpu" (RL-Zoo
says "auto"). Importable without SB3: it is imported inside the functions.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from typing import Any

from rltrain_side import summarize_curve  # the same "solved" rule for both sides

# RL-Zoo3's published hyperparameters, transcribed verbatim from the rl_zoo3 2.9.2 wheel on PyPI
# (rl_zoo3/hyperparams/{ppo,sac,td3,dqn}.yml, the release matching SB3 2.9.2). The PPO, SAC and
# DQN entries equal DLR-RM/rl-baselines3-zoo hyperparams/ppo.yml @208b6fdf, sac.yml @c94924e5
# and dqn.yml @ce95481b; td3.yml @a02f4fbf is older (Pendulum-v0, train_freq [1, "episode"],
# gradient_steps -1) than the wheel's Pendulum-v1 entry (train_freq 1, gradient_steps 1).
# Only `policy_kwargs` is written as the dict that RL-Zoo `eval`s from its string. Everything
# not listed is the SB3 default.
RL_ZOO: dict[tuple[str, str], dict[str, Any]] = {
    ("ppo", "Pendulum-v1"): {  # "# Tuned"
        "n_envs": 4, "n_timesteps": 1e5, "policy": "MlpPolicy", "n_steps": 1024,
        "gae_lambda": 0.95, "gamma": 0.9, "n_epochs": 10, "ent_coef": 0.0,
        "learning_rate": 1e-3, "clip_range": 0.2, "use_sde": True, "sde_sample_freq": 4,
    },
    ("ppo", "CartPole-v1"): {  # "# Tuned"
        "n_envs": 8, "n_timesteps": 1e5, "policy": "MlpPolicy", "n_steps": 32, "batch_size": 256,
        "gae_lambda": 0.8, "gamma": 0.98, "n_epochs": 20, "ent_coef": 0.0,
        "learning_rate": "lin_0.001", "clip_range": "lin_0.2",
    },
    ("sac", "Pendulum-v1"): {
        "n_timesteps": 20000, "policy": "MlpPolicy", "learning_rate": 1e-3,
    },
    ("td3", "Pendulum-v1"): {
        "n_timesteps": 20000, "policy": "MlpPolicy", "gamma": 0.98, "buffer_size": 200000,
        "learning_starts": 10000, "noise_type": "normal", "noise_std": 0.1, "gradient_steps": 1,
        "train_freq": 1, "learning_rate": 1e-3, "policy_kwargs": {"net_arch": [400, 300]},
    },
    ("dqn", "CartPole-v1"): {  # "# Almost Tuned"
        "n_timesteps": 5e4, "policy": "MlpPolicy", "learning_rate": 2.3e-3, "batch_size": 64,
        "buffer_size": 100000, "learning_starts": 1000, "gamma": 0.99,
        "target_update_interval": 10, "train_freq": 256, "gradient_steps": 128,
        "exploration_fraction": 0.16, "exploration_final_eps": 0.04,
        "policy_kwargs": {"net_arch": [256, 256]},
    },
    # issue 55: SB3-contrib's algorithms with RL-Zoo's entries (hyperparams/qrdqn.yml, trpo.yml)
    ("qrdqn", "CartPole-v1"): {
        "n_timesteps": 5e4, "policy": "MlpPolicy", "learning_rate": 2.3e-3, "batch_size": 64,
        "buffer_size": 100000, "learning_starts": 1000, "gamma": 0.99,
        "target_update_interval": 10, "train_freq": 256, "gradient_steps": 128,
        "exploration_fraction": 0.16, "exploration_final_eps": 0.04,
        "policy_kwargs": {"net_arch": [256, 256], "n_quantiles": 10},
    },
    ("qrdqn", "LunarLander-v3"): {  # LunarLander-v2
        "n_timesteps": 1e5, "policy": "MlpPolicy", "learning_rate": "lin_1.5e-3",
        "batch_size": 128, "buffer_size": 100000, "learning_starts": 10000, "gamma": 0.995,
        "target_update_interval": 1, "train_freq": 256, "gradient_steps": -1,
        "exploration_fraction": 0.24, "exploration_final_eps": 0.18,
        "policy_kwargs": {"net_arch": [256, 256], "n_quantiles": 170},
    },
    # sac.yml / tqc.yml "HER Robotics GoalEnvs", FetchReach-v1 (gymnasium-robotics: v4)
    ("sac", "FetchReach-v4"): {
        "n_timesteps": 2e4, "policy": "MultiInputPolicy", "buffer_size": 1000000,
        "ent_coef": "auto", "batch_size": 256, "gamma": 0.95, "learning_rate": 1e-3,
        "learning_starts": 1000, "normalize": True, "replay_buffer_class": "HerReplayBuffer",
        "replay_buffer_kwargs": {"goal_selection_strategy": "future", "n_sampled_goal": 4},
        "policy_kwargs": {"net_arch": [64, 64], "n_critics": 1},
    },
    ("tqc", "Hopper-v5"): {  # tqc.yml Hopper-v4: <<: *mujoco-defaults
        "n_timesteps": 1e6, "policy": "MlpPolicy", "learning_starts": 10000,
        "top_quantiles_to_drop_per_net": 5,
    },
    ("tqc", "HalfCheetah-v5"): {  # tqc.yml HalfCheetah-v4: *mujoco-defaults
        "n_timesteps": 1e6, "policy": "MlpPolicy", "learning_starts": 10000,
    },
    ("ars", "Swimmer-v5"): {  # Swimmer-v3, "Params closest to original paper"
        "n_timesteps": 2e6, "policy": "LinearPolicy", "learning_rate": 0.02, "delta_std": 0.01,
        "n_delta": 1, "n_top": 1, "alive_bonus_offset": 0,
    },
    ("ars", "Pendulum-v1"): {  # "# Tuned"
        "n_envs": 1, "n_timesteps": 2e6, "policy": "MlpPolicy",
        "normalize": "dict(norm_obs=True, norm_reward=False)", "learning_rate": 0.018,
        "n_delta": 4, "n_top": 1, "delta_std": 0.1, "zero_policy": False,
        "policy_kwargs": {"net_arch": [16]},
    },
    ("trpo", "Hopper-v5"): {  # Hopper-v4: <<: *mujoco-defaults (= &pybullet-defaults, 1M)
        "normalize": True, "n_envs": 2, "n_timesteps": 1e6, "policy": "MlpPolicy",
        "batch_size": 128, "n_steps": 1024, "gamma": 0.99, "gae_lambda": 0.95,
        "sub_sampling_factor": 1, "cg_max_steps": 25, "cg_damping": 0.1,
        "n_critic_updates": 20, "learning_rate": 1e-3,
    },
    ("trpo", "Pendulum-v1"): {  # "# Tuned"
        "n_envs": 2, "n_timesteps": 1e5, "policy": "MlpPolicy", "gamma": 0.9, "n_steps": 1024,
        "n_critic_updates": 15, "sub_sampling_factor": 1, "use_sde": True, "sde_sample_freq": 4,
        "learning_rate": 1e-3,
    },
    # The quality benchmark's rows (benchmarks/quality.py). RL-Zoo has MuJoCo entries for -v4
    # only; the -v5 rows use them (same dynamics, observations and rewards up to v5's fixes).
    ("sac", "HalfCheetah-v5"): {  # HalfCheetah-v4: &mujoco-defaults
        "n_timesteps": 1e6, "policy": "MlpPolicy", "learning_starts": 10000,
    },
    ("sac", "Hopper-v5"): {  # Hopper-v4: <<: *mujoco-defaults
        "n_timesteps": 1e6, "policy": "MlpPolicy", "learning_starts": 10000,
    },
    ("ppo", "HalfCheetah-v5"): {  # HalfCheetah-v4
        "normalize": True, "n_envs": 1, "policy": "MlpPolicy", "n_timesteps": 1e6,
        "batch_size": 64, "n_steps": 512, "gamma": 0.98, "learning_rate": 2.0633e-05,
        "ent_coef": 0.000401762, "clip_range": 0.1, "n_epochs": 20, "gae_lambda": 0.92,
        "max_grad_norm": 0.8, "vf_coef": 0.58096,
        "policy_kwargs": {"log_std_init": -2, "ortho_init": False, "activation_fn": "ReLU",
                          "net_arch": {"pi": [256, 256], "vf": [256, 256]}},
    },
    ("ppo", "LunarLander-v3"): {
        "n_envs": 16, "n_timesteps": 1e6, "policy": "MlpPolicy", "n_steps": 1024,
        "batch_size": 64, "gae_lambda": 0.98, "gamma": 0.999, "n_epochs": 4, "ent_coef": 0.01,
    },
    ("dqn", "LunarLander-v3"): {
        "n_timesteps": 1e5, "policy": "MlpPolicy", "learning_rate": 6.3e-4, "batch_size": 128,
        "buffer_size": 50000, "learning_starts": 0, "gamma": 0.99,
        "target_update_interval": 250, "train_freq": 4, "gradient_steps": -1,
        "exploration_fraction": 0.12, "exploration_final_eps": 0.1,
        "policy_kwargs": {"net_arch": [256, 256]},
    },
    ("sac", "LunarLanderContinuous-v3"): {
        "n_timesteps": 5e5, "policy": "MlpPolicy", "batch_size": 256,
        "learning_rate": "lin_7.3e-4", "buffer_size": 1000000, "ent_coef": "auto",
        "gamma": 0.99, "tau": 0.01, "train_freq": 1, "gradient_steps": 1,
        "learning_starts": 10000, "policy_kwargs": {"net_arch": [400, 300]},
    },
    ("sac", "MountainCarContinuous-v0"): {
        "n_timesteps": 50000, "policy": "MlpPolicy", "learning_rate": 3e-4,
        "buffer_size": 50000, "batch_size": 512, "ent_coef": 0.1, "train_freq": 32,
        "gradient_steps": 32, "gamma": 0.9999, "tau": 0.01, "learning_starts": 0,
        "use_sde": True,
        "policy_kwargs": {"log_std_init": -3.67, "net_arch": [64, 64], "use_expln": True},
    },
    ("ppo", "MountainCarContinuous-v0"): {
        "normalize": True, "n_envs": 1, "policy": "MlpPolicy", "n_timesteps": 20000,
        "batch_size": 256, "n_steps": 8, "gamma": 0.9999, "learning_rate": 7.77e-05,
        "ent_coef": 0.00429, "clip_range": 0.1, "n_epochs": 10, "gae_lambda": 0.9,
        "max_grad_norm": 5, "vf_coef": 0.19, "use_sde": True,
        "policy_kwargs": {"log_std_init": -3.29, "ortho_init": False},
    },
    # issue 15: RL-Zoo's ppo_lstm entries (sb3-contrib RecurrentPPO; hyperparams/ppo_lstm.yml),
    # on rltrain's registration of the NoVel ids (velocities zeroed, as RL-Zoo's wrapper does)
    ("ppo_lstm", "CartPoleNoVel-v1"): {
        "n_envs": 8, "n_timesteps": 1e5, "policy": "MlpLstmPolicy", "n_steps": 32,
        "batch_size": 256, "gae_lambda": 0.8, "gamma": 0.98, "n_epochs": 20, "ent_coef": 0.0,
        "learning_rate": "lin_0.001", "clip_range": "lin_0.2",
        "normalize": "dict(norm_obs=True, norm_reward=False)",
        "policy_kwargs": {"ortho_init": False, "activation_fn": "ReLU", "lstm_hidden_size": 64,
                          "enable_critic_lstm": True, "net_arch": {"pi": [64], "vf": [64]}},
    },
    ("ppo_lstm", "PendulumNoVel-v1"): {
        "n_envs": 4, "n_timesteps": 1e5, "policy": "MlpLstmPolicy", "n_steps": 1024,
        "gae_lambda": 0.95, "gamma": 0.9, "n_epochs": 10, "ent_coef": 0.0,
        "learning_rate": 1e-3, "clip_range": 0.2, "use_sde": True, "sde_sample_freq": 4,
        "normalize": "dict(norm_obs=True, norm_reward=False)",
        "policy_kwargs": {"ortho_init": False, "activation_fn": "ReLU", "lstm_hidden_size": 64,
                          "enable_critic_lstm": True, "net_arch": {"pi": [64], "vf": [64]}},
    },
    ("ppo_lstm", "MountainCarContinuousNoVel-v0"): {
        "n_envs": 8, "n_timesteps": 3e5, "policy": "MlpLstmPolicy", "n_steps": 1024,
        "batch_size": 256, "gae_lambda": 0.9, "gamma": 0.9999, "learning_rate": 7.77e-05,
        "ent_coef": 0.00429, "clip_range": 0.1, "n_epochs": 10, "max_grad_norm": 5,
        "vf_coef": 0.19, "use_sde": True, "sde_sample_freq": 8,
        "normalize": "dict(norm_obs=True, norm_reward=False)",
        "policy_kwargs": {"log_std_init": 0.0, "ortho_init": False, "lstm_hidden_size": 32,
                          "enable_critic_lstm": True, "net_arch": {"pi": [64], "vf": [64]}},
    },
    ("dqn", "MountainCar-v0"): {
        "n_timesteps": 120000, "policy": "MlpPolicy", "learning_rate": 4e-3, "batch_size": 128,
        "buffer_size": 10000, "learning_starts": 1000, "gamma": 0.98,
        "target_update_interval": 600, "train_freq": 16, "gradient_steps": 8,
        "exploration_fraction": 0.2, "exploration_final_eps": 0.07,
        "policy_kwargs": {"net_arch": [256, 256]},
    },
    ("ppo", "ALE/Breakout-v5"): {  # the `atari` entry (every ALE game)
        "env_wrapper": ["stable_baselines3.common.atari_wrappers.AtariWrapper"],
        "frame_stack": 4, "policy": "CnnPolicy", "n_envs": 8, "n_steps": 128, "n_epochs": 4,
        "batch_size": 256, "n_timesteps": 1e7, "learning_rate": "lin_2.5e-4",
        "clip_range": "lin_0.1", "vf_coef": 0.5, "ent_coef": 0.01,
    },
    ("dqn", "ALE/Breakout-v5"): {  # the `atari` entry (every ALE game)
        "env_wrapper": ["stable_baselines3.common.atari_wrappers.AtariWrapper"],
        "frame_stack": 4, "policy": "CnnPolicy", "n_timesteps": 1e7, "buffer_size": 100000,
        "learning_rate": 1e-4, "batch_size": 32, "learning_starts": 100000,
        "target_update_interval": 1000, "train_freq": 4, "gradient_steps": 1,
        "exploration_fraction": 0.1, "exploration_final_eps": 0.01,
        "optimize_memory_usage": False,
    },
}
# SB3's AtariWrapper skips frames itself (MaxAndSkip, 4); ALE/*-v5 ids skip 4 by default, so the
# base env is made with frameskip=1 (what `*NoFrameskip-v4` was). Sticky actions (v5's 0.25) stay.
ATARI_ENV_KWARGS = {"frameskip": 1}

# Keys RL-Zoo consumes itself instead of passing them to the model constructor.
ZOO_ONLY = ("n_envs", "n_timesteps", "normalize", "noise_type", "noise_std", "frame_stack",
            "env_wrapper")
BUDGETS = ("full", "until_solved_plus")


CONTRIB = {"ppo_lstm": "RecurrentPPO", "qrdqn": "QRDQN", "trpo": "TRPO", "tqc": "TQC",
           "ars": "ARS"}
"""rltrain's algorithm name -> its SB3-contrib class (the reference of issue 15's and 55's rows)."""


SBX = {"sac": "SAC", "tqc": "TQC", "td3": "TD3", "ddpg": "DDPG", "dqn": "DQN", "ppo": "PPO",
       "crossq": "CrossQ"}
"""rltrain's algorithm name -> its SBX class (Stable-Baselines-Jax, `sbx-rl`, `make bench-sbx`'s
venv): the same constructor arguments as SB3's, so RL-Zoo's entries apply unchanged."""


def sb3_available() -> bool:
    """Whether stable-baselines3 can be imported (the `bench` extra)."""
    return importlib.util.find_spec("stable_baselines3") is not None


def require_sb3() -> None:
    """Raise a one-line `UserError` naming the pip extra when SB3 is missing."""
    if not sb3_available():
        from rltrain.errors import UserError

        raise UserError('the SB3 comparison needs stable-baselines3: pip install "rltrain[bench]"')


class LinearSchedule:
    """RL-Zoo's `lin_X`: X at the start of `learn()`, falling linearly to 0 at its end."""

    def __init__(self, initial: float) -> None:
        self.initial = float(initial)

    def __call__(self, progress_remaining: float) -> float:
        return progress_remaining * self.initial

    def __repr__(self) -> str:
        return f"LinearSchedule({self.initial})"


def model_kwargs(hp: dict[str, Any], n_actions: int | None) -> dict[str, Any]:
    """The constructor kwargs RL-Zoo derives from one hyperparameter entry."""
    kwargs = {k: v for k, v in hp.items() if k not in ZOO_ONLY}
    for key in ("learning_rate", "clip_range", "clip_range_vf"):
        if isinstance(kwargs.get(key), str):  # "lin_0.001"
            kwargs[key] = LinearSchedule(float(kwargs[key].split("_")[1]))
    if isinstance(kwargs.get("policy_kwargs", {}).get("activation_fn"), str):  # nn.ReLU in RL-Zoo
        from torch import nn

        kwargs["policy_kwargs"] = {**kwargs["policy_kwargs"],
                                   "activation_fn": getattr(nn, kwargs["policy_kwargs"]["activation_fn"])}
    if kwargs.get("replay_buffer_class") == "HerReplayBuffer":  # a class name in RL-Zoo's yaml
        from stable_baselines3 import HerReplayBuffer

        kwargs["replay_buffer_class"] = HerReplayBuffer
    if isinstance(kwargs.get("train_freq"), list):  # [1, "episode"]
        kwargs["train_freq"] = tuple(kwargs["train_freq"])
    if hp.get("noise_type"):
        import numpy as np
        from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise

        noise_cls = NormalActionNoise if "normal" in hp["noise_type"] else OrnsteinUhlenbeckActionNoise
        assert n_actions is not None, "action noise needs a Box action space"
        kwargs["action_noise"] = noise_cls(mean=np.zeros(n_actions),
                                           sigma=hp["noise_std"] * np.ones(n_actions))
    return kwargs


def make_envs(env_id: str, hp: dict[str, Any], n_envs: int, seed: int, training: bool) -> Any:
    """`make_vec_env` (DummyVecEnv + Monitor, env i seeded `seed + i`), VecNormalize if asked;
    for an Atari entry `make_atari_env` (Monitor, then AtariWrapper) and VecFrameStack."""
    from stable_baselines3.common.env_util import make_atari_env, make_vec_env
    from stable_baselines3.common.vec_env import VecFrameStack, VecNormalize

    if hp.get("env_wrapper"):  # RL-Zoo's `atari` entry: AtariWrapper on every env
        import ale_py
        import gymnasium

        gymnasium.register_envs(ale_py)
        env = make_atari_env(env_id, n_envs=n_envs, seed=seed, env_kwargs=ATARI_ENV_KWARGS)
        return VecFrameStack(env, n_stack=hp.get("frame_stack", 4))
    from rltrain.envs.families import register_on_demand

    register_on_demand(env_id)  # the NoVel ids, as rltrain registers them
    env = make_vec_env(env_id, n_envs=n_envs, seed=seed)
    normalize = hp.get("normalize", False)
    if normalize:
        kwargs = eval(normalize) if isinstance(normalize, str) else {}  # RL-Zoo's own convention
        if "gamma" in hp:
            kwargs["gamma"] = hp["gamma"]
        if not training:  # frozen statistics, raw rewards (RL-Zoo's eval env)
            kwargs.update(training=False, norm_reward=False)
        env = VecNormalize(env, **kwargs)
    return env


class EvalClock:
    """Training clock with evaluation time taken out; decides when to evaluate and to stop."""

    def __init__(self, evaluate: Callable[[], float], threshold: float, eval_every: int,
                 max_steps: int | None, budget: str, extra_evals: int,
                 now: Callable[[], float] = time.perf_counter) -> None:
        self.now = now  # the time source; tests pass a fake one instead of sleeping
        self.evaluate, self.threshold, self.eval_every = evaluate, threshold, eval_every
        self.max_steps, self.budget, self.extra_evals = max_steps, budget, extra_evals
        self.curve: list[tuple[int, float, float]] = []
        self.start = self.eval_seconds = 0.0
        self.last_multiple = 0
        self.trained_since_eval = False
        self.stop = False
        self.stopped_at: int | None = None
        """Step count when `stop` was decided (SB3 takes one more env step before it stops)."""

    def begin(self) -> None:
        self.start = self.now()

    def train_seconds(self) -> float:
        return self.now() - self.start - self.eval_seconds

    def record(self, steps: int, seconds: float | None = None) -> None:
        """Run one evaluation now, off the clock, and add it to the curve."""
        seconds = self.train_seconds() if seconds is None else seconds
        t0 = self.now()
        mean_return = float(self.evaluate())
        self.eval_seconds += self.now() - t0
        self.curve.append((steps, seconds, mean_return))
        self.trained_since_eval = False

    def iteration_end(self, steps: int) -> None:
        """Called after each update: evaluate when a multiple was crossed; maybe stop."""
        if steps // self.eval_every > self.last_multiple:
            self.last_multiple = steps // self.eval_every
            self.record(steps)
        hits = [i for i, (_, _, r) in enumerate(self.curve) if r >= self.threshold]
        solved_plus = bool(hits) and len(self.curve) - 1 - hits[0] >= self.extra_evals
        capped = self.max_steps is not None and steps >= self.max_steps
        self.stop = capped or (self.budget == "until_solved_plus" and solved_plus)
        if self.stop:
            self.stopped_at = steps


def _callback(clock: EvalClock) -> Any:
    """An SB3 callback driving `clock` (built here so SB3 is imported only when used)."""
    from stable_baselines3.common.callbacks import BaseCallback

    class ClockCallback(BaseCallback):
        def _on_rollout_start(self) -> None:  # the previous iteration's update is done
            if self.num_timesteps > 0:
                clock.iteration_end(self.num_timesteps)

        def _on_rollout_end(self) -> None:  # an update follows
            clock.trained_since_eval = True

        def _on_step(self) -> bool:
            return not clock.stop

    return ClockCallback()


def run_sb3(algo: str, env_id: str, seed: int, threshold: float, eval_every: int = 2000,
            eval_episodes: int = 5, max_steps: int | None = None, torch_threads: int = 1,
            budget: str = "full", extra_evals: int = 2, eval_envs: int | None = None,
            device: str = "cpu") -> dict[str, Any]:
    """Train SB3 with RL-Zoo's hyperparameters; the same record as `time_to_threshold`.

    `budget="full"` trains RL-Zoo's `n_timesteps` (or up to `max_steps`); "until_solved_plus"
    stops `extra_evals` evaluations after the first one ≥ `threshold`, and the last evaluation is
    the final return. Returns steps_to_threshold, seconds_to_threshold (training seconds,
    evaluations excluded; None if never reached), final_return, solved (reached and final ≥
    threshold), train_seconds, total_steps, sps and curve [(steps, seconds, return), ...].
    """
    require_sb3()
    import torch
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.utils import set_random_seed
    from stable_baselines3.common.vec_env import sync_envs_normalization

    from rltrain.errors import UserError

    if (algo, env_id) not in RL_ZOO:
        raise UserError(f"no RL-Zoo entry for {algo} on {env_id}; known: {sorted(RL_ZOO)}")
    if budget not in BUDGETS:
        raise UserError(f"unknown budget {budget!r}; choose one of {', '.join(BUDGETS)}")
    hp = RL_ZOO[(algo, env_id)]
    torch.set_num_threads(torch_threads)
    set_random_seed(seed)  # as rl_zoo3.train does before building anything
    eval_env = make_envs(env_id, hp, eval_envs or eval_episodes, seed, training=False)
    env = make_envs(env_id, hp, hp.get("n_envs", 1), seed, training=True)
    shape = env.action_space.shape
    kwargs = model_kwargs(hp, shape[0] if shape else None)
    algo_cls = algo_class(algo)
    model = algo_cls(env=env, seed=seed, verbose=0, device=device, **kwargs)

    def evaluate() -> float:
        sync_envs_normalization(env, eval_env)  # no-op without VecNormalize
        mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=eval_episodes, deterministic=True)
        return mean

    clock = EvalClock(evaluate, threshold, eval_every, max_steps, budget, extra_evals)
    clock.begin()
    model.learn(total_timesteps=int(hp["n_timesteps"]), callback=_callback(clock))
    train_seconds = clock.train_seconds()
    steps = clock.stopped_at or model.num_timesteps
    if clock.trained_since_eval or not clock.curve:  # the policy changed since the last eval
        clock.record(steps, train_seconds)
    env.close()
    eval_env.close()
    return summarize_curve(clock.curve, threshold, clock.curve[-1][2], train_seconds, steps)


def run_sb3_final(algo: str, env_id: str, seed: int, budget: int, eval_episodes: int = 10,
                  torch_threads: int = 1, device: str = "cpu",
                  save: str | None = None, library: str = "sb3") -> dict[str, Any]:
    """Train SB3 with RL-Zoo's hyperparameters for `budget` env steps, then evaluate once.

    `learn(budget)`: RL-Zoo's linear schedules (`lin_X`, DQN's exploration fraction) decay over
    the benchmark's budget, as they would with `--n-timesteps budget`. The final evaluation is
    `eval_episodes` deterministic episodes on one separate env (for Atari: the whole game, all
    lives, unclipped rewards, read from the Monitor under AtariWrapper). Returns final_eval,
    seconds (the `learn()` call only) and budget. `save`: write the model there at the end (and
    the VecNormalize statistics beside it), as RL-Zoo's train.py does. `library="sbx"`: SBX's
    class of the same name trains instead (jitted JAX; `device` unused).
    """
    require_sb3()
    import torch
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.utils import set_random_seed
    from stable_baselines3.common.vec_env import sync_envs_normalization

    from rltrain.errors import UserError

    if (algo, env_id) not in RL_ZOO:
        raise UserError(f"no RL-Zoo entry for {algo} on {env_id}; known: {sorted(RL_ZOO)}")
    hp = RL_ZOO[(algo, env_id)]
    torch.set_num_threads(torch_threads)
    set_random_seed(seed)
    env = make_envs(env_id, hp, hp.get("n_envs", 1), seed, training=True)
    shape = env.action_space.shape
    kwargs = model_kwargs(hp, shape[0] if shape else None)
    model = algo_class(algo, library)(env=env, seed=seed, verbose=0, device=device, **kwargs)
    t0 = time.perf_counter()
    model.learn(total_timesteps=int(budget))
    seconds = time.perf_counter() - t0
    eval_env = make_envs(env_id, hp, 1, seed + 10_000, training=False)
    sync_envs_normalization(env, eval_env)  # no-op without VecNormalize
    successes: list[float] = []  # a goal env's info["is_success"] at each episode's end
    mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=eval_episodes, deterministic=True,
                              callback=lambda local, _: record_success(local, successes))
    if save is not None:
        model.save(save)
        if hasattr(env, "obs_rms"):  # VecNormalize
            env.save(str(save) + ".vecnormalize.pkl")
    env.close()
    eval_env.close()
    out = {"final_eval": float(mean), "seconds": seconds, "budget": int(budget),
           "steps": int(model.num_timesteps)}
    if successes:
        out["success_rate"] = sum(successes) / len(successes)
    return out


def algo_class(algo: str, library: str = "sb3") -> Any:
    """The class that trains `algo`: SB3's, SB3-contrib's (`CONTRIB`), or SBX's (`library="sbx"`)."""
    if library == "sbx":
        if algo not in SBX:
            from rltrain.errors import UserError

            raise UserError(f"SBX has no {algo}; it has {', '.join(sorted(SBX))}")
        import sbx

        return getattr(sbx, SBX[algo])
    if algo in CONTRIB:  # sb3-contrib (the bench extra)
        import sb3_contrib

        return getattr(sb3_contrib, CONTRIB[algo])
    import stable_baselines3

    return getattr(stable_baselines3, algo.upper())


def record_success(local: dict[str, Any], successes: list[float]) -> None:
    """`evaluate_policy`'s per-step callback: the `is_success` of an env's info at an episode's
    end (as SB3's EvalCallback reads it), if the env gives one."""
    if local.get("done") and "is_success" in local.get("info", {}):
        successes.append(float(local["info"]["is_success"]))
