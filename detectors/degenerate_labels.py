"""Degenerate labels: the training accuracy is perfect on every batch from the first logs while the loss falls to ~0.

What it detects:
    A training top-1 accuracy (``Acc@1``, ``acc``, ``accuracy``, ``decode.acc_seg``, ``train_acc``; not top-5, not an
    eval/val/test metric) at 100% (1.0) in at least ``MIN_PERFECT_SHARE`` of at least ``MIN_LOGS`` logs and at every
    one of the last ``MIN_LOGS``, while the training loss ends at or below ``ZERO_LOSS``. Either the accuracy is
    perfect from the second log of a log that starts at the run's start, or at every one of ``MIN_ALL_PERFECT`` or more
    logs. A held-out accuracy far below it (the training set memorised, not trivial) stops it unless the log starts
    at the run's start.

Why it matters:
    A real classification or segmentation task is not solved on every batch within the first minutes: a model that
    scores 100% from the start has a trivial target, almost always because every label is the same class (an
    ImageFolder root one level too deep, so the whole dataset is one folder; segmentation masks that are all
    background after loading; a label column constant after preprocessing). The loss falls to ~0, nothing in the
    log looks alarming, and the run "converges" having learned nothing.

Evidence used:
    The accuracy series and the ``loss`` series; a held-out accuracy when logged.

Remedies:
    Count the training labels per class after loading (ImageFolder: ``dataset.classes`` and the targets' counts);
    print the unique values of a few loaded masks (mmseg: ``reduce_zero_label``, the class order); check the label
    column after preprocessing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from autopsy.model import Finding, Run
from detectors._common import HELD_OUT, Series, fmt, points, starts_at_start

CODE = "LBL002"
SLUG = "degenerate-labels"
ROOT_CAUSE = "degenerate_labels"
NEEDS = ("scalars",)

#: logs the accuracy needs, and the share of them at 100%
MIN_LOGS = 3
MIN_PERFECT_SHARE = 0.8
#: perfect at every one of this many logs is enough without seeing the run's start (a paste cut from its middle)
MIN_ALL_PERFECT = 5
#: the training loss at the last log must be at most this (a trivial target is fitted to ~0)
ZERO_LOSS = 0.01
#: a held-out accuracy below this share of perfect means the training set was memorised, not trivial
HELD_OUT_FAR = 0.9

#: a top-1 accuracy of a classifier or a segmenter (per-batch or running)
_ACC = re.compile(r"(?i)(?:^|[/._\s-])(?:acc(?:uracy)?(?:@1|_?top1|_seg)?|top1(?:_acc(?:uracy)?)?|pixel_acc|class_acc)$")
_TOP_K = re.compile(r"(?i)(?:@|top[_-]?)([2-9]|\d\d)")
#: a held-out name also when it only starts so (camelCase ``valAcc``, ``testAccuracy``)
_HELD_OUT_LEAD = re.compile(r"(?i)^(?:val|test|eval)")


def _accuracy_metrics(run: Run) -> tuple[list[str], list[str]]:
    """(training, held-out) top-1 accuracy metric names."""
    train, held = [], []
    for m in run.metrics():
        name = m.strip()
        if not _ACC.search(name) or _TOP_K.search(name):
            continue
        (held if HELD_OUT.search(name) or _HELD_OUT_LEAD.match(name) else train).append(m)
    return train, held


def _perfect(values: np.ndarray, rel: float = 5e-5) -> np.ndarray:
    """Which values are a perfect score (within ``rel`` of it), on the series' own scale (percent when any value is
    above 1.5)."""
    full = 100.0 if float(np.nanmax(values)) > 1.5 else 1.0
    return values >= full * (1 - rel)


#: a pixel accuracy (mmseg ``decode.acc_seg``, ``pixel_acc``): over every labelled pixel of a batch, so a perfect score
#: at the first logs means one class among the pixels, whatever the loss does (a classifier's batch of 32 images can
#: score 100% early on an easy task; the millions of pixels of a segmentation batch cannot)
_PIXEL_ACC = re.compile(r"(?i)(?:^|[/._\s-])(?:acc_seg|pixel_acc|pix_acc)$")
#: ... when its first log comes within this many iterations
PIXEL_EARLY_STEPS = 1000


def _pixels_perfect_from_start(run: Run, train: list[str]) -> Finding | None:
    """A training pixel accuracy perfect at every log, from a first log at the run's start (mmsegmentation#2125:
    ``decode.acc_seg: 100.0000`` at iteration 100 of 94000, reduce_zero_label making the background 255 (ignored)
    and the only foreground class 0)."""
    for metric in train:
        if not _PIXEL_ACC.search(metric.strip()):
            continue
        acc = points(run, metric).finite_only()
        if not len(acc) or acc[0].step > PIXEL_EARLY_STEPS or not starts_at_start(acc):
            continue
        if not bool(_perfect(acc.values, rel=5e-7).all()):
            continue
        first, last = acc[0], acc[-1]
        evidence = [first.evidence(f"{metric} = {fmt(first.value)} at step {first.step}, the first log: every labelled "
                                   "pixel of the batch right")]
        if len(acc) > 1:
            evidence.append(last.evidence(f"{metric} = {fmt(last.value)} at step {last.step}: perfect at all "
                                          f"{len(acc)} logs"))
        return Finding(
            code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.55,
            title=f"Pixel accuracy {fmt(first.value)} from step {first.step}: the masks hold one class",
            message=(f"{metric} is a perfect score at {'its only log' if len(acc) == 1 else f'every one of its {len(acc)} logs'}"
                     f", from step {first.step}. A segmentation model is not right on every pixel of a batch this early: "
                     "the loaded masks hold one class among their labelled pixels (the rest ignored), so there is "
                     "nothing to tell apart. mmseg's reduce_zero_label=True does this to a binary dataset: background 0 "
                     "becomes 255 (ignored) and the foreground becomes class 0."),
            first_step=first.step, evidence=evidence, basis="inferred", symptom="trivial_task",
            remedies=["Print the unique values of a few masks as the pipeline loads them (after LoadAnnotations): two "
                      "values or more besides the ignore index are needed.",
                      "mmsegmentation, binary masks of 0/1: reduce_zero_label=False (with num_classes=2, or num_classes=1 "
                      "and a sigmoid loss such as use_sigmoid=True / LovaszLoss loss_type='binary'); masks saved as 0/255 "
                      "need mapping to 0/1 first."],
        )
    return None


def detect(run: Run) -> Iterable[Finding]:
    train, held = _accuracy_metrics(run)
    pixels = _pixels_perfect_from_start(run, train)
    if pixels is not None:
        yield pixels
        return
    loss = points(run, "loss").finite_only()
    if not train or len(loss) < 2 or float(loss.values[-1]) > ZERO_LOSS:
        return
    for metric in train:
        acc = points(run, metric).finite_only()
        if len(acc) < MIN_LOGS:
            continue
        perfect = _perfect(acc.values)
        share = float(perfect.mean())
        if share < MIN_PERFECT_SHARE or not bool(perfect[-MIN_LOGS:].all()):
            continue
        from_start = starts_at_start(acc) and bool(perfect[1:].all())
        every = bool(perfect.all()) and len(acc) >= MIN_ALL_PERFECT
        if not (from_start or every):
            continue
        far = None
        for h in held:
            hp = points(run, h).finite_only()
            if len(hp):
                full = 100.0 if float(np.nanmax(np.concatenate([hp.values, acc.values]))) > 1.5 else 1.0
                if float(hp.values[-1]) < HELD_OUT_FAR * full:
                    far = (h, hp)
                    break
        if far is not None and not from_start:
            continue
        yield _finding(run, metric, acc, perfect, loss, far, from_start)
        return


def _finding(run: Run, metric: str, acc: Series, perfect: np.ndarray, loss: Series, far: tuple[str, Series] | None,
             from_start: bool) -> Finding:
    first_perfect = int(np.flatnonzero(perfect)[0])
    fp, last = acc[first_perfect], acc[-1]
    l0, l1 = loss[0], loss[-1]
    n_perfect = int(perfect.sum())
    when = (f"from step {fp.step}, the {'second' if first_perfect == 1 else 'first'} log of the run"
            if from_start else f"at every one of its {len(acc)} logs (steps {acc[0].step}..{last.step})")
    evidence = [fp.evidence(f"{metric} = {fmt(fp.value)} at step {fp.step}: perfect on the batch"
                            + (f", {fp.step} steps into the run" if from_start else "")),
                last.evidence(f"{metric} = {fmt(last.value)} at step {last.step}: perfect at {n_perfect} of "
                              f"{len(acc)} logs"),
                l1.evidence(f"loss {fmt(l0.value)} at step {l0.step} -> {fmt(l1.value)} at step {l1.step}")]
    note = ""
    if far is not None:
        h, hp = far
        evidence.append(hp[-1].evidence(f"{h} = {fmt(hp[-1].value)} at step {hp[-1].step}"))
        note = (f" {h} is only {fmt(hp[-1].value)}: the held-out labels differ from the training ones, which a "
                "training set of one class would also give.")
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.6,
        title=f"Training accuracy 100% {('from step ' + str(fp.step)) if from_start else 'at every log'} and the loss "
              f"at {fmt(l1.value)}: the targets are trivial (one class)",
        message=(f"{metric} is a perfect score {when}, and the training loss fell to {fmt(l1.value)} by step {l1.step}. "
                 "A real task is not solved on every batch this early: every training target is probably the same "
                 "class (a dataset root one folder too deep, masks all background after loading, a constant label "
                 "column), so the model learns a constant and nothing else." + note),
        first_step=fp.step, evidence=evidence, basis="inferred", symptom="trivial_task",
        remedies=[
            "Count the training labels per class after loading: torchvision ImageFolder takes each subfolder of the "
            "root as a class, so a root one level too deep (or above a single folder) makes one class of the dataset "
            "(print dataset.classes and collections.Counter(dataset.targets)).",
            "Segmentation: print the unique values of a few loaded masks; all background (or all one index after "
            "reduce_zero_label / a palette-to-index mismatch) leaves nothing to learn.",
            "Tabular or text: check the label column after preprocessing and splitting (a join or filter that leaves "
            "one value, labels overwritten by a default).",
        ],
    )
