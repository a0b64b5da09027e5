"""Which packages the wheel holds: every package under rltrain/, found rather than listed (a
hand-kept list silently dropped a new subpackage), and conf/ (at the top of the repo, so that the
config tree reads as the project's own) shipped inside the package as `rltrain.conf`, each of its
folders a package (shared/notes/dependency-facts.md section 2). Everything else is pyproject.toml's.
"""

from setuptools import find_packages, setup

CONF = ["rltrain.conf", *(f"rltrain.conf.{name}" for name in find_packages("conf"))]

setup(
    packages=[*find_packages(include=["rltrain", "rltrain.*"]), *CONF],
    package_dir={"rltrain": "rltrain", "rltrain.conf": "conf"},
)
