"""`RecurrentActorCritic`: PPO's actor and critic with an LSTM or GRU core between the encoder
and the heads (`algo.recurrent=lstm|gru`, or `algo=ppo_lstm`).

The recurrent state of a batch of B rows is one tensor `[layers, B, D]`: for an LSTM its h and c
side by side (D = 2H), for a GRU h (D = H); with separate actor and critic cores the critic's
part follows the actor's (D doubles). A row's state is zeroed where its episode starts, before
the step that reads the episode's first observation.
"""

from __future__ import annotations

import torch
from torch import nn

from rltrain import obs as obs_ops
from rltrain.nets.encoder import encode, make_encoder
from rltrain.nets.mlp import mlp
from rltrain.nets.sde import policy_head
from rltrain.nets.spec import ActorCriticSpecs
from rltrain.types import EnvSpec

CORES = {"lstm": nn.LSTM, "gru": nn.GRU}


class Core(nn.Module):
    """One LSTM or GRU over `[T, B, F]` sequences, with the state packed as `[L, B, D]`."""

    def __init__(self, kind: str, in_dim: int, hidden: int, layers: int, ortho: bool):
        super().__init__()
        self.lstm = kind == "lstm"
        self.rnn = CORES[kind](in_dim, hidden, layers)
        self.hidden = hidden
        if not ortho:  # PyTorch's default, as SB3-contrib with ortho_init=False
            return
        for name, param in self.rnn.named_parameters():  # orthogonal weights, zero biases
            if "bias" in name:
                nn.init.zeros_(param)
            else:
                nn.init.orthogonal_(param, 1.0)

    @property
    def state_dim(self) -> int:
        return 2 * self.hidden if self.lstm else self.hidden

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(outputs `[T, B, H]`, the state after the last step `[L, B, D]`)."""
        if self.lstm:
            h, c = state[..., : self.hidden].contiguous(), state[..., self.hidden:].contiguous()
            out, (h, c) = self.rnn(x, (h, c))
            return out, torch.cat([h, c], dim=-1)
        out, h = self.rnn(x, state.contiguous())
        return out, h


class RecurrentActorCritic(nn.Module):
    """Encoder -> core(s) -> actor MLP -> head and critic MLP -> V (see module docstring)."""

    recurrent = True

    def __init__(self, spec: EnvSpec, nets: ActorCriticSpecs, kind: str, hidden: int,
                 layers: int, shared: bool, log_std_init: float = 0.0,
                 log_std_bounds: tuple[float, float] = (-20.0, 2.0),
                 sde: tuple[bool, bool] = (False, False)):
        super().__init__()
        actor, critic = nets
        self.encoder, features = make_encoder(actor)
        self.actor_core = Core(kind, features, hidden, layers, actor.ortho)
        self.critic_core = None if shared else Core(kind, features, hidden, layers, actor.ortho)
        self.layers = layers
        self.actor_body = mlp(hidden, actor.hidden, None, actor.activation, ortho=actor.ortho,
                              layer_norm=actor.layer_norm)
        last = actor.hidden[-1] if actor.hidden else hidden
        self.head: nn.Module = policy_head(spec, last, actor.ortho, log_std_init,
                                           log_std_bounds, sde)
        self.critic = mlp(hidden, critic.hidden, 1, critic.activation, out_gain=1.0,
                          ortho=critic.ortho, layer_norm=critic.layer_norm)
        self.state_dim = self.actor_core.state_dim * (1 if shared else 2)

    def initial_state(self, n: int, device: torch.device | None = None) -> torch.Tensor:
        """Zeros `[L, n, D]`: the state at the start of every episode."""
        device = device or next(self.parameters()).device
        return torch.zeros(self.layers, n, self.state_dim, device=device)

    def sequence(self, obs: torch.Tensor, state: torch.Tensor, starts: torch.Tensor,
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Run `obs` `[T, B, *obs_shape]` from `state` `[L, B, D]`, zeroing a row's state where
        `starts` `[T, B]` marks an episode start. Returns (actor features `[T, B, H]`, critic
        features `[T, B, H]`, the final state). Stretches of steps with no start anywhere run
        as one cuDNN/ATen call."""
        t_len, batch = starts.shape
        x = encode(self.encoder, obs_ops.apply(lambda t: t.reshape(t_len * batch, *t.shape[2:]), obs))
        x = x.reshape(t_len, batch, -1)
        inner = torch.nonzero(starts[1:].any(dim=1)).flatten().add(1).tolist()  # one host sync
        cut = [0, *inner, t_len]
        outs_a, outs_c = [], []
        for a, b in zip(cut[:-1], cut[1:], strict=True):
            state = state * (~starts[a]).to(state.dtype).view(1, batch, 1)
            out_a, out_c, state = self._run(x[a:b], state)
            outs_a.append(out_a)
            outs_c.append(out_c)
        return torch.cat(outs_a), torch.cat(outs_c), state

    def _run(self, x: torch.Tensor, state: torch.Tensor,
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.critic_core is None:
            out, state = self.actor_core(x, state)
            return out, out, state
        d = self.actor_core.state_dim
        out_a, s_a = self.actor_core(x, state[..., :d])
        out_c, s_c = self.critic_core(x, state[..., d:])
        return out_a, out_c, torch.cat([s_a, s_c], dim=-1)

    def step(self, obs: torch.Tensor, state: torch.Tensor, starts: torch.Tensor,
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step for `[B, *obs_shape]`: (actor features `[B, H]`, critic features, state)."""
        a, c, state = self.sequence(obs_ops.apply(lambda t: t.unsqueeze(0), obs), state,
                                    starts.unsqueeze(0))
        return a[0], c[0], state

    def dist(self, actor_features: torch.Tensor, mask: torch.Tensor | None = None):
        """The action distribution from the core's actor output `[..., H]` (flattened rows)."""
        h = self.actor_body(actor_features.reshape(-1, actor_features.shape[-1]))
        return self.head(h) if mask is None else self.head(h, mask)

    def value(self, critic_features: torch.Tensor) -> torch.Tensor:
        """V from the core's critic output, flattened to `[rows]`."""
        return self.critic(critic_features.reshape(-1, critic_features.shape[-1])).squeeze(-1)

    def export_step(self, obs: torch.Tensor, state: torch.Tensor,
                    mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(deterministic action, next state) without episode starts: the exported function
        (its caller passes a zero state at an episode's start). No data-dependent control flow,
        so tracing records all of it."""
        x = encode(self.encoder, obs).unsqueeze(0)
        out, _, state = self._run(x, state)
        return self.head.mode(self.dist(out[0], mask)), state

    @torch.no_grad()
    def act_step(self, obs: torch.Tensor, state: torch.Tensor, starts: torch.Tensor,
                 deterministic: bool = True, action_mask: torch.Tensor | None = None,
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """(action `[B]`/`[B, A]`, next state): what evaluation and export run each step."""
        a, _, state = self.step(obs, state, starts)
        dist = self.dist(a, action_mask)
        return (self.head.mode(dist) if deterministic else dist.sample()), state

