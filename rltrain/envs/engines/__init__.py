"""Vector env engines behind the `VecEnv` contract: EnvPool (`env.backend=envpool`), ale-py's
Atari vector env, gymnasium's `SyncVectorEnv` with a shorter step (`sync.SyncSameStep`, what
`env.backend=gymnasium` steps), and the choice `env.backend=auto` makes between them
(`choice.py`, from the measured table in benchmarks/results/env_engines.md).

An engine steps all its rows in C++ threads and resets an ended row on the *next* step;
`same_step.SameStep` turns that into gymnasium's SAME_STEP convention (the ended row's true last
observation in `final_obs`, its reset observation in `obs`), so that `GymVecEnv` adapts an
engine exactly as it adapts a gymnasium vector env: one place for action scaling, episode
statistics and the finite checks, whatever steps the envs.
"""
