"""Environments behind one batched, torch-in/torch-out `VecEnv` contract."""
