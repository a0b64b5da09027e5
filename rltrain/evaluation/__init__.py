"""Evaluation: deterministic episodes of a policy, and `rltrain eval` of a saved checkpoint.

    episodes.py  exactly N episodes spread over a vector env's rows, and their `eval/*` metrics
    agent.py     an agent rebuilt from a checkpoint alone (evaluation, export and resume use it)
    command.py   `rltrain eval` / `rltrain.evaluate()`: a checkpoint evaluated, results written
    video.py     MP4s of evaluated episodes (PyAV, an optional extra)
"""
