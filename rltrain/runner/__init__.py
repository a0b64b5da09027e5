"""The Runner and the two training loops (on-policy, off-policy)."""
