"""How an update's gradient steps are taken: an algorithm writes its update once, as `learn(steps,
...)`, in terms of what it trains, and two forms of `steps` run those lines.

- `EagerSteps`: the networks themselves, autograd's `backward` and the optimizers' own `step`
  (fused Adam on the CPU): the default, and every run's form before this file.
- `GraphSteps`: the same lines as one function of tensors that `torch.compile` captures whole
  (`algos/compiled.py`): the networks called with explicit parameters
  (`torch.func.functional_call`), gradients from `torch.func.grad_and_value`, and Adam's
  arithmetic as foreach ops on the optimizers' own state tensors, changed in place, so
  checkpoints, resume and a seed's view read the same state in either form.

What `learn` may use: `net(name)` (a network to call, its parameters taking no gradient: a
target, or a critic inside the actor's loss), `value(name)` (a trained tensor such as log α,
detached), `minimize(names, objective)` (one optimizer step of each named thing on the gradient
of `objective`'s scalar) and `polyak(target, source, tau)`. Random draws come in as arguments,
drawn before the update in the order the eager form drew them, so both forms take the same
numbers from the same streams.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import nn

from rltrain.algos.base import grad_norm_step
from rltrain.algos.optim import clip_scale, foreach_adam_, grad_norm
from rltrain.algos.seed_optim import per_seed, seed_grad_norms

Objective = Callable[..., tuple[torch.Tensor, Any]]
"""(the named trained things, in order) -> (the scalar to descend, what to return: detached)."""


# target module -> (target params, source params, target buffers, source buffers); walking the
# module tree on every call cost ~0.3 ms per SAC update (profiled), the tensors never change.
_POLYAK_PAIRS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@torch.no_grad()
def polyak_update(target: Any, source: Any, tau: float) -> None:
    """θ_target ← τ θ_source + (1 − τ) θ_target (τ = 1 copies); buffers (BatchNorm statistics)
    are copied. `target`, `source`: `nn.Module`s, or a seed batch's stacked networks (whatever
    has `parameters()` and `buffers()`), so every S updates its targets alike."""
    pairs = _POLYAK_PAIRS.get(target)
    if pairs is None or pairs[4] is not source:
        pairs = (list(target.parameters()), list(source.parameters()), list(target.buffers()),
                 list(source.buffers()), source)
        _POLYAK_PAIRS[target] = pairs
    t_params, s_params, t_bufs, s_bufs, _ = pairs
    soft_update_(t_params, s_params, tau)
    if t_bufs:
        torch._foreach_copy_(t_bufs, s_bufs)


@torch.no_grad()
def soft_update_(target: list[torch.Tensor], source: list[torch.Tensor], tau: float) -> None:
    """θ_target ← τ θ_source + (1 − τ) θ_target, tensor by tensor (τ = 1 copies): a network's
    parameters, or a seed batch's stacked ones."""
    if tau >= 1.0:
        torch._foreach_copy_(target, source)
    else:
        torch._foreach_lerp_(target, source, tau)


class Trained(NamedTuple):
    """A network (or a free tensor such as log α) and the optimizer that steps it."""

    value: nn.Module | torch.Tensor
    optimizer: Any


def _params(value: nn.Module | torch.Tensor) -> list[torch.Tensor]:
    return list(value.parameters()) if isinstance(value, nn.Module) else [value]


def _detached(aux: Any) -> Any:
    """`aux` (a tensor, or tuples, lists and dicts of them) with every tensor detached."""
    if isinstance(aux, torch.Tensor):
        return aux.detach()
    if isinstance(aux, tuple) and hasattr(aux, "_fields"):  # a NamedTuple
        return type(aux)(*(_detached(x) for x in aux))
    if isinstance(aux, tuple | list):
        return type(aux)(_detached(x) for x in aux)
    if isinstance(aux, dict):
        return {k: _detached(v) for k, v in aux.items()}
    return aux


class EagerSteps:
    """The update's steps on the networks themselves (`trained`: name -> network or tensor and
    its optimizer; `frozen`: name -> a network or tensor without one, such as a target, or a
    fixed log α). Only what an update steps is `trained` (the graph form makes Adam's state of
    everything trained before its first step)."""

    def __init__(self, trained: dict[str, Trained],
                 frozen: dict[str, nn.Module | torch.Tensor | None]):
        self.trained, self.frozen = trained, frozen
        self.params = {name: _params(t.value) for name, t in trained.items()}
        self.named = {"trained": {name: _named(t.value) for name, t in trained.items()},
                      "frozen": {name: _named(net) for name, net in frozen.items()
                                 if net is not None}}
        """Every network's parameters by name, gathered once (as `params`): a network's
        parameters stay the same tensors, changed in place (loading a checkpoint included)."""

    def net(self, name: str) -> Any:
        """The network `name` (its parameters get no gradient from `minimize` of another)."""
        return self.trained[name].value if name in self.trained else self.frozen[name]

    def value(self, name: str) -> torch.Tensor:
        """The tensor `name` (log α, trained or `frozen`), detached."""
        value = self.trained[name].value if name in self.trained else self.frozen[name]
        assert isinstance(value, torch.Tensor)
        return value.detach()

    def minimize(self, names: tuple[str, ...], objective: Objective,
                 max_grad_norm: float | None = None, norm: bool = False) -> Any:
        """One step of each named thing's optimizer, in order, on the gradient of the scalar
        `objective(*named)` returns with its aux, the aux detached; nothing else gets a
        gradient (`inputs=`). `norm` (one name only): the gradient clipped to `max_grad_norm`
        when set (per seed in a seed batch) and (aux, its norm before clipping) returned."""
        total, aux = objective(*(self.trained[name].value for name in names))
        optimizers = [self.trained[name].optimizer for name in names]
        for optimizer in optimizers:
            optimizer.zero_grad(set_to_none=True)
        total.backward(inputs=[p for name in names for p in self.params[name]])
        if norm:
            (name,) = names
            return _detached(aux), grad_norm_step(optimizers[0], self.params[name],
                                                  max_grad_norm)
        for optimizer in optimizers:
            optimizer.step()
        return _detached(aux)

    def polyak(self, target: str, source: str, tau: float) -> None:
        """θ_target ← τ θ_source + (1 − τ) θ_target (`polyak_update`: buffers copied)."""
        polyak_update(self.frozen[target], self.net(source), tau)

    def tensors(self) -> dict[str, Any]:
        """What `GraphSteps` reads, gathered now: each thing's parameters by name, each trained
        one's Adam state and learning rate (a tensor, so a decaying rate compiles once)."""
        adam = {}
        for name, t in self.trained.items():
            opt = t.optimizer
            states = [opt.state_for(p) for p in self.params[name]]
            counts = opt.steps if opt.seeds is not None else [s["step"] for s in states]
            adam[name] = ([s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states],
                          counts, torch.tensor(float(opt.param_groups[0]["lr"])))
        return {**self.named, "adam": adam}


def _named(value: nn.Module | torch.Tensor) -> dict[str, torch.Tensor] | torch.Tensor:
    return dict(value.named_parameters()) if isinstance(value, nn.Module) else value


class GraphSteps:
    """The same steps as functions of `tensors` (`EagerSteps.tensors()`), for `torch.compile`
    to capture with the rest of the update: no `backward`, no optimizer object, no Python
    state changed; the parameters and Adam's moments and counts change in place."""

    def __init__(self, eager: EagerSteps, tensors: dict[str, Any]):
        self.eager, self.tensors = eager, tensors

    def _call(self, module: nn.Module, params: dict[str, torch.Tensor]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return torch.func.functional_call(module, params, args, kwargs)
        return call

    def _as(self, name: str, value: Any) -> Any:
        """`name` made of `value` (its parameters by name, or the tensor itself)."""
        thing = self.eager.net(name)
        return self._call(thing, value) if isinstance(thing, nn.Module) else value

    def net(self, name: str) -> Any:
        group = "trained" if name in self.eager.trained else "frozen"
        params = self.tensors[group][name]
        return self._as(name, {k: v.detach() for k, v in params.items()})

    def value(self, name: str) -> torch.Tensor:
        group = "trained" if name in self.eager.trained else "frozen"
        return self.tensors[group][name].detach()

    def minimize(self, names: tuple[str, ...], objective: Objective,
                 max_grad_norm: float | None = None, norm: bool = False) -> Any:
        def through(*values: Any) -> tuple[torch.Tensor, Any]:
            return objective(*(self._as(n, v) for n, v in zip(names, values, strict=True)))
        inputs = [self.tensors["trained"][name] for name in names]
        grads, (_, aux) = torch.func.grad_and_value(
            through, argnums=tuple(range(len(names))), has_aux=True)(*inputs)
        total = None
        with torch.no_grad():
            for name, value, grad in zip(names, inputs, grads, strict=True):
                params = list(value.values()) if isinstance(value, dict) else [value]
                flat = list(grad.values()) if isinstance(grad, dict) else [grad]
                optimizer = self.eager.trained[name].optimizer
                if norm:
                    flat, total = clipped(flat, max_grad_norm, optimizer.seeds is not None)
                graph_adam_(optimizer, params, flat, self.tensors["adam"][name])
        return (_detached(aux), total) if norm else _detached(aux)

    def polyak(self, target: str, source: str, tau: float) -> None:
        with torch.no_grad():
            group = "trained" if source in self.eager.trained else "frozen"
            soft_update_(list(self.tensors["frozen"][target].values()),
                         list(self.tensors[group][source].values()), tau)
            buffers = list(self.eager.net(target).buffers())  # copied, as `polyak_update` does
            if buffers:
                torch._foreach_copy_(buffers, list(self.eager.net(source).buffers()))


def clipped(grads: list[torch.Tensor], max_grad_norm: float | None,
            seeds: bool) -> tuple[list[torch.Tensor], torch.Tensor]:
    """(`grads` scaled to a global norm of at most `max_grad_norm` when set, their norm before),
    as `grad_norm_step` clips: `seeds`, each seed's `[S, ...]` to its own norm `[S]`."""
    total = seed_grad_norms(grads) if seeds else grad_norm(grads)
    if max_grad_norm is None or max_grad_norm <= 0:
        return grads, total
    scale = hoisted(clip_scale(max_grad_norm, total))
    return [g * (per_seed(scale, g) if seeds else scale) for g in grads], total


def hoisted(x: torch.Tensor) -> torch.Tensor:
    """`x` (a scalar `[]` or one per seed `[S]`), equal, but computed once before the
    element-wise loops that read it. Inductor inlines a pointwise scalar into every loop that
    reads it, and the C++ compiler cannot lift it out (the loop's stores may alias its inputs):
    Adam's bias corrections (two `pow`s) then ran once per 16 parameters: 115 µs against 76
    for the Adam step of a 67k-parameter network. The max over copies of `x` is exact, and a
    reduction over more elements than `unroll_reductions_threshold` (8) is a buffer of its own."""
    return x.unsqueeze(-1).expand(*x.shape, 16).amax(-1)


def graph_adam_(optimizer: Any, params: list[torch.Tensor], grads: list[torch.Tensor],
                state: tuple[Any, ...]) -> None:
    """One Adam step of `params` (no weight decay, no amsgrad: `FusedAdam`'s options) in foreach
    ops a graph can hold, on `state` (moments, counts and the rate, `EagerSteps.tensors()`):
    a single run's per-tensor counts `[]`, or a seed batch's `[S]` (every seed steps)."""
    exp_avgs, exp_avg_sqs, counts, lr = state
    beta1, beta2 = optimizer.param_groups[0]["betas"]
    eps = optimizer.param_groups[0]["eps"]
    if isinstance(counts, torch.Tensor):  # a seed batch's, on the host
        counts.add_(1)
        step = counts.to(device=params[0].device, dtype=params[0].dtype)
    else:
        torch._foreach_add_(counts, 1)
        step = counts[0]
    step_size = hoisted(lr.to(step) / (1 - beta1 ** step))
    bias2_sqrt = hoisted((1 - beta2 ** step).sqrt())
    if step.dim():
        sizes = [per_seed(step_size, m) for m in exp_avgs]
        roots = [per_seed(bias2_sqrt, v) for v in exp_avg_sqs]
    else:
        sizes, roots = [step_size] * len(params), [bias2_sqrt] * len(params)
    foreach_adam_(params, grads, exp_avgs, exp_avg_sqs, sizes, roots, (beta1, beta2), eps)
