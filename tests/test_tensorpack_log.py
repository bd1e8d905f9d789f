"""tensorpack's ScalarPrinter: one ``[MMDD HH:MM:SS @monitor.py:N] name: value`` line per scalar after each
``Epoch N (global_step S) finished`` line (tensorpack callbacks/monitor.py and train/base.py)."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _series, _verdict

# https://github.com/tensorpack/tensorpack/issues/1383 (FasterRCNN example, as pasted): the run ends where its
# schedule says; nothing failed
TENSORPACK_1383 = '[0119 15:37:31 @base.py:273] Start Epoch 16 ...\n100%|##########################################################################################################################|500/500[01:49<00:00, 4.55it/s]\n[0119 15:39:21 @base.py:283] Epoch 16 (global_step 8000) finished, time:1 minute 49 seconds.\n[0119 15:39:22 @saver.py:82] Model saved to /training/logs/gillsoft/model-8000.\n[0119 15:39:22 @monitor.py:474] GPUUtil/0: 94.606\n[0119 15:39:22 @monitor.py:474] HostFreeMemory (GB): 52.046\n[0119 15:39:22 @monitor.py:474] PeakMemory(MB)/gpu:0: 3799.9\n[0119 15:39:22 @monitor.py:474] QueueInput/queue_size: 50\n[0119 15:39:22 @monitor.py:474] Throughput (samples/sec): 4.5542\n[0119 15:39:22 @monitor.py:474] fastrcnn_losses/box_loss: 0.12002\n[0119 15:39:22 @monitor.py:474] fastrcnn_losses/label_loss: 0.14164\n[0119 15:39:22 @monitor.py:474] fastrcnn_losses/label_metrics/accuracy: 0.95489\n[0119 15:39:22 @monitor.py:474] fastrcnn_losses/label_metrics/false_negative: 0.409\n[0119 15:39:22 @monitor.py:474] fastrcnn_losses/label_metrics/fg_accuracy: 0.49275\n[0119 15:39:22 @monitor.py:474] fastrcnn_losses/num_fg_label: 33.171\n'


def _epochs(costs: list[str], colour: bool = False) -> str:
    """Epoch ends and stat blocks as tensorpack prints them (the prefix green on a terminal when ``colour``)."""
    g, r = ("\x1b[32m", "\x1b[0m") if colour else ("", "")
    out = []
    for e, c in enumerate(costs, start=1):
        out.append(f"{g}[0120 10:{e:02d}:00 @base.py:283]{r} Epoch {e} (global_step {e * 500}) finished, time:1 minute.")
        out.append(f"{g}[0120 10:{e:02d}:01 @saver.py:82]{r} Model saved to train_log/model-{e * 500}.")
        for k, v in (("QueueInput/queue_size", "50"), ("learning_rate", "0.01"), ("total_cost", c),
                     ("train-error-top1", "0.71"), ("wd_cost", "0.012")):
            out.append(f"{g}[0120 10:{e:02d}:01 @monitor.py:474]{r} {k}: {v}")
    return "\n".join(out) + "\n"


def test_the_stats_of_an_epoch_are_read_at_its_global_step(tmp_path: Path):
    a = _run(tmp_path, TENSORPACK_1383)
    assert _verdict(a) == ("healthy", "healthy")
    df = a.run.scalars
    box = df[df["metric"] == "fastrcnn_losses/box_loss"]
    assert box["step"].tolist() == [8000] and box["value"].tolist() == [0.12002]
    assert "tensorpack" in a.run.frameworks


def test_total_cost_is_the_loss_and_its_nan_is_dated(tmp_path: Path):
    a = _run(tmp_path, _epochs(["2.31", "1.87", "1.52", "nan", "nan"], colour=True))
    assert _series(a, "loss")[:3] == [2.31, 1.87, 1.52]
    f = next(x for x in a.diagnosis.findings if x.code == "NUM001")
    assert f.first_step == 2000
    assert _series(a, "learning_rate") == [0.01] * 5


def test_stat_lines_without_an_epoch_line_are_numbered_on(tmp_path: Path):
    text = "".join(line + "\n" for line in _epochs(["2.0", "1.5"]).splitlines() if "@monitor.py" in line)
    a = _run(tmp_path, text)
    assert _series(a, "loss") == [2.0, 1.5]
