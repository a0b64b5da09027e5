"""`ENV_ALIASES`: the short `env=` names of common environments."""

from __future__ import annotations

# Short names of common environments (`env=halfcheetah`); the gymnasium id works as well. An
# alias with a YAML in conf/env/ takes its values from it, any other one is just its id. Tuned
# presets are named `<algo>_<alias>` (`<algo>_atari` for every ALE game: `config_store.preset_env_name`).
ENV_ALIASES: dict[str, str] = {
    "pendulum": "Pendulum-v1",
    "cartpole": "CartPole-v1",
    "acrobot": "Acrobot-v1",
    "mountaincar": "MountainCar-v0",
    "mountaincar_continuous": "MountainCarContinuous-v0",
    "cartpole_novel": "CartPoleNoVel-v1",
    "pendulum_novel": "PendulumNoVel-v1",
    "mountaincar_continuous_novel": "MountainCarContinuousNoVel-v0",
    "lunarlander": "LunarLander-v3",
    "lunarlander_continuous": "LunarLanderContinuous-v3",
    "bipedalwalker": "BipedalWalker-v3",
    "halfcheetah": "HalfCheetah-v5",
    "hopper": "Hopper-v5",
    "walker2d": "Walker2d-v5",
    "ant": "Ant-v5",
    "humanoid": "Humanoid-v5",
    "swimmer": "Swimmer-v5",
    "fetchreach": "FetchReach-v4",  # gymnasium-robotics' goal envs (the `robotics` extra)
    "fetchpush": "FetchPush-v4",
    "breakout": "ALE/Breakout-v5",
    "pong": "ALE/Pong-v5",
    "spaceinvaders": "ALE/SpaceInvaders-v5",
    "seaquest": "ALE/Seaquest-v5",
    "qbert": "ALE/Qbert-v5",
    "beamrider": "ALE/BeamRider-v5",
    "enduro": "ALE/Enduro-v5",
    "asteroids": "ALE/Asteroids-v5",
    "mspacman": "ALE/MsPacman-v5",
}
