"""Probe for issue 16 (seeds as a batch dimension): what one PPO minibatch step of S independent
agents costs on this CPU, done three ways, against S sequential steps of one agent.

    python benchmarks/seed_batch_probe.py                 # S = 8, CartPole-sized nets
    python benchmarks/seed_batch_probe.py --seeds 1 8 32 --batch 256 --threads 1

Each step: actor and critic MLPs (obs 4 -> 64 -> 64 -> 2 logits / 1 value, tanh), a PPO-shaped
loss (log-prob ratio, value MSE, entropy), backward, Adam. Ways:
- `sequential`: S separate `nn.Module`s and optimizers, one after another (today's cost of S
  seeds in one process, without the env).
- `vmap`: one set of parameters stacked `[S, ...]`, `torch.func.functional_call` under
  `torch.vmap`, one backward, one Adam over the stacked tensors (Adam is elementwise: per seed).
- `bmm`: the same stacked parameters used directly with `torch.baddbmm` (`[S, B, in] @ [S, in,
  out]`), no functorch.
Prints steps/s of S agents and the ratio to `sequential`; the first rows check that all three
give the same gradients for the same parameters and data (so the speed is of the same math).
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.func import functional_call, stack_module_state

OBS, HIDDEN, ACTIONS = 4, 64, 2


def mlp(out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(OBS, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh(),
                         nn.Linear(HIDDEN, out))


def ppo_loss(logits: torch.Tensor, values: torch.Tensor, actions: torch.Tensor,
             old_logp: torch.Tensor, adv: torch.Tensor, ret: torch.Tensor) -> torch.Tensor:
    logp_all = torch.log_softmax(logits, -1)
    logp = logp_all.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    ratio = torch.exp(logp - old_logp)
    policy = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean(-1)
    value = (values.squeeze(-1) - ret).pow(2).mean(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1).mean(-1)
    return policy + 0.5 * value - 0.0 * entropy  # [S] or scalar


def data(seeds: int, batch: int, gen: torch.Generator):
    obs = torch.randn(seeds, batch, OBS, generator=gen)
    actions = torch.randint(0, ACTIONS, (seeds, batch), generator=gen)
    old_logp = torch.full((seeds, batch), -0.69)
    adv = torch.randn(seeds, batch, generator=gen)
    ret = torch.randn(seeds, batch, generator=gen)
    return obs, actions, old_logp, adv, ret


def make_agents(seeds: int) -> list[tuple[nn.Module, nn.Module]]:
    torch.manual_seed(0)
    return [(mlp(ACTIONS), mlp(1)) for _ in range(seeds)]


def sequential(agents, batch_data, steps: int) -> float:
    opts = [torch.optim.Adam([*a.parameters(), *c.parameters()], lr=3e-4) for a, c in agents]
    obs, actions, old_logp, adv, ret = batch_data
    t0 = time.perf_counter()
    for _ in range(steps):
        for s, ((actor, critic), opt) in enumerate(zip(agents, opts, strict=True)):
            loss = ppo_loss(actor(obs[s]), critic(obs[s]), actions[s], old_logp[s], adv[s], ret[s])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return time.perf_counter() - t0


def stacked(agents):
    actor_p, _ = stack_module_state([a for a, _ in agents])
    critic_p, _ = stack_module_state([c for _, c in agents])
    params = {**{f"a.{k}": v.detach().requires_grad_() for k, v in actor_p.items()},
              **{f"c.{k}": v.detach().requires_grad_() for k, v in critic_p.items()}}
    return params


def vmap_step_fn(agents):
    base_actor, base_critic = mlp(ACTIONS).to("meta"), mlp(1).to("meta")

    def one(params, obs, actions, old_logp, adv, ret):
        a = {k[2:]: v for k, v in params.items() if k.startswith("a.")}
        c = {k[2:]: v for k, v in params.items() if k.startswith("c.")}
        return ppo_loss(functional_call(base_actor, a, (obs,)), functional_call(base_critic, c, (obs,)),
                        actions, old_logp, adv, ret)

    return torch.vmap(one)


def vmapped(agents, batch_data, steps: int) -> float:
    params = stacked(agents)
    fn = vmap_step_fn(agents)
    opt = torch.optim.Adam(list(params.values()), lr=3e-4)
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = fn(params, *batch_data).sum()  # seeds share no parameter: summing keeps them apart
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return time.perf_counter() - t0


def bmm_forward(params, prefix: str, obs: torch.Tensor) -> torch.Tensor:
    x = obs
    for i in (0, 2, 4):
        w, b = params[f"{prefix}.{i}.weight"], params[f"{prefix}.{i}.bias"]
        x = torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))
        if i != 4:
            x = torch.tanh(x)
    return x


def bmm(agents, batch_data, steps: int) -> float:
    params = stacked(agents)
    opt = torch.optim.Adam(list(params.values()), lr=3e-4)
    obs, actions, old_logp, adv, ret = batch_data
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = ppo_loss(bmm_forward(params, "a", obs), bmm_forward(params, "c", obs), actions,
                        old_logp, adv, ret).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return time.perf_counter() - t0


def check_same_gradients(seeds: int, batch: int) -> float:
    """Max |Δ| between the per-seed gradients of the three ways (one step, same data)."""
    gen = torch.Generator().manual_seed(1)
    d = data(seeds, batch, gen)
    agents = make_agents(seeds)
    ref = []
    for s, (actor, critic) in enumerate(agents):
        loss = ppo_loss(actor(d[0][s]), critic(d[0][s]), d[1][s], d[2][s], d[3][s], d[4][s])
        grads = torch.autograd.grad(loss, [*actor.parameters(), *critic.parameters()])
        ref.append(torch.cat([g.flatten() for g in grads]))
    worst = 0.0
    for way in ("vmap", "bmm"):
        params = stacked(agents)
        if way == "vmap":
            loss = vmap_step_fn(agents)(params, *d).sum()
        else:
            loss = ppo_loss(bmm_forward(params, "a", d[0]), bmm_forward(params, "c", d[0]),
                            *d[1:]).sum()
        grads = torch.autograd.grad(loss, list(params.values()))
        for s in range(seeds):
            mine = torch.cat([g[s].flatten() for g in grads])
            worst = max(worst, float((mine - ref[s]).abs().max()))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="*", type=int, default=[8])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), minibatch {args.batch}, "
          f"{args.steps} steps per measurement")
    for seeds in args.seeds:
        print(f"S={seeds}: max |grad difference| vmap/bmm vs separate modules: "
              f"{check_same_gradients(seeds, args.batch):.1e}")
        gen = torch.Generator().manual_seed(0)
        d = data(seeds, args.batch, gen)
        times = {}
        for name, way in (("sequential", sequential), ("vmap", vmapped), ("bmm", bmm)):
            way(make_agents(seeds), d, 10)  # warm-up
            times[name] = way(make_agents(seeds), d, args.steps)
        one = times["sequential"]
        for name, seconds in times.items():
            print(f"  {name:<10} {args.steps / seconds:8.1f} steps/s of {seeds} agents "
                  f"({seconds / args.steps * 1e3:6.2f} ms a step; {one / seconds:4.2f}x sequential)")


if __name__ == "__main__":
    main()
