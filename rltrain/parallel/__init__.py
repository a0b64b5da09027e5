"""Data-parallel training under `torchrun`: one agent, many processes.

    world.py          this process's place in a job (`World`), and `SOLO`, the single-process
                      stand-in whose collectives are the identity (what a plain run calls)
    process_group.py  the collectives over torch.distributed (gloo on CPU, nccl on CUDA)
    torchrun.py       a torchrun job's ranks: the same run on each, rank 0 picks its folder
"""
