"""Optional Hydra plugins: a sweeper or launcher a command line chooses that is not installed is
one line naming the extra to install, before Hydra starts."""

from __future__ import annotations

import importlib.util
import shutil

from rltrain.errors import UserError

# (config group, option) -> (module the plugin installs, what to `pip install` for it)
PLUGINS: dict[tuple[str, str], tuple[str, str]] = {
    ("hydra/sweeper", "optuna"): ("hydra_plugins.hydra_optuna_sweeper", '"rltrain[sweep]"'),
    ("hpo", "*"): ("hydra_plugins.hydra_optuna_sweeper", '"rltrain[sweep]"'),
    ("hydra/launcher", "joblib"): ("hydra_plugins.hydra_joblib_launcher", '"rltrain[sweep]"'),
    ("hydra/launcher", "submitit_local"): ("hydra_plugins.hydra_submitit_launcher",
                                           '"rltrain[slurm]"'),
    ("hydra/launcher", "submitit_slurm"): ("hydra_plugins.hydra_submitit_launcher",
                                           '"rltrain[slurm]"'),
    ("hydra/launcher", "ray"): ("hydra_plugins.hydra_ray_launcher", '"rltrain[ray]"'),
    ("hydra/launcher", "ray_aws"): ("hydra_plugins.hydra_ray_launcher", '"rltrain[ray]"'),
    ("hydra/sweeper", "nevergrad"): ("hydra_plugins.hydra_nevergrad_sweeper",
                                     "hydra-nevergrad-sweeper"),
    ("hydra/sweeper", "ax"): ("hydra_plugins.hydra_ax_sweeper", "hydra-ax-sweeper"),
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package is missing
        return False


def check_plugins(argv: list[str]) -> None:
    """Raise a one-line `UserError` naming the extra to install when a chosen plugin is missing."""
    for arg in argv:
        key, sep, value = arg.lstrip("+~").partition("=")
        if not sep:
            continue
        module, install = PLUGINS.get((key, value)) or PLUGINS.get((key, "*")) or (None, None)
        if module is None:
            continue
        if not _installed(module):
            name = module.rpartition(".")[2].replace("_", "-")
            raise UserError(f"{key}={value} needs the Hydra plugin {name}: pip install {install}")
        if key == "hpo":
            _check_sqlalchemy()
        if value == "submitit_slurm" and shutil.which("srun") is None:
            raise UserError("hydra/launcher=submitit_slurm submits to SLURM, but srun is not on "
                            "this machine: run it on the cluster, or try "
                            "hydra/launcher=submitit_local")


def _check_sqlalchemy() -> None:
    """optuna 2.10 (the one hydra-optuna-sweeper allows) cannot use SQLite with SQLAlchemy 2."""
    # start-up: importlib.metadata (~15 ms, email and csv with it) only for +hpo= searches
    from importlib.metadata import PackageNotFoundError, version

    try:
        major = int(version("sqlalchemy").split(".")[0])
    except PackageNotFoundError:
        major = 0
    if major >= 2:
        raise UserError("the study's SQLite storage needs sqlalchemy<2 with optuna 2.10 "
                        f'(found sqlalchemy {version("sqlalchemy")}): pip install "rltrain[sweep]"')
