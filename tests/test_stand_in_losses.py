"""A run that logs no loss by that name, only its own loss terms (per-model, per-head): the healthy headline gives their
numbers and the Markdown and HTML curves draw them, instead of a headline without numbers and no curves."""

from __future__ import annotations

from pathlib import Path

from autopsy.render import html, markdown
from autopsy.report import build_report
from tests.test_unseen_logs import _run, _verdict

# https://github.com/deepfakes/faceswap/issues/188 (the first five of the reporter's save lines, as pasted): faceswap's
# Original trainer prints one loss per autoencoder; the maintainers answered that the fast fall is the new model's
FACESWAP_188 = """saved model weights loss_A: 0.19750, loss_B: 0.15107
saved model weights loss_A: 0.15105, loss_B: 0.10045
saved model weights loss_A: 0.10557, loss_B: 0.07693
saved model weights loss_A: 0.08569, loss_B: 0.06992
saved model weights loss_A: 0.07518, loss_B: 0.06174
"""


def test_healthy_headline_and_curves_use_the_loss_terms(tmp_path: Path):
    a = _run(tmp_path, FACESWAP_188)
    assert _verdict(a) == ("healthy", "healthy")
    assert not a.run.has_metric("loss")  # the terms are not summed into a loss
    headline = a.diagnosis.verdict.headline
    assert "loss_a 0.1975 -> 0.07518 over 5 logged points (steps 1-5), all finite" in headline
    assert "loss_b 0.1511 -> 0.06174" in headline
    report = build_report(a, "autopsy run log.txt")
    md = markdown.render(report)
    curves = md[md.index("### Curves"):]
    assert "loss_a " in curves and "loss_b " in curves and "0.07518 .. 0.1975" in curves
    page = html.render(report)
    assert 'aria-label="loss over steps"' in page


def test_a_logged_loss_keeps_the_lead(tmp_path: Path):
    # the same terms beside a loss: the loss is the headline's and the curves' loss, as before
    log = "".join(f"step {i} loss {2.0 - 0.1 * i:.4f} loss_A {0.2 - 0.01 * i:.4f}\n" for i in range(1, 9))
    a = _run(tmp_path, log)
    assert _verdict(a) == ("healthy", "healthy")
    assert "loss 1.9 -> 1.2" in a.diagnosis.verdict.headline and "loss_a" not in a.diagnosis.verdict.headline.lower()
    md = markdown.render(build_report(a, "autopsy run log.txt"))
    assert "\nloss " in md and "\nloss_a " not in md.lower()


def test_stand_ins_are_training_terms_first_then_the_most_logged():
    from autopsy.metrics import loss_like, stand_in_losses

    assert stand_in_losses({"loss_A": 12, "loss_B": 12, "eval_loss_A": 40, "grad_norm": 50, "lr": 50}) == ["loss_A", "loss_B"]
    assert stand_in_losses({"decode.loss_seg": 30, "aux.loss_seg": 50, "acc": 50}) == ["aux.loss_seg", "decode.loss_seg"]
    assert stand_in_losses({"val/loss_cls": 3}) == ["val/loss_cls"]  # held-out terms only when nothing else
    assert stand_in_losses({"eval_loss": 3, "loss_A": 12}) == []  # a run's evaluation loss is one of the primaries
    assert stand_in_losses({"loss_scale": 9, "train_runtime": 1, "accuracy": 9}) == []
    assert loss_like("grad_norm") and not loss_like("loss_scale") and not loss_like("ray/tune/loss")


# https://github.com/Daniil-Osokin/lightweight-human-pose-estimation.pytorch/issues/163 (the first two "Iter" blocks as
# pasted): per-stage losses only, with names longer than the usual curve names
LWOPENPOSE_163 = """Iter: 109200
stage1_pafs_loss:     106.98959228515625
stage1_heatmaps_loss: 38.43838272094727
stage2_pafs_loss:     93.64942905426025
stage2_heatmaps_loss: 33.54309009552002
stage3_pafs_loss:     90.79842319488526
stage3_heatmaps_loss: 32.240625839233395
total_losses_after [0, 0, 0, 0, 0, 0]
Iter: 109300
stage1_pafs_loss:     33.303994522094726
stage1_heatmaps_loss: 11.86858995437622
stage2_pafs_loss:     29.057841224670412
"""


def test_long_stand_in_names_keep_the_curves_aligned(tmp_path: Path):
    a = _run(tmp_path, LWOPENPOSE_163)
    md = markdown.render(build_report(a, "autopsy run log.txt"))
    block = md[md.index("### Curves"):].split("```text\n", 1)[1].split("```", 1)[0].rstrip("\n").split("\n")
    names = [line.split(" ", 1)[0] for line in block[:2]]
    assert names == ["stage1_heatmaps_loss", "stage1_pafs_loss"]
    # every row is padded to the longest name, so each sparkline starts in the same column
    widest = max(len(n) for n in names)
    assert all(line[:widest + 1] == n.ljust(widest) + " " for n, line in zip(names, block[:2]))
    assert block[3].startswith(" " * widest + " step ")
