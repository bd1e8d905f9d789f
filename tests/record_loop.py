"""A plain PyTorch loop with the Recorder and a planted NaN; run in-process by the tests, or as a
script (``python tests/record_loop.py OUT --direction forward --sleep 0.2``) for the kill/watch tests."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from record_plants import DEVICE, Plant, collate, tiny_llama, token_rows  # noqa: E402

PLANT_LAYER = 2
PLANT_STEP = 4


def train(out: Path, direction: str = "forward", action: str = "record", steps: int = 7, deep: bool = False,
          sleep: float = 0.0, plant_step: int = PLANT_STEP, layers: int = 4):
    from autopsy.record import Recorder

    model = tiny_llama(layers=layers)
    plant = Plant(model.model.layers[PLANT_LAYER].mlp, plant_step, direction)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rec = Recorder(out, model=model, on_nonfinite=action, deep=deep, update_every=2)
    rows = token_rows(4 * steps)
    for step in range(1, steps + 1):
        plant.current = step
        batch = {k: v.to(DEVICE) for k, v in collate(rows[(step - 1) * 4: step * 4]).items()}
        batch["idx"] = torch.arange((step - 1) * 4, step * 4, device=DEVICE)
        loss = model(**{k: v for k, v in batch.items() if k != "idx"}).loss
        loss.backward()
        if rec.step(loss=loss, optimizer=opt, batch=batch):
            opt.step()
        opt.zero_grad()
        if rec.stopped:
            break
        if sleep:
            time.sleep(sleep)
    rec.close()
    assert next(model.parameters()).device.type == DEVICE  # the run happened where it was asked to
    return model, rec


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--direction", default="forward")
    ap.add_argument("--action", default="record")
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--plant-step", type=int, default=PLANT_STEP)
    ap.add_argument("--sleep", type=float, default=0.0)
    a = ap.parse_args()
    train(a.out, a.direction, a.action, a.steps, sleep=a.sleep, plant_step=a.plant_step)
