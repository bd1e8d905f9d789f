"""Make tests/fixtures/raytune_sweep/: a real Ray Tune experiment folder (3 trials, one diverges).

Run with a Python that has ``ray[tune]`` (not a project dependency: only this fixture needs it):

    python -m venv /tmp/rayenv && /tmp/rayenv/bin/pip install "ray[tune]==2.60.0"
    /tmp/rayenv/bin/python scripts/make_raytune_fixture.py tests/fixtures/raytune_sweep

The trainable is a real training loop: full-batch gradient descent on a least-squares problem
(numpy), reporting loss and grad_norm every iteration through ``tune.report``. The learning rate is
the swept hyper-parameter; lr 8.0 is far beyond 2/L for this problem, so that trial grows geometrically until the loss overflows to inf (iteration 81) and then NaN,
like a too-high LR does in a network. Tune writes params.json, result.json, progress.csv (and its
own pickles and state files) per trial, which is what ``autopsy sweep`` reads.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
from ray import tune

ITERS = 100


def trainable(config: dict) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 8)) * np.linspace(0.5, 2.0, 8)
    w_true = rng.normal(size=8)
    y = x @ w_true + 0.1 * rng.normal(size=64)
    w = np.zeros(8)
    with np.errstate(all="ignore"):
        for _ in range(ITERS):
            r = x @ w - y
            loss = float(np.mean(r**2))
            g = 2 * x.T @ r / len(y)
            w = w - config["lr"] * g
            tune.report({"loss": loss, "grad_norm": float(np.linalg.norm(g)), "learning_rate": config["lr"]})


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    if out.exists():
        shutil.rmtree(out)
    tuner = tune.Tuner(
        trainable,
        param_space={"lr": tune.grid_search([0.01, 0.05, 8.0]), "batch_size": 64},
        run_config=tune.RunConfig(name=out.name, storage_path=str(out.parent), verbose=0),
    )
    tuner.fit()


if __name__ == "__main__":
    main()
