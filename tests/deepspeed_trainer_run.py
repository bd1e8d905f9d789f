"""A real HF Trainer run under DeepSpeed (CPU accelerator, gloo, one rank) writing a real output dir: checkpoints
as the Trainer saves them under DeepSpeed (checkpoint-N/global_stepN/ with the model and optimizer states,
zero_to_fp32.py), trainer_state.json, TensorBoard events. Its own process (DeepSpeed sets up torch.distributed),
run by tests/test_deepspeed_runs.py::

    python tests/deepspeed_trainer_run.py OUT --stage 3 --lr 5 --steps 40
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--stage", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--steps", type=int, default=40)
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(DS_ACCELERATOR="cpu", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1",
                      LOCAL_RANK="0")
    from record_plants import collate, tiny_llama, token_rows
    from transformers import Trainer, TrainingArguments

    ds = {"train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto", "gradient_accumulation_steps": "auto",
          "gradient_clipping": "auto", "zero_optimization": {"stage": a.stage}, "bf16": {"enabled": "auto"}}
    args = TrainingArguments(output_dir=a.out, max_steps=a.steps, per_device_train_batch_size=4, learning_rate=a.lr,
                             logging_steps=2, save_steps=a.steps // 4, report_to=["tensorboard"], use_cpu=True, bf16=True,
                             max_grad_norm=0.0, seed=0, deepspeed=ds, lr_scheduler_type="constant")
    Trainer(model=tiny_llama(), args=args, train_dataset=token_rows(5 * a.steps), data_collator=collate).train()


if __name__ == "__main__":
    main()
