"""Seeds as a batch dimension: `num_seeds=S` trains S independent agents in one process.

Each seed is a complete single-seed run (its own folder, env, checkpoints, logs: a `Runner`
built exactly as `seed=<s>` alone would build it); what the batch shares is the arithmetic.
Each algorithm's own class is its batch form (`PPO.stack`, `A2C.stack`, `DQN.stack`, ...: its
module's `stack(members, streams)`): the S networks' parameters stacked `[S, ...]`
(`nets/seeded.py`), one batched matrix product serving every seed, the algorithm's one
`update` over a leading seed dimension, and every step that involves chance drawing from that
seed's own generator (`rng.py`), so seed k in a batch follows the same trajectory as the run
`seed=<k>` alone.

    rng.py       one random stream per seed; the process-wide generators swapped in per seed
    view.py      seed k of a stacked algorithm, as its Runner reads it (no copies kept)
    batch.py     the seeds still training, as the loops of `runner/` train them (a single
                 run is a batch of one there), and what each does alone (log, eval, save,
                 fail); seeds whose networks cannot be stacked run their own algorithms in
                 turn (`runner/members.py`)
    resume.py    resume=<batch folder>: the seeds behind catch up (the folder itself is read by
                 `rltrain.run_folder`: batch.py, batch_state.py)
    runner.py    builds the members, runs the loop, finishes each seed, writes the summary
"""
