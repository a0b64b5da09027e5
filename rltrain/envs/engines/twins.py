"""Which of EnvPool's envs are gymnasium's env: the ids `env.backend=auto` may step with EnvPool,
the ids whose spaces differ (refused by `env.backend=envpool`), and why the others are neither.

Checked 2026-11-27 with envpool 1.2.5 against gymnasium 1.4.0 and mujoco 4.0.0
(`tests/envs/test_envpool_twins.py` keeps each entry true): the observation and action spaces
(class, shape, dtype, bounds), the time limit, the reset observations' range, and the dynamics
transition by transition: before each step gymnasium's env is put in the state of EnvPool's
observation, both take the same action, and the next observation, reward and termination agree
to float rounding (relative 1e-6; the time limit truncates both at the same step). EnvPool's
state cannot be set, and its seeded resets are not gymnasium's, so each step starts from
EnvPool's state. MuJoCo positions that the observation omits (x, for Swimmer x and y) do not
change the dynamics; steps where Hopper's and Walker2d's observation clips a velocity at 10 (so
it does not give the state) are not compared.
"""

from __future__ import annotations

TWINS: frozenset[str] = frozenset({
    "CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0",
    "HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Swimmer-v5", "InvertedPendulum-v5",
    "InvertedDoublePendulum-v5", "Reacher-v5",
})
"""Ids whose EnvPool env is checked equal to gymnasium's: the only ones `auto` steps with
EnvPool, and the ones an EnvPool run may evaluate on gymnasium."""

SPACES_DIFFER: dict[str, str] = {
    "Blackjack-v1": "observes a Box(0, 31, (3,), int32) where gymnasium's observes a Tuple of "
                    "Discretes",
    **{env_id: "declares observation bounds [1.2e-38, 3.4e38] where gymnasium's are signed and "
               "finite" for env_id in ("LunarLander-v3", "LunarLanderContinuous-v3",
                                       "BipedalWalker-v3", "BipedalWalkerHardcore-v3")},
}
"""Ids whose EnvPool spaces are not gymnasium's: `env.backend=envpool` refuses them."""

NOT_TWINS: dict[str, str] = {
    "Pendulum-v1": "integrates the angle with the unclipped velocity at |θ̇| = 8 (gymnasium "
                   "with the clipped one)",
    **{env_id: "gives other contact forces (cfrc_ext, in its observation and reward) than "
               "gymnasium's for the same state" for env_id in ("Ant-v5", "Humanoid-v5",
                                                               "HumanoidStandup-v5")},
    "CarRacing-v3": "is not compared (its track is drawn from its own RNG; its state cannot be "
                    "set)",
    "Pusher-v5": "is not compared (its observation does not give the object's state)",
}
"""Ids of the measured families whose spaces match but whose dynamics differ or were not
compared, with why; `env.backend=envpool` steps them (saying so), `auto` does not. Any other id
EnvPool knows (toy text, its own suites) is not compared either."""


def twin_problem(env_id: str) -> str | None:
    """Why EnvPool's `env_id` is not gymnasium's env (the phrase after "EnvPool's <id> ..."),
    None for a checked twin."""
    if env_id in TWINS:
        return None
    return NOT_TWINS.get(env_id) or SPACES_DIFFER.get(env_id) or (
        "is not compared with gymnasium's")
