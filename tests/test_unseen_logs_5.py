"""Shapes from the fifth round of unseen logs (threads quoted with their source on each case): what the
diagnosis or the reader got wrong before, asserted on what the shape means, so cousins pass too."""

from __future__ import annotations

import math
from pathlib import Path

from autopsy.pipeline import analyze


def _run(tmp_path: Path, log: str, config: str | None = None, name: str = "log.txt"):
    (tmp_path / name).write_text(log)
    if config is not None:
        (tmp_path / "config.txt").write_text(config)
    return analyze(tmp_path)


def _verdict(a):
    return a.diagnosis.verdict.status, a.diagnosis.verdict.root_cause


def _series(a, metric: str) -> list[float]:
    df = a.run.scalars
    return df[df["metric"] == metric].sort_values("step")["value"].tolist()


# https://github.com/HuiZhang0812/DiffusionAD/issues/32 (train.py prints its args, then one line per epoch)
DIFFUSIONAD_ARGS = ("args1.json defaultdict(<class 'str'>, {'img_size': [256, 256], 'Batch_Size': 4, 'EPOCHS': 3000, "
                    "'T': 1000, 'base_channels': 128, 'beta_schedule': 'linear', 'loss_type': 'l2', 'diffusion_lr': "
                    "0.0001, 'seg_lr': 1e-05, 'random_slice': True, 'weight_decay': 0.0, 'save_imgs': True, "
                    "'save_vids': False, 'dropout': 0, 'noise_fn': 'gauss', 'channels': 3, 'eval_normal_t': 200, "
                    "'eval_noisier_t': 400, 'output_path': 'outputs', 'arg_num': '1'})\n")


def test_a_printed_args_dict_is_configuration_not_a_metrics_record(tmp_path: Path):
    a = _run(tmp_path, "class carpet\n" + DIFFUSIONAD_ARGS)
    assert a.run.scalars.empty  # eval_normal_t / Batch_Size are settings, not an eval metric or a signal
    assert "hf_trainer" not in a.run.frameworks
    assert _verdict(a)[0] != "healthy"  # nothing was judged


def test_one_counter_led_nan_loss_line_is_read_and_never_healthy(tmp_path: Path):
    a = _run(tmp_path, "class carpet\n" + DIFFUSIONAD_ARGS + "Epoch:0, Train loss: nan:\n")
    loss = _series(a, "loss")
    assert len(loss) == 1 and math.isnan(loss[0])
    assert _verdict(a)[0] != "healthy"


def test_prose_that_mentions_a_loss_is_still_not_a_metric(tmp_path: Path):
    a = _run(tmp_path, "In epoch 3 the loss: 0.5 was fine, then it diverged.\nSee the attached screenshot.\n")
    assert a.run.scalars.empty
