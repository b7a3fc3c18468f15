"""pip install DIR: this directory as the package autokernel_ops.

Plain setuptools and no pyproject.toml, so that pip builds it with the
setuptools already installed, offline, without an isolated build
environment: `pip install --no-index DIR` needs nothing from the network.
"""
import json
import os

from setuptools import setup

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "manifest.json")) as f:
    manifest = json.load(f)

setup(
    name="autokernel-ops",
    # the tool's version, less its commit suffix (not a PEP 440 version)
    version=manifest["tool"].split("-")[0],
    description="git-autokernel kernels as torch.ops.autokernel",
    packages=["autokernel_ops"],
    package_dir={"autokernel_ops": "."},
    package_data={"autokernel_ops": ["manifest.json", "include/*.h",
                                     "kernels/*/*"]},
    zip_safe=False,
)
