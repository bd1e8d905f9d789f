"""nnU-Net v2's log file: datetime-prefixed lines, ``Epoch N`` then ``Current learning rate``, ``train_loss``,
``val_loss`` (nnunetv2 nnUNetTrainer.on_epoch_start / on_epoch_end)."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _series, _verdict

# https://github.com/MIC-DKFZ/nnUNet/issues/2530 (as pasted; the Pseudo dice list is cut in the stored copy): NaN in the
# per-class pseudo Dice is a class absent from the validation batches, by design
NNUNET_2530 = '2024-10-01 11:53:49.864200:  \n2024-10-01 11:53:49.870199: Epoch 129 \n2024-10-01 11:53:49.874199: Current learning rate: 0.00883 \n2024-10-01 12:02:42.333360: train_loss -0.6154 \n2024-10-01 12:02:42.339360: val_loss 0.2496 \n2024-10-01 12:02:42.346358: Pseudo dice [0.4798, 0.0984, 0.3364, 0.0551, 0.1085, 0.0144, 0.3863, 0.1124, 0.0338, 0.0143, 0.1194, 0.037, 0.0155, 0.0051, 0.3244, 0.0891, 0.0164, 0.0148, 0.0305, 0.0, 0.0097, 0.0032, 0.0859, 0.0199, 0.0, 0.0, 0.0117, 0.0, 0.0004, 0.0, 0.3671, 0.1572, 0.0, 0.0, 0.0003, 0.0, 0.0, 0.0, 0.0433, 0.0, 0.0, 0.0, 0.0075, 0.0, 0.0, 0.0, 0.0214, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0005, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.2629, 0.0, 0.0, 0.0, 0.0, nan, 0.0, nan, 0.0, 0.0, 0.0, 0.0, 0.0, nan\n'


def _epochs(losses: list[tuple[float, float]]) -> str:
    out = []
    for e, (tr, va) in enumerate(losses):
        out += [f"2024-10-01 11:{e:02d}:49.864200:  ", f"2024-10-01 11:{e:02d}:49.870199: Epoch {e} ",
                f"2024-10-01 11:{e:02d}:49.874199: Current learning rate: {0.01 - e * 1e-4:.5f} ",
                f"2024-10-01 11:{e:02d}:59.333360: train_loss {tr} ", f"2024-10-01 11:{e:02d}:59.339360: val_loss {va} ",
                f"2024-10-01 11:{e:02d}:59.346358: Pseudo dice [0.4798, 0.0984, nan] ",
                f"2024-10-01 11:{e:02d}:59.346358: Epoch time: 532.46 s "]
    return "\n".join(out) + "\n"


def test_an_epoch_of_a_healthy_run_is_read_at_its_epoch(tmp_path: Path):
    a = _run(tmp_path, NNUNET_2530)
    assert _verdict(a) == ("healthy", "healthy")
    assert _series(a, "loss") == [-0.6154] and _series(a, "eval_loss") == [0.2496]
    assert _series(a, "learning_rate") == [0.00883]
    assert "nnunet" in a.run.frameworks


def test_epochs_are_the_steps(tmp_path: Path):
    a = _run(tmp_path, _epochs([(0.21, 0.18), (-0.12, -0.05), (-0.35, -0.2), ("nan", "nan")]))
    df = a.run.scalars
    assert df[df["metric"] == "loss"]["step"].tolist() == [0, 1, 2, 3]
    f = next(x for x in a.diagnosis.findings if x.code == "NUM001")
    assert f.first_step == 3
