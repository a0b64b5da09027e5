"""`ActorCritic`: actor and critic networks with a categorical or Gaussian head (PPO, A2C); each
has its own encoder, or one encoder feeds both (`net.share_encoder`)."""

from __future__ import annotations

import torch
from torch import nn

from rltrain.nets.encoder import encode, make_encoder
from rltrain.nets.mlp import mlp
from rltrain.nets.sde import policy_head
from rltrain.nets.spec import ActorCriticSpecs
from rltrain.types import EnvSpec


class ActorCritic(nn.Module):
    """Actor and critic MLPs with a categorical or Gaussian action head, on their own encoders
    (see `nets/encoder.py`) or, with `share_encoder`, on one encoder trained by both losses
    (SB3's CnnPolicy; the encoder is then `actor_encoder` and `critic_encoder` is None).
    `sde=(True, use_expln)` gives Box actions a gSDE head (`nets/sde.py`) instead of the
    state-independent log-std."""

    def __init__(self, spec: EnvSpec, nets: ActorCriticSpecs, log_std_init: float = 0.0,
                 log_std_bounds: tuple[float, float] = (-20.0, 2.0), share_encoder: bool = False,
                 sde: tuple[bool, bool] = (False, False)):
        super().__init__()
        actor, critic = nets
        self.shared = share_encoder
        self.actor_encoder, features = make_encoder(actor)
        last = actor.hidden[-1] if actor.hidden else features
        self.actor_body = mlp(features, actor.hidden, None, actor.activation, ortho=actor.ortho,
                              layer_norm=actor.layer_norm)
        self.head: nn.Module = policy_head(spec, last, actor.ortho, log_std_init,
                                           log_std_bounds, sde)
        self.critic_encoder, features = (None, features) if share_encoder else make_encoder(critic)
        self.critic = mlp(features, critic.hidden, 1, critic.activation, out_gain=1.0,
                          ortho=critic.ortho, layer_norm=critic.layer_norm)

    def dist(self, obs: torch.Tensor, mask: torch.Tensor | None = None):
        """The action distribution at `obs` [B, *obs_shape]; `mask` [B, n]: valid actions."""
        return self._head(self.actor_body(encode(self.actor_encoder, obs)), mask)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V(obs) as a [B] tensor."""
        encoder = self.actor_encoder if self.shared else self.critic_encoder
        return self.critic(encode(encoder, obs)).squeeze(-1)

    def dist_value(self, obs: torch.Tensor, mask: torch.Tensor | None = None):
        """(the action distribution, V(obs) [B]) at `obs`; a shared encoder runs once."""
        if not self.shared:
            return self.dist(obs, mask), self.value(obs)
        features = encode(self.actor_encoder, obs)
        return self._head(self.actor_body(features), mask), self.critic(features).squeeze(-1)

    def _head(self, features: torch.Tensor, mask: torch.Tensor | None):
        """The head's distribution; only a categorical head takes an action mask."""
        return self.head(features) if mask is None else self.head(features, mask)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True,
            action_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Action for evaluation and export (`action_mask`: never an invalid action)."""
        dist = self.dist(obs, action_mask)
        return self.head.mode(dist) if deterministic else dist.sample()
