"""Round 41 (2026-11-29): a learning rate printed in fixed point (``lr: 0.0000``) is not a zero, and Composer's
one-metric console lines are read. Each log is quoted from its source (named above it) or, where said, generated in a
framework's own format."""

from __future__ import annotations

from pathlib import Path

from autopsy.ingest.textlog import fixed_zero_decimals
from autopsy.metrics import LR_PRINT_DECIMALS
from tests.test_unseen_logs import _series, _verdict
from tests.test_unseen_logs_33 import _run_in
from tests.test_unseen_logs_39 import _finding

# https://github.com/mosaicml/examples/blob/main/llm/README.md ("You should see logs being printed to your terminal like
# so", verbatim): Composer < 0.13's ConsoleLogger prints one metric a line, every float as f"{data:.4f}"
# (composer/loggers/logger.py format_log_data_value). The MPT-125M recipe warms its LR up to 6e-4 over 100 batches, so
# at batches 8 and 9 it is ~5e-5, printed 0.0000: a healthy start of pre-training
MOSAIC_EXAMPLES_README = """[batch=7/5000]: trainer/grad_accum: 4
[batch=7/5000]: loss/train/total: 9.8454
[batch=7/5000]: metrics/train/LanguageCrossEntropy: 9.8454
[batch=7/5000]: metrics/train/Perplexity: 18871.5430
[batch=8/5000]: wall_clock/train: 16.8334
[batch=8/5000]: wall_clock/val: 0.0000
[batch=8/5000]: wall_clock/total: 16.8334
[batch=8/5000]: lr-DecoupledAdamW/group0: 0.0000
[batch=8/5000]: trainer/global_step: 8
[batch=8/5000]: trainer/batch_idx: 8
[trace]: algorithm_traces/GradientClipping/Event.AFTER_TRAIN_BATCH:1

[batch=8/5000]: trainer/grad_accum: 4
[batch=8/5000]: loss/train/total: 9.7484
[batch=8/5000]: metrics/train/LanguageCrossEntropy: 9.7484
[batch=8/5000]: metrics/train/Perplexity: 17127.0938
[batch=9/5000]: wall_clock/train: 18.3862
[batch=9/5000]: wall_clock/val: 0.0000
[batch=9/5000]: wall_clock/total: 18.3862
[batch=9/5000]: lr-DecoupledAdamW/group0: 0.0000
[batch=9/5000]: trainer/global_step: 9
[batch=9/5000]: trainer/batch_idx: 9

train                           0%|                         | 9/5000 [00:18<2:15:12,  1.63s/ba, loss/train/total=9.7484]
"""


def test_composers_one_metric_lines_are_read_at_their_batch(tmp_path: Path):
    a = _run_in(tmp_path, 0, MOSAIC_EXAMPLES_README)
    df = a.run.scalars
    lr = df[df["metric"] == "learning_rate"].sort_values("step")
    assert lr["step"].tolist() == [8, 9] and lr["value"].tolist() == [0.0, 0.0]
    assert lr["line"].tolist() == [8, 20]
    assert _series(a, "loss")[:2] == [9.8454, 9.7484]
    loss = df[df["metric"] == "loss"].sort_values("line")
    assert loss["step"].tolist()[:2] == [7, 8] and loss["line"].tolist()[:2] == [2, 14]


def test_a_warmup_lr_printed_as_four_zero_decimals_is_no_stalled_schedule(tmp_path: Path):
    a = _run_in(tmp_path, 0, MOSAIC_EXAMPLES_README)
    fact = a.run.config.fact(LR_PRINT_DECIMALS)
    assert fact is not None and fact.value == 4 and fact.where == "line 8"
    assert _finding(a, "LRZ001") is None
    assert _verdict(a) == ("healthy", "healthy")


def test_the_printed_decimals_of_a_zero():
    lines = b"lr: 0.0000 loss: 1.2\n'learning_rate': 0.0, 'epoch': 0.1\nLR 0.00000000 | x\nlr 0.000e+00\nlr: 0.0001\nloss 0.00\n"
    assert fixed_zero_decimals(lines, 1, 1, "lr") == 4
    assert fixed_zero_decimals(lines, 1, 2, "learning_rate") == 0  # Python's repr of a float: a zero
    assert fixed_zero_decimals(lines, 1, 3, "lr") == 8  # the key found in another case
    assert fixed_zero_decimals(lines, 1, 4, "lr") == 0  # an exponent: a zero
    assert fixed_zero_decimals(lines, 1, 5, "lr") == 0
    assert fixed_zero_decimals(lines, 1, 6, "lr") is None  # the line does not name it
    assert fixed_zero_decimals(lines, 1, 9, "lr") is None  # no such line in the chunk
    assert fixed_zero_decimals(lines, 3, 3, "lr") == 4  # numbered from the chunk's first line


def _composer_block(batch: int, loss: str, lr: str) -> str:
    return (f"[batch={batch}/4800]:\n\t Train time/batch: {batch - 1}\n\t Train loss/train/total: {loss}\n"
            f"\t Train metrics/train/LanguageCrossEntropy: {loss}\n\t Train lr-DecoupledAdamW/group0: {lr}\n")


def test_a_nan_run_whose_lr_prints_zero_keeps_the_lr_a_suspect(tmp_path: Path):
    # generated in the format of Composer >= 0.13's ConsoleLogger.log_to_console (a header line, then
    # "\t Train {name}: {value:.4f}" per metric), six batches of a warmup whose LR prints 0.0000, then NaN
    log = "".join(_composer_block(b, v, "0.0000") for b, v in
                  [(1, "12.0420"), (2, "11.9911"), (3, "11.9823"), (4, "11.9701"), (5, "11.9650"), (6, "nan")])
    a = _run_in(tmp_path, 0, log)
    assert _finding(a, "LRZ001") is None
    num = _finding(a, "NUM001")
    assert num is not None and num.first_step == 6
    text = " ".join(str(x) for f in a.diagnosis.findings for x in (f.message, *f.remedies))
    assert "too small to blow the weights up" not in text
    assert "which the log does not resolve" in text


def test_a_stalled_lr_printed_in_repr_or_with_eight_decimals_is_still_a_stall(tmp_path: Path):
    # the same Composer format with the LR printed by a loop that keeps its zeros exact (0.0, Python's repr), and
    # with eight decimals (the resolution of ViTPose_pytorch#9's "LR 0.00000000", tests/test_unseen_logs_27.py)
    for i, lr in enumerate(("0.0", "0.00000000")):
        log = "".join(_composer_block(b, "11.0000", lr) for b in range(1, 8))
        a = _run_in(tmp_path, i, log)
        assert _finding(a, "LRZ001") is not None, lr
