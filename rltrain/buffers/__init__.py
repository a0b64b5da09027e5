"""Rollout storage for on-policy algorithms, replay storage for off-policy ones."""
