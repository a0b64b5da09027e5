"""The config rules of `resume=`: the overrides a resumed run may take, those refused as
changing the experiment, and the learning-rate decay with a new budget."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from rltrain.config.overrides import compose_checked
from rltrain.config.schema import TrainConfig, config_to_dict
from rltrain.config.validation import to_train_config
from rltrain.errors import UserError
from rltrain.run_folder.resume_rules import resume_config

SAVED_ARGS = ["env=CartPole-v1"]


@pytest.fixture(scope="module")
def saved() -> dict:
    """The config dict a checkpoint of `rltrain env=CartPole-v1` holds (tuned preset applied)."""
    return config_to_dict(to_train_config(compose_checked("config", SAVED_ARGS)))


def resume_with(saved: dict, overrides: list[str]) -> TrainConfig:
    """What `rltrain resume=<run> <overrides>` trains (as the CLI composes it)."""
    composed = OmegaConf.to_container(compose_checked("config", [*SAVED_ARGS, *overrides]),
                                      resolve=True)
    return resume_config(saved, composed, ["resume=/some/run", *overrides])


def test_resume_applies_budget_logging_eval_and_checkpoint_overrides(saved):
    cfg = resume_with(saved, ["total_timesteps=2e5", "logger.log_freq=7", "eval.episodes=3",
                              "checkpoint.freq=99", "progress=plain", "logger=none"])
    assert cfg.total_timesteps == 2e5 and cfg.progress == "plain"
    assert (cfg.eval.episodes, cfg.checkpoint.freq) == (3, 99)
    assert not cfg.logger.tensorboard and cfg.logger.csv  # logger=none keeps metrics.csv
    assert config_to_dict(cfg)["algo"] == saved["algo"]
    assert config_to_dict(cfg)["env"] == saved["env"]


@pytest.mark.parametrize("override", ["algo.lr=1e-3", "env=cartpole", "algo=ppo", "seed=0",
                                      "env.id=CartPole-v1", "tuned=ppo_cartpole"])
def test_resume_accepts_an_override_that_restates_the_saved_value(saved, override):
    """`env.id=` restated comes with the `~tuned` that normalize_overrides adds beside it: it
    was refused as "selects a preset"."""
    from rltrain.config.compose import normalize_overrides

    cfg = resume_with(saved, normalize_overrides([override]))
    assert config_to_dict(cfg)["algo"] == saved["algo"] and cfg.seed == saved["seed"]


@pytest.mark.parametrize(("override", "fragment"), [
    ("algo.lr=0.5", "(algo.lr: 0.001 -> 0.5)"),
    ("env=Acrobot-v1", "(env: 'CartPole-v1' -> 'Acrobot-v1')"),
    ("env.num_envs=4", "(env.num_envs: 8 -> 4)"),
    ("seed=3", "(seed: 0 -> 3)"),
    ("algo=a2c", "(algo: 'ppo' -> 'a2c')"),
    ("tuned=ppo_pendulum", "(tuned: 'ppo_cartpole' -> 'ppo_pendulum')"),
])
def test_resume_refuses_an_override_that_changes_the_experiment(saved, override, fragment):
    with pytest.raises(UserError) as err:
        resume_with(saved, [override])
    message = str(err.value)
    assert message.startswith(f"resume: `{override}` would change the experiment {fragment}")
    assert "total_timesteps" in message and "\n" not in message


@pytest.mark.parametrize("override", ["debug=smoke"])
def test_resume_refuses_a_preset_group_instead_of_silently_ignoring_it(saved, override):
    # a preset sets many fields at once (smoke: the budget); the saved config holds no value to
    # compare it with (`tuned=` it does: its `preset`)
    with pytest.raises(UserError, match=rf"^resume: `{override}` selects a preset, which cannot "
                                        "be applied to a resumed run; only total_timesteps"):
        resume_with(saved, [override])


DECAYING = ["algo=sac", "env=Pendulum-v1", "total_timesteps=1000",
            "algo.lr_decay_steps=${total_timesteps}"]


def decaying_resume(overrides: list[str]) -> TrainConfig:
    """`resume_with` for a SAC run whose rate decayed to 0 over its 1000 steps."""
    saved = config_to_dict(to_train_config(compose_checked("config", DECAYING)))
    composed = OmegaConf.to_container(compose_checked("config", [*DECAYING, *overrides]),
                                      resolve=True)
    return resume_config(saved, composed, ["resume=/some/run", *overrides])


def test_a_budget_past_a_finished_decay_to_zero_is_refused_naming_the_fix():
    """The saved config holds `${total_timesteps}` resolved (1000): a resume to 2000 trained its
    last 1000 steps at a learning rate of 0, learning nothing, without a word."""
    with pytest.raises(UserError) as err:
        decaying_resume(["total_timesteps=2000"])
    assert str(err.value) == (
        "resume: total_timesteps=2000 goes past algo.lr_decay_steps=1000, where the learning rate "
        "reaches algo.lr_final=0: the steps after it would learn nothing; add "
        "algo.lr_decay_steps=2000 to stretch the decay over the new budget, or "
        "algo.lr_final=<rate> to go on at that rate")


@pytest.mark.parametrize(("overrides", "decay", "final"), [
    (["total_timesteps=2000", "algo.lr_decay_steps=${total_timesteps}"], 2000, 0.0),
    (["total_timesteps=2000", "algo.lr_final=1e-5"], 1000, 1e-5),
    (["total_timesteps=800"], 1000, 0.0),  # a shorter budget: nothing trains at 0
])
def test_the_decay_may_change_with_the_budget_when_resuming(overrides, decay, final):
    cfg = decaying_resume(overrides)
    assert (cfg.algo.lr_decay_steps, cfg.algo.lr_final) == (decay, final)
