"""A plain FSDP2 loop (``torch.distributed.fsdp.fully_shard`` per decoder layer and on the model) with the flight
recorder, on CPU (gloo), run as its own processes by tests/test_record_fsdp.py (one per rank: RANK, WORLD_SIZE,
MASTER_PORT set by the test)::

    python tests/record_fsdp.py OUT [--action stop] [--nan-rank 1] [--steps 7]

At step 4, after backward, one element of rank --nan-rank's own shard of model.layers.2.mlp.down_proj.weight's
gradient is set to NaN (a fault only that rank sees; the other ranks' shards stay finite). OUT/result[.rankN].json:
the steps taken.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PARAM = "model.layers.2.mlp.down_proj.weight"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--action", default="stop")
    ap.add_argument("--nan-rank", type=int, default=1)
    ap.add_argument("--steps", type=int, default=7)
    a = ap.parse_args()
    import torch
    import torch.distributed as dist
    from record_plants import collate, tiny_llama, token_rows
    from torch.distributed.fsdp import fully_shard

    from autopsy.record import Recorder

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = tiny_llama()
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rec = Recorder(a.out, model=model, on_nonfinite=a.action)
    rows, taken = token_rows(4 * a.steps), []
    for step in range(1, a.steps + 1):
        batch = collate(rows[4 * (step - 1):4 * step])
        loss = model(**batch).loss
        loss.backward()
        if step == 4 and rank == a.nan_rank:
            with torch.no_grad():
                dict(model.named_parameters())[PARAM].grad.to_local().view(-1)[0] = float("nan")
        if rec.step(loss=loss, optimizer=opt, batch=batch):
            opt.step()
            taken.append(step)
        opt.zero_grad()
        if rec.stopped:
            break
    rec.close()
    (Path(a.out) / ("result.json" if rank == 0 else f"result.rank{rank}.json")).write_text(json.dumps({"taken": taken}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
