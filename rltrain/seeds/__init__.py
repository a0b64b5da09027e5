"""Seeds as a batch dimension: `num_seeds=S` trains S independent agents in one process.

Each seed is a complete single-seed run (its own folder, env, checkpoints, logs: a `Runner`
built exactly as `seed=<s>` alone would build it); what the batch shares is the arithmetic.
The S policies' parameters are stacked `[S, ...]` (`stacked.py`), one batched matrix product
serves every seed, and every step that involves chance draws from that seed's own generator
(`rng.py`), so seed k in a batch follows the same trajectory as the run `seed=<k>` alone.

    stacked.py   the S networks as one: stacked parameters, a batched forward, copy back
    optim.py     Adam and gradient clipping over stacked parameters, per seed
    rng.py       one random stream per seed; the process-wide generators swapped in per seed
    ppo.py, a2c.py, dqn.py, sac.py, deterministic.py   each algorithm's stacked form: its
                 `algos/` math over stacked networks, with per-seed draws, KL stops and metrics
                 (named by its `config.catalog.ALGORITHMS` entry)
    members.py   seeds whose networks cannot be stacked (recurrent, gSDE, images), or whose
                 algorithm has no stacked form: each seed's own member in turn, its single run
    batch.py     the seeds still training, and what each does alone (log, eval, save, fail)
    on_policy.py, off_policy.py   the loops over the batch, read top to bottom
    folder.py    a batch folder on disk: its seeds, and what resume=<batch> continues
    runner.py    builds the members, runs the loop, finishes each seed, writes the summary
"""
