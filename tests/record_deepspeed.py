"""A plain DeepSpeed loop with the flight recorder, on CPU (DeepSpeed's CPU accelerator, gloo, one rank), run as
its own process by tests/test_record_deepspeed.py (``deepspeed.init_distributed`` sets up torch.distributed, which
must not leak into the other tests' process)::

    python tests/record_deepspeed.py OUT --stage 2 --direction backward --action skip [--steps 7] [--bf16]

A NaN is planted in model.layers.2.mlp at step 4 (record_plants.Plant). The loop is DeepSpeed's usual one:
``engine.backward(loss)``, the recorder, then ``engine.step()`` every step (DeepSpeed counts micro-steps in it;
after a skipped step the recorder has zeroed the gradients it holds). Writes OUT/result.json: DeepSpeed's own
global gradient norm per step (``engine.get_global_grad_norm()``, read after each step), the ZeRO stage, the
steps taken, and OUT/final/model.safetensors (the weights at the end, gathered under ZeRO-3).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--stage", type=int, default=2)
    ap.add_argument("--direction", default="backward")
    ap.add_argument("--action", default="skip")
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--element-nan", default=None, metavar="PARAM",
                    help="instead of the plant: one NaN element in PARAM's gradient, on rank --nan-rank only")
    ap.add_argument("--nan-rank", type=int, default=1)
    ap.add_argument("--hf", action="store_true", help="the HF Trainer with deepspeed=... and AutopsyCallback instead")
    a = ap.parse_args()
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    if "RANK" not in os.environ:  # one rank; several: the test sets RANK, WORLD_SIZE, MASTER_PORT per process
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), RANK="0", WORLD_SIZE="1",
                          LOCAL_RANK="0")
    rank = int(os.environ["RANK"])
    import deepspeed
    import torch
    from record_plants import Plant, collate, tiny_llama, token_rows

    from autopsy.record import Recorder
    from autopsy.record.core import _save_weights

    if a.hf:
        return _hf(a)
    deepspeed.init_distributed(dist_backend="gloo")
    model = tiny_llama()
    plant = Plant(model.model.layers[2].mlp, 0 if a.element_nan else 4, a.direction)
    if a.element_nan and rank == a.nan_rank:
        def one_nan(g: torch.Tensor) -> torch.Tensor:
            if plant.current != 4:
                return g
            g = g.clone()
            g.view(-1)[0] = float("nan")
            return g

        dict(model.named_parameters())[a.element_nan].register_hook(one_nan)
    cfg = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1, "steps_per_print": 10_000,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}},
           "zero_optimization": {"stage": a.stage}, **({"bf16": {"enabled": True}} if a.bf16 else {})}
    engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
    out = Path(a.out)  # one folder for every rank: rank N writes record.rankN.jsonl, result.rankN.json
    rec = Recorder(out, model=engine.module, on_nonfinite=a.action)
    rows = token_rows(4 * a.steps)
    norms, taken = {}, []
    for step in range(1, a.steps + 1):
        plant.current = step
        batch = collate(rows[4 * (step - 1):4 * step])
        loss = engine(**batch).loss
        engine.backward(loss)
        if rec.step(loss=loss, optimizer=optimizer, batch=batch):
            taken.append(step)
        engine.step()
        norms[step] = engine.get_global_grad_norm()
        if rec.stopped:
            break
    rec.close()
    params = list(engine.module.parameters())
    ctx = deepspeed.zero.GatheredParameters(params, modifier_rank=None) if a.stage == 3 else torch.no_grad()
    with ctx:
        if rank == 0:
            (out / "final").mkdir(parents=True, exist_ok=True)
            _save_weights(engine.module, out / "final" / "model.safetensors", {})
    (out / ("result.json" if rank == 0 else f"result.rank{rank}.json")).write_text(json.dumps({
        "stage": a.stage, "taken": taken, "optimizer": type(optimizer).__name__,
        "ds_norms": {k: (None if v is None else float(v)) for k, v in norms.items()}}))


def _hf(a: argparse.Namespace) -> None:
    """The HF Trainer (accelerate drives DeepSpeed: engine.backward and engine.step inside accelerator.backward)
    with the recorder's callback; OUT/result.json holds the Trainer's own logged grad_norm per step."""
    from record_plants import Plant, collate, tiny_llama, token_rows
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from autopsy.record import AutopsyCallback

    model = tiny_llama()
    plant = Plant(model.model.layers[2].mlp, 4, a.direction)

    class StepOfPlant(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):  # noqa: ANN001, ANN201, ARG002
            plant.current = state.global_step + 1

    ds = {"train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto", "gradient_accumulation_steps": "auto",
          "gradient_clipping": "auto", "zero_optimization": {"stage": a.stage}}
    args = TrainingArguments(output_dir=a.out, max_steps=a.steps, per_device_train_batch_size=4, learning_rate=1e-3,
                             logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, max_grad_norm=1.0, seed=0,
                             deepspeed=ds)
    trainer = Trainer(model=model, args=args, train_dataset=token_rows(4 * a.steps), data_collator=collate,
                      callbacks=[StepOfPlant(), AutopsyCallback(on_nonfinite=a.action)])
    trainer.train()
    logged = {h["step"]: h["grad_norm"] for h in trainer.state.log_history if "grad_norm" in h}
    (Path(a.out) / "result.json").write_text(json.dumps({"stage": a.stage, "hf_norms": logged}))


if __name__ == "__main__":
    main()
