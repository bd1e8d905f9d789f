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
    ap.add_argument("--hf", action="store_true", help="the HF Trainer with fsdp='full_shard' (FSDP2) and AutopsyCallback")
    a = ap.parse_args()
    if a.hf:
        return _hf(a)
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


def _hf(a: argparse.Namespace) -> None:
    """The HF Trainer sharding with FSDP2 through accelerate (one rank: RANK etc. set by the test), a NaN planted in
    model.layers.2.mlp's gradient at step 4; OUT/result.json: the Trainer's own grad_norm per step."""
    from record_plants import Plant, collate, tiny_llama, token_rows
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from autopsy.record import AutopsyCallback

    model = tiny_llama()
    plant = Plant(model.model.layers[2].mlp, 4, "backward")

    class StepOfPlant(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):  # noqa: ANN001, ANN201, ARG002
            plant.current = state.global_step + 1

    args = TrainingArguments(output_dir=a.out, max_steps=a.steps, per_device_train_batch_size=4, learning_rate=1e-3,
                             logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, max_grad_norm=1.0, seed=0,
                             fsdp="full_shard", fsdp_config={"fsdp_version": 2,
                                                             "transformer_layer_cls_to_wrap": ["LlamaDecoderLayer"]})
    trainer = Trainer(model=model, args=args, train_dataset=token_rows(4 * a.steps), data_collator=collate,
                      callbacks=[StepOfPlant(), AutopsyCallback(on_nonfinite=a.action)])
    trainer.train()
    logged = {h["step"]: h["grad_norm"] for h in trainer.state.log_history if "grad_norm" in h}
    (Path(a.out) / "result.json").write_text(json.dumps({"hf_norms": logged}))


if __name__ == "__main__":
    main()
