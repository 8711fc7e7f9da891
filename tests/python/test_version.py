"""The version is in one place (VERSION): sluice.__version__ and the CLI's
--version report it (docs/embedding.md, "Version")."""

import os
import subprocess

import sluice

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _version_file():
    with open(os.path.join(ROOT, "VERSION")) as f:
        return f.readline().strip()


def test_python_version_is_the_version_file():
    assert sluice.__version__ == _version_file()


def test_cli_version_is_the_version_file():
    build = os.environ.get("SLUICE_BUILD_DIR", os.path.join(ROOT, "build"))
    out = subprocess.run([os.path.join(build, "sluice"), "--version"], check=True,
                         capture_output=True, text=True).stdout
    assert out == "sluice " + _version_file() + "\n"
