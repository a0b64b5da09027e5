"""The off-policy loop over a batch of seeds: `runner/off_policy.py`, with one network call for
all seeds at each env step and one batched gradient step for all. Each seed keeps its own env,
replay buffer (sampled with its own stream), episode records and loop state. Read top to bottom."""

from __future__ import annotations

import time

import torch

from rltrain.algos.base import mean_metrics
from rltrain.envs.masks import action_mask
from rltrain.runner.off_policy import next_state_mask
from rltrain.seed_batch.batch import SeedBatch
from rltrain.types import TransitionBatch


def run_off_policy_batch(seeds: SeedBatch) -> None:
    """Train every seed until the step budget is spent, a stop is asked for, or none is left."""
    lead = seeds.ctxs[0]
    cfg, n = lead.cfg, lead.env.spec.num_envs
    masked = action_mask(lead.env) is not None  # (masks come with Discrete actions: DQN)
    afters: list[torch.Tensor] | None = None  # each seed's mask after its last step (masked)
    while seeds.runners and not seeds.finished():
        state = seeds.runners[0].state  # every seed is at the same step
        seeds.fire("pre_iteration")
        # ---- one vector-env step of every seed: random before learning_starts, then the policy
        seeds.fire("pre_rollout")
        t0 = time.perf_counter()
        # the mask after a step is both the transition's next-state mask and the next acting one
        masks = () if not masked else (torch.stack(  # only DQN's calls take it
            afters if afters is not None else [action_mask(c.env) for c in seeds.ctxs]),)
        if state.global_step < cfg.learning_starts:
            action = seeds.algo.random_actions(n, *masks)
        else:
            action = seeds.algo.act(torch.stack([c.obs for c in seeds.ctxs]), state.global_step,
                                    *masks)
        te = time.perf_counter()
        results = seeds.step_envs(action)
        env_seconds = time.perf_counter() - te
        if masked:
            afters = [action_mask(c.env) for c in seeds.ctxs]
        for k, (ctx, res) in enumerate(zip(seeds.ctxs, results, strict=True)):
            next_mask = (None if afters is None
                         else next_state_mask(afters[k], res.terminated | res.truncated))
            ctx.replay.add(ctx.obs, action[k], res.reward, res.final_obs, res.terminated,
                           next_mask=next_mask)
            ctx.episodes.record(res)
            ctx.obs = res.obs
            ctx.state.global_step += n
        seeds.fire("post_rollout")
        # ---- gradient steps every train_freq vector steps, each seed on its own replay ---------
        t1 = time.perf_counter()
        if state.global_step >= cfg.learning_starts and state.iteration % cfg.train_freq == 0:
            seeds.fire("pre_update")
            rows = [seeds.algo.update(sample(seeds, cfg.batch_size), state.global_step)
                    for _ in range(cfg.gradient_steps)]
            for k, ctx in enumerate(seeds.ctxs):
                ctx.state.metrics = mean_metrics([row[k] for row in rows])
            seeds.fire("post_update")
        t2 = time.perf_counter()
        for ctx in seeds.ctxs:
            ctx.state.iteration += 1
            ctx.timer.add("env", env_seconds)  # the batch's times: every seed shares them
            ctx.timer.add("act", t1 - t0 - env_seconds)
            ctx.timer.add("update", t2 - t1)
            ctx.state.metrics["buffer/size"] = float(ctx.replay.size)
        kept = seeds.end_iteration()
        if afters is not None:
            afters = [afters[k] for k in kept]


def sample(seeds: SeedBatch, batch_size: int) -> TransitionBatch:
    """One minibatch per seed from its own replay and stream, stacked `[S, B, ...]`."""
    parts = [c.replay.sample(batch_size, generator=g)
             for c, g in zip(seeds.ctxs, seeds.streams.generators, strict=True)]
    return TransitionBatch(*(torch.stack(p) if p[0] is not None else None
                             for p in zip(*parts, strict=True)))
