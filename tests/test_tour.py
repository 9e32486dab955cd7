"""`python -m mtia_lab`: the terminal tour, run as a user runs it (a fresh process)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mtia_lab.__main__ import main
from mtia_lab.tour import CHAPTERS, TOUR, tutorials

REPO = Path(__file__).resolve().parents[1]


def run_module(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "mtia_lab", *args], capture_output=True,
                          text=True, env=env, timeout=120, cwd=REPO)


def test_the_tour_tells_notebook_one_in_the_terminal():
    done = run_module("--width", "80")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    flat = " ".join(out.split())  # sentences may wrap at 80 columns
    assert "device mtia_sim:0" in flat and "same as the CPU: True" in flat
    # the summary and the tree of one SGD step, and kinds() agreeing with the summary's count
    headline = re.search(r"trace 'one SGD step': (\d+) events \(([^)]*)\), \d+ ops", flat)
    assert headline, "no summary of the training step"
    served = dict((k, int(n)) for k, n in (part.split() for part in headline[2].split(", ")))
    kinds = ast.literal_eval(re.search(r"events per kind: (\{[^}]*\})", flat)[1])
    assert kinds == served and sum(kinds.values()) == int(headline[1])
    assert "├── forward" in out and "└── backward" in out and "fc1" in out
    # a fusion plan, and where to go next: every tutorial of the repository
    assert "fusion plan 'forward_1': 8 -> 1 kernels" in flat
    assert "compiled matches eager: True" in flat
    for name, title in tutorials():
        assert name in flat and title in flat
    assert all(len(line) <= 80 for line in out.splitlines())  # fits the console it was given
    assert "…" not in out  # and nothing was cut to fit it


def test_help_lists_every_chapter(capsys):
    with pytest.raises(SystemExit) as done:  # in this process: the tour above ran in its own
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for name, fn in CHAPTERS.items():
        assert f"  {name:<8} {fn.__doc__.splitlines()[0]}" in out
    assert f"With no chapter, the tour: {' '.join(TOUR)}." in out
    with pytest.raises(SystemExit) as wrong:
        main(["colours"])
    err = capsys.readouterr().err
    assert wrong.value.code == 2
    assert f"unknown chapter 'colours': choose from {', '.join(CHAPTERS)}" in err
    assert "[]" not in err


def test_tutorial_titles_come_from_the_notebooks(tmp_path):
    cell = {"cell_type": "markdown", "source": ["# 09 · Something new\n", "more"]}
    (tmp_path / "09_new.ipynb").write_text(json.dumps({"cells": [cell]}))
    (tmp_path / "10_broken.ipynb").write_text("{not json")
    (tmp_path / "notes.ipynb").write_text("{}")  # not a numbered tutorial
    assert tutorials(tmp_path) == [("09_new.ipynb", "09 · Something new"),
                                   ("10_broken.ipynb", "10_broken")]
