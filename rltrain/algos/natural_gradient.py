"""Natural-gradient pieces any trust-region method can call (TRPO's policy step, `algos/trpo.py`):
parameters as one flat vector, the damped Hessian-vector product of a KL divergence (the Fisher
matrix at the old parameters), the conjugate-gradient solver, and the backtracking line search
that keeps the first step inside the trust region.

Matched against SB3-contrib 2.9.2: `sb3_contrib/common/utils.py` (`conjugate_gradient_solver`,
`flat_grad`) and `sb3_contrib/trpo/trpo.py` (`hessian_vector_product`, the line search in
`train`); the one difference is that the solver starts from x = 0 (as modular_rl and Spinning Up
do) rather than from 1e-4 · N(0, 1) noise, so it draws nothing from a run's random stream.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def flat_params(params: list[torch.Tensor]) -> torch.Tensor:
    """The values of `params` as one detached vector (a copy)."""
    return torch.cat([p.detach().reshape(-1) for p in params]).clone()


@torch.no_grad()
def assign_flat_(params: list[torch.Tensor], flat: torch.Tensor) -> None:
    """Write the vector `flat` (as `flat_params` lays it out) into `params`, in place."""
    start = 0
    for p in params:
        n = p.numel()
        p.copy_(flat[start:start + n].view_as(p))
        start += n


def flat_grad(output: torch.Tensor, params: list[torch.Tensor], retain_graph: bool = False,
              create_graph: bool = False) -> torch.Tensor:
    """∂output/∂params as one vector; a parameter `output` does not depend on gets zeros."""
    grads = torch.autograd.grad(output, params, retain_graph=retain_graph or create_graph,
                                create_graph=create_graph, allow_unused=True,
                                materialize_grads=True)
    return torch.cat([g.reshape(-1) for g in grads])


def fisher_vector_product(grad_kl: torch.Tensor, params: list[torch.Tensor], damping: float,
                          average: Callable[[list[torch.Tensor]], None] | None = None,
                          ) -> Callable[[torch.Tensor], torch.Tensor]:
    """v ↦ (H + damping·I) v, H the Hessian of the KL whose gradient `grad_kl` (built with
    `create_graph=True`) is, by double backpropagation: ∂(∇KL · v)/∂θ. At the old parameters H is
    the Fisher information matrix of the policy. `average`: a data-parallel run's averaging of
    the product over its ranks (in place), as their gradients are averaged."""

    def product(v: torch.Tensor) -> torch.Tensor:
        out = flat_grad((grad_kl * v).sum(), params, retain_graph=True)
        if average is not None:
            average([out])
        return out + damping * v

    return product


def conjugate_gradient(matvec: Callable[[torch.Tensor], torch.Tensor], b: torch.Tensor,
                       max_iter: int = 10, residual_tol: float = 1e-10) -> torch.Tensor:
    """An approximate x with A x = b, A symmetric positive definite given as `matvec` (x ↦ A x):
    at most `max_iter` conjugate-gradient steps from x = 0, stopping once ‖b − A x‖² falls below
    `residual_tol` (Nocedal & Wright, Algorithm 5.2; SB3-contrib's `conjugate_gradient_solver`)."""
    x = torch.zeros_like(b)
    residual = b.clone()
    rr = residual.dot(residual)
    if rr < residual_tol:  # a vanishing right-hand side: the step size below would divide by 0
        return x
    p = residual.clone()
    for i in range(max_iter):
        ap = matvec(p)
        alpha = rr / p.dot(ap)
        x += alpha * p
        if i == max_iter - 1:
            break
        residual -= alpha * ap
        new_rr = residual.dot(residual)
        if new_rr < residual_tol:
            break
        p = residual + (new_rr / rr) * p
        rr = new_rr
    return x


def trust_region_scale(direction: torch.Tensor, hvp: torch.Tensor, max_kl: float) -> float:
    """β with ½ (β s)ᵀ H (β s) = `max_kl` for the direction s (`hvp` = H s): sqrt(2 δ / sᵀHs),
    the longest step whose quadratic model of the KL stays within δ; 0 when sᵀHs is not > 0
    (a zero direction: nothing to step)."""
    shs = float(direction.dot(hvp))
    return (2.0 * max_kl / shs) ** 0.5 if shs > 0 else 0.0


@torch.no_grad()
def line_search(params: list[torch.Tensor], start: torch.Tensor, full_step: torch.Tensor,
                evaluate: Callable[[], tuple[float, float]], base_objective: float, max_kl: float,
                shrink: float, max_iter: int) -> tuple[bool, float, float, int]:
    """Backtracking: set `params` to start + shrinkⁱ · full_step for i = 0, 1, ... and keep the
    first whose `evaluate()` → (objective, KL from the old policy) improves on `base_objective`
    with KL < `max_kl`; when none of `max_iter` does, restore `start`.
    Returns (accepted, objective, KL, steps tried); a rejected search gives (False,
    `base_objective`, 0.0, `max_iter`) as SB3-contrib logs it."""
    coeff = 1.0
    for i in range(max_iter):
        assign_flat_(params, start + coeff * full_step)
        objective, kl = evaluate()
        if kl < max_kl and objective > base_objective:
            return True, objective, kl, i + 1
        coeff *= shrink
    assign_flat_(params, start)
    return False, base_objective, 0.0, max_iter
