"""All labels masked: every target is -100, so there is nothing to learn from.

What it detects:
    Runs whose samples lose all their supervised tokens: LLaVA/FastChat-style
    "WARNING: tokenization mismatch: X vs. Y. (ignored)" (the whole sample's target is set to
    IGNORE_INDEX), TRL's "Could not find response key ... This instance will be ignored in loss
    calculation", a training loss of exactly 0.0 from the first log on (or a NaN NLL from the
    start), and ``mean_token_accuracy`` stuck at 0 while ``num_tokens`` keeps growing.

Why it matters:
    Cross-entropy over zero supervised tokens is 0 (sum) or 0/0 = NaN (mean, which HF's
    ``logging_nan_inf_filter`` then logs as 0.0). Either way no gradient reaches the model: the
    run burns its budget and saves a model that learned nothing (or NaN weights).

Evidence used:
    Events ``tokenization_mismatch``, ``response_key_missing``; series ``loss``, ``nll_loss``,
    ``grad_norm``, ``token_accuracy`` (``mean_token_accuracy``), ``num_tokens``; config
    ``max_length``/``max_seq_length``/``cutoff_len`` for the truncation explanation.

Remedies:
    Use the conversation template that matches the model (LLaVA: the right ``--version``);
    pass the response template as token ids tokenized in context; raise ``max_length`` /
    ``cutoff_len`` so the completion survives truncation; drop fully masked rows before training.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from autopsy.model import Evidence, Finding, Run
from detectors._common import Series, is_policy_gradient_run, is_token_lm_run, points, starts_at_start
from detectors._facts import (
    event_evidence,
    fact_evidence,
    fact_number,
    fmt,
    matching_events,
    scalar_evidence,
    total_count,
)

CODE = "LBL001"
SLUG = "all-labels-masked"
ROOT_CAUSE = "all_labels_masked"
NEEDS = ("events", "scalars")
NEEDS_ANY = True

MISMATCH_RE = re.compile(r"tokenization mismatch:?\s*\d+\s*vs\.?\s*\d+", re.IGNORECASE)
#: TRL DataCollatorForCompletionOnlyLM (0.x): "Could not find response key `...` in the following
#: instance: ... This instance will be ignored in loss calculation."; also the instruction-key twin
RESPONSE_KEY_RE = re.compile(r"Could not find (?:response|instruction) key|ignored in loss calculation", re.IGNORECASE)
#: fewer warnings than this, in a run whose loss is otherwise healthy, is a few bad samples, not a failure
MIN_EVENTS = 3
#: "from the start": at least this many logged points, and this share of them, exactly 0.0
MIN_ZERO_POINTS = 3
#: ... for a box-regression term, two logs from the run's start: a regression loss is never exactly 0 at the first
#: iterations when any ground-truth box reaches it (YOLO-World#146: loss_bbox 0.0000 at epoch 1 and epoch 16)
MIN_BOX_ZERO_POINTS = 2
ZERO_SHARE = 0.8
#: a completion budget this small is likely to be cut away entirely by truncation
SMALL_CONTEXT = 128
REFS = ["https://github.com/haotian-liu/LLaVA/issues/1706", "https://github.com/huggingface/trl/issues/1920",
        "https://github.com/huggingface/trl/issues/6668", "https://github.com/ymcui/Chinese-LLaMA-Alpaca-3/issues/29"]


#: an epoch at most this far in is the run's start (HF's first log, ``'epoch': 0.01``)
EARLY_EPOCH = 0.05


def _early(run: Run, step: int) -> bool:
    """The log at ``step`` says its epoch, and it is the run's first hundredths."""
    ep = points(run, "epoch")
    present, value = ep.lookup(np.array([step]))
    return bool(present[0]) and 0.0 <= float(value[0]) <= EARLY_EPOCH


def _zero_from_start(run: Run) -> tuple[Series, int] | None:
    """Train loss exactly 0.0 at the first logged point and at >= ZERO_SHARE of all points; two logs both exactly 0.0
    (a paste of the first two records) count too: a cross-entropy is never exactly 0.0 at the start of a run."""
    rows = points(run, "loss")
    if len(rows) == 1 and rows.values[0] == 0.0 and is_token_lm_run(run) and _early(run, int(rows.steps[0])):
        return rows, 1  # the only log, at the first hundredths of an epoch of a language-model run
    if len(rows) < 2 or rows.values[0] != 0.0 or not starts_at_start(rows):
        return None
    if len(rows) < MIN_ZERO_POINTS and not bool((rows.values == 0.0).all()):
        return None
    zeros = int((rows.values == 0.0).sum())
    return (rows, zeros) if zeros / len(rows) >= ZERO_SHARE else None


#: logs, all exactly 0.0, that are not a normal run's tail even when the start of the run was not read
MIN_ZERO_THROUGHOUT = 5


def _zero_throughout(run: Run) -> Finding | None:
    """A training loss exactly 0.0 at every one of >= MIN_ZERO_THROUGHOUT logs, the start of the run not among them
    (a paste of the tail: tabnet#537, ``epoch 85 | loss: 0.0 | 0:00:00s`` to epoch 99). Not the run's own
    "nothing to learn from" reading (its start is not read) and no cause singled out, but not a healthy run either: a
    loss that computes something is not exactly 0 at every log."""
    rows = points(run, "loss")
    if len(rows) < MIN_ZERO_THROUGHOUT or not bool((rows.values == 0.0).all()):
        return None
    first, last = rows.row(0), rows.row(-1)
    return Finding(
        code=CODE, name=SLUG, root_cause=None, severity="error", confidence=0.4,
        title=f"The loss is exactly 0 at all {len(rows)} logs read (steps {first[0]}-{last[0]})",
        message=(f"the training loss is exactly 0.0 at every one of the {len(rows)} logs read (steps {first[0]} to "
                 f"{last[0]}; the start of the run is not among them): no batch reaches the loss (an empty loader, e.g. "
                 "drop_last with fewer samples than one batch), every target is masked or missing, or the printed loss "
                 "is rounded from a fit so exact that nothing is left to learn. The logs read do not tell these apart."),
        first_step=first[0], basis="inferred", symptom="zero_loss",
        evidence=[scalar_evidence("loss", first, f"loss = 0.0 at step {first[0]}, the first log read"),
                  scalar_evidence("loss", last, f"loss exactly 0.0 at all {len(rows)} logs to step {last[0]}")],
        remedies=["Count the batches per epoch and the targets per batch after loading: a loader with drop_last=True and "
                  "fewer samples than one batch yields none; labels all the ignore index, or no box or mask, give a "
                  "loss of 0.",
                  "Print the unrounded loss of one batch: a true fit gives a small positive value, not exactly 0."])


def _nan_nll_from_start(run: Run) -> tuple[str, Series] | None:
    """A token-level NLL non-finite at every log from the start (a mean over zero supervised tokens). Only in a
    language-model run: elsewhere a loss NaN from the first log has other causes (weights, inputs, the LR)."""
    if not is_token_lm_run(run):
        return None
    for metric in ("nll_loss", "loss"):
        rows = points(run, metric)
        if len(rows) >= MIN_ZERO_POINTS and not bool(rows.finite.any()) and starts_at_start(rows):
            return metric, rows
    return None


def _accuracy_zero(run: Run) -> list[Evidence] | None:
    acc = points(run, "token_accuracy")
    tok = points(run, "num_tokens")
    if len(acc) < MIN_ZERO_POINTS or bool((acc.values != 0.0).any()):
        return None
    if len(tok) < 2 or not tok.values[-1] > tok.values[0]:
        return None
    return [scalar_evidence("token_accuracy", acc.row(-1), f"mean_token_accuracy exactly 0 at all {len(acc)} logged steps"),
            scalar_evidence("num_tokens", tok.row(-1), f"num_tokens grew {fmt(float(tok.values[0]))} -> "
                                                       f"{fmt(float(tok.values[-1]))}: batches "
                                                       "were processed, none had a token to score")]


def _loss_healthy(run: Run) -> bool:
    rows = points(run, "loss").finite_only()
    return len(rows) >= 2 and bool((rows.values != 0.0).any())


#: a box-regression loss term of a detector (mmdet loss_bbox / loss_rpn_bbox, detectron2 loss_box_reg / loss_rpn_loc,
#: torchvision loss_box_reg / loss_rpn_box_reg, YOLO box_loss)
_BOX_TERM = re.compile(r"(?i)^(?=.*loss).*(?:bbox|box|rpn_loc)")
#: a classification loss term beside it
_CLS_TERM = re.compile(r"(?i)^(?=.*loss).*(?:cls|class|objectness|obj)")


def _no_box_targets(run: Run) -> Finding | None:
    """Every box-regression term exactly 0.0 at every log from the start while classification trains: the regression
    loss is a sum over positive (foreground) anchors, so 0 means no ground-truth box ever reached it (class names not
    set for a custom dataset, annotations filtered out, wrong category ids)."""
    boxes = {m: points(run, m) for m in run.metrics() if _BOX_TERM.search(m)}
    boxes = {m: p for m, p in boxes.items() if len(p)}
    # two regression heads (RPN and RoI) both exactly 0 at the same log say it from one log (mmdetection#930: "there
    # is no positive samples"); one head needs two logs from the start. Both heads zero at the same logs say it for
    # those logs wherever the paste begins (mmdetection#9211: iterations 15-18, every annotation iscrowd)
    heads = len(boxes) >= 2 and len({tuple(p.steps.tolist()) for p in boxes.values()}) == 1
    one_log = heads and all(len(p) == 1 for p in boxes.values())
    if not boxes or any(bool((p.values != 0.0).any()) for p in boxes.values()) or (not heads and any(
            len(p) < MIN_BOX_ZERO_POINTS or not starts_at_start(p) for p in boxes.values())):
        return None
    training = ((m, points(run, m)) for m in run.metrics() if _CLS_TERM.search(m) and not _BOX_TERM.search(m))
    cls = next(((m, p) for m, p in training if bool((p.finite & (p.values > 0)).any())), None)
    if cls is None:
        return None
    name, rows = next(iter(boxes.items()))
    cname, crows = cls
    evidence = [scalar_evidence(m, p.row(-1), f"{m} exactly 0.0 at all {len(p)} logs (steps {p.steps[0]}..{p.steps[-1]})"
                                if len(p) > 1 else f"{m} exactly 0.0 at step {p.steps[0]}")
                for m, p in list(boxes.items())[:3]]
    evidence.append(scalar_evidence(cname, crows.row(0), f"{cname} = {fmt(float(crows.values[0]))} at step "
                                                         f"{crows.steps[0]}: the classifier trains"))
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.6,
        title=("Box-regression losses exactly 0 at the log read: no positive sample reaches them" if one_log else
               "Box-regression loss exactly 0 at every log: no ground-truth box reaches the loss"),
        message=(f"{', '.join(list(boxes)[:3])} {'is' if len(boxes) == 1 else 'are'} exactly 0.0 "
                 + (f"at step {rows.steps[0]}" if one_log else f"at every log from step {rows.steps[0]}")
                 + f" while {cname} trains: the regression loss sums over foreground anchors, so no "
                 + ("anchor or proposal of these batches matched a ground-truth box (boxes too small, in the wrong "
                    "format or filtered out)." if one_log else
                    "image contributed a ground-truth box (every box filtered out or never matched to a class).")),
        first_step=int(rows.steps[0]), evidence=evidence, basis="inferred", symptom="zero_loss",
        remedies=["Check that the dataset's class names match the annotation categories (mmdet: set classes=(...) in "
                  "the train/val dataset config of a custom COCO dataset; detectron2: thing_classes), and count the "
                  "boxes per image after loading.",
                  "Check the box format and image sizes after resizing (x1<x2, y1<y2, inside the image): boxes filtered "
                  "as invalid or empty images skipped (filter_empty_gt) leave no positives."])


def _no_label_files(run: Run) -> Finding | None:
    """The YOLO family's dataset check: no training image has a label file (labels in another folder than
    ``images/`` -> ``labels/`` expects, a cache built before the labels existed): every image is a background."""
    evs = run.events_of("no_labels_found")
    if not evs:
        return None
    ev = evs[0]
    where = str(ev.data.get("where") or "").split(",")[0].strip()
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.9,
        title="No labels found: every training image is a background",
        message=(f"The dataset loader found no label for any training image{f' ({where})' if where else ''}: with no "
                 "ground-truth box there is nothing to supervise, so training cannot start (YOLOv5/yolov3 stop there; "
                 "ultralytics warns and trains on backgrounds only)."),
        first_step=ev.step, evidence=[event_evidence(e, f"\"{e.message.strip()[:200]}\"") for e in evs[:2]],
        basis="direct", symptom="config_defect",  # a dataset without labels, whatever the curves show
        remedies=["Put one .txt label file per image under a labels/ folder beside images/ (the loader swaps '/images/' "
                  "for '/labels/' in each image path), in YOLO format (class x_center y_center width height, "
                  "normalised), then delete the stale *.cache files so the labels are scanned again.",
                  "Check the dataset YAML's train/val paths point at the folders whose labels exist."])


#: darknet Region lines needed before "every one says count: 0" means no labels at all (a few are ordinary batches)
MIN_REGION_LINES = 10


def _darknet_regions(run: Run) -> Finding | None:
    """darknet's per-layer Region lines. ``count`` is the ground-truth objects the YOLO layer matched in the batch, and
    its averages (IOU, Class, Obj, recall) are 0/0 = ``-nan`` when it is 0: a layer whose anchor scale saw no object,
    ordinary (AlexeyAB on darknet#600: "There is nothing wrong. Training is going well."). Every line at count 0, over
    ``MIN_REGION_LINES`` or more, is no object at any scale: the labels do not reach the network."""
    evs = run.events_of("darknet_region")
    if not evs:
        return None
    seen = [e for e in evs if isinstance(e.data.get("count"), int)]
    with_objects = [e for e in seen if e.data["count"] > 0]
    empty = [e for e in seen if e.data["count"] == 0]
    if len(seen) >= MIN_REGION_LINES and not with_objects:
        return Finding(
            code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.6,
            title=f"Every darknet Region line says count: 0 ({len(seen)} lines): no ground-truth object reaches any layer",
            message=(f"All {len(seen)} Region lines read report count: 0, so their IOU, class and objectness averages are "
                     "-nan: no YOLO layer matched a single labelled object in any batch. The label .txt files are "
                     "missing, empty, not found beside the images, or hold class ids or coordinates darknet rejects."),
            first_step=seen[0].step, evidence=[event_evidence(e) for e in (seen[0], seen[-1])],
            basis="direct", symptom="zero_loss",
            remedies=["Check that every image has a .txt label file of the same name in the same (or the labels/) folder, "
                      "with lines 'class x_center y_center width height', coordinates in 0..1 and class ids below "
                      "classes= in the .cfg and .data.",
                      "Run darknet with -show_imgs (AlexeyAB) or check a few images with their boxes drawn."])
    if empty and all(e.data.get("nan") for e in empty):
        shown = empty[0]
        return Finding(
            code=CODE, name=SLUG, root_cause=None, severity="info", confidence=0.5,
            title=f"-nan in {len(empty)} darknet Region line(s) with count: 0: layers that saw no object",
            message=("A Region line's averages are taken over the objects the layer matched (count); with count: 0 they are "
                     "0/0 and print as -nan. That is a layer whose anchor scale had no object in the batch, not a NaN in "
                     "training" + (f"; {len(with_objects)} line(s) with objects have finite averages" if with_objects
                                   else "") + "."),
            first_step=shown.step, evidence=[event_evidence(shown)] + [event_evidence(e) for e in with_objects[:1]],
            basis="direct", remedies=[])
    return None


#: the summary's zero average in a fp16 run, no masking warning read: float16 overflow, at the bar for a verdict
FP16_SUMMARY_ZERO_CONFIDENCE = 0.5


def _summary_zero(run: Run) -> Finding | None:
    """No per-step loss read, and the run's own summary says its training loss averaged exactly 0.0 (the HF Trainer's
    ``train_loss = 0.0`` after epochs of training, llamafactory#4278): every step's loss was 0 (nothing supervised) or
    non-finite (the Trainer's NaN filter adds nothing for a NaN step at the start, so the average stays 0)."""
    df = run.scalars
    rows = df[df["metric"].isin(("loss", "train_loss"))] if len(df) else df
    # the summary alone: a metrics block's train_loss stands for the run's loss when no per-step loss was printed
    if not len(rows) or set(rows["key"]) != {"train_loss"} or not bool((rows["value"] == 0.0).all()):
        return None
    summary = points(run, str(rows["metric"].iloc[-1]))
    if not len(summary):
        return None
    row = summary.row(-1)
    fp16 = str(run.config.get("fp16") or "").lower() in ("true", "1", "yes")
    remedies = ["Log every step (logging_steps=1) and read the first losses: a NaN hidden as 0 shows as grad_norm nan "
                "or a first loss that is already 0.",
                "Decode one batch's labels: if every label is -100 (a prompt that fills the cutoff length, a template "
                "that masks the answer), nothing is supervised and the loss is 0."]
    if fp16:
        remedies.insert(0, "The run trained in fp16: rerun in bf16 (or fp32) on the same data; models trained in bf16 "
                           "(Qwen2, Llama 3) overflow fp16's 65504 and their NaN steps are averaged as 0.")
    # in fp16 the NaN reading leads: bf16-pretrained models (Qwen2, Llama 3, Gemma) overflow float16's 65504 in their
    # activations, and a run whose every step is NaN averages to 0 (llamafactory#4278, QwenLM/Qwen3#670); a template
    # that masks every label is the other reading, and it usually prints a warning of its own (LBL001's events)
    return Finding(
        code=CODE, name=SLUG, root_cause="fp16_overflow" if fp16 else None, severity="error",
        confidence=FP16_SUMMARY_ZERO_CONFIDENCE if fp16 else 0.45,
        title="The run's average training loss is exactly 0.0" + (" in fp16: NaN steps averaged as 0" if fp16 else ""),
        message=("No per-step loss was read, and the run's summary gives train_loss = 0.0: a language or vision model's "
                 "loss is never exactly 0 on average, so every step's loss was 0 (nothing supervised) or non-finite and "
                 "hidden as 0" + (". The run used fp16, where a model pretrained in bf16 overflows float16's range; no "
                                  "warning read says the labels were masked, so the NaN reading leads" if fp16 else "")
                 + "."),
        first_step=row[0], basis="inferred", symptom="zero_loss",
        evidence=[scalar_evidence(str(rows["metric"].iloc[-1]), row, "train_loss = 0.0, the run's average training loss")],
        remedies=remedies)


def detect(run: Run) -> Iterable[Finding]:
    regions = _darknet_regions(run)
    if regions is not None:
        yield regions
        if regions.severity == "error":
            return
    labels = _no_label_files(run)
    if labels is not None:
        yield labels
        return
    box = _no_box_targets(run)
    if box is not None:
        yield box
    evidence: list[Evidence] = []
    reasons: list[str] = []
    first_step: int | None = None

    warned = matching_events(run, "tokenization_mismatch", MISMATCH_RE) + \
        matching_events(run, "response_key_missing", RESPONSE_KEY_RE)
    n_warned = total_count(warned)
    said = run.events_of("labels_masked")  # the trainer's own dataset check says the labels are (nearly) all masked
    if said:
        evidence.extend(event_evidence(e, f"\"{e.message.strip()[:160]}\": the trainer's own check of the dataset")
                        for e in said[:1])
        reasons.append("the trainer's dataset check found " + ("all" if said[0].data.get("share") == "all" else "most")
                       + " labels are -100")
        first_step = said[0].step
    if warned:
        kinds = sorted({("tokenization mismatch" if MISMATCH_RE.search(e.message) or e.kind == "tokenization_mismatch"
                         else "response key not found") for e in warned})
        evidence.extend(event_evidence(e) for e in warned[:4])
        reasons.append(f"{n_warned} sample(s) reported '{' / '.join(kinds)}' and were dropped from the loss")

    # a policy-gradient loss is 0 by construction whenever the advantages are (GRPO with equal rewards): not labels
    policy = is_policy_gradient_run(run)
    zero = _zero_from_start(run) if not policy else None
    if zero is None and not policy:
        through = _zero_throughout(run) or _summary_zero(run)
        if through is not None:
            yield through
    if zero:
        rows, zeros = zero
        first_row = rows.row(0)
        evidence.append(scalar_evidence("loss", first_row, f"loss = 0.0 at the first logged step {first_row[0]}"))
        evidence.append(scalar_evidence("loss", rows.row(-1), f"loss exactly 0.0 at {zeros} of {len(rows)} logged steps"))
        reasons.append(f"the loss is exactly 0.0 from the first log on ({zeros}/{len(rows)} points)")
        first_step = first_row[0]
    nan_nll = _nan_nll_from_start(run)
    if nan_nll:
        metric, rows = nan_nll
        first_row = rows.row(0)
        evidence.append(scalar_evidence(metric, first_row, f"{metric} non-finite at all {len(rows)} logged steps from "
                                                           f"step {first_row[0]}"))
        reasons.append(f"{metric} is NaN from the first log on")
        first_step = first_row[0] if first_step is None else min(first_step, first_row[0])
    # a token accuracy of 0 says "nothing was scored" only beside a loss that says so too: a finite, non-zero loss was
    # computed on something (a DPO loss at ln 2 beside an untrained model's accuracy of 0)
    acc = _accuracy_zero(run) if not _loss_healthy(run) else None
    if acc:
        evidence.extend(acc)
        reasons.append("mean_token_accuracy is 0 at every log while num_tokens grows")
        first_step = acc[0].step if first_step is None else first_step
    symptom = bool(zero or nan_nll or acc or said)

    if not warned and not symptom:
        return
    healthy_loss = _loss_healthy(run) and not zero
    if warned and not symptom and healthy_loss:
        if n_warned < MIN_EVENTS:
            return
        severity, confidence = "warning", 0.5  # some samples masked; the loss shows the rest still train
    elif warned:
        severity, confidence = "error", 0.9 if symptom else 0.75
    else:
        severity, confidence = "error", 0.6 if not zero or len(zero[0]) >= MIN_ZERO_POINTS else 0.45

    for key in ("max_length", "max_seq_length", "cutoff_len"):
        got = fact_number(run, key)
        if got and 0 < got[0] <= SMALL_CONTEXT and (symptom or warned):
            evidence.append(fact_evidence(got[1], f"{key} = {int(got[0])}: truncation this short can remove the "
                                                  "whole completion"))
            reasons.append(f"{key} is only {int(got[0])} tokens")
            break

    # a loss at 0 from the start and nothing else, in a run that is no token LM (a detector, a classifier, a linear
    # model): the same "nothing to learn from", told in its own terms, and the one reading that is no failure
    plain = zero and not (warned or said or nan_nll or acc) and not is_token_lm_run(run)
    if plain:
        yield Finding(
            code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity=severity, confidence=min(confidence, 0.5),
            title="The loss is exactly 0 from the first log: no target reaches it",
            message="; ".join(reasons) + ": a loss that sums or averages over the batch's targets is 0 when there is "
                    "none (every label ignored, no box or mask, an empty target file), or when every sample is "
                    "already classified with margin (a hinge loss of a separable problem, which is no failure).",
            first_step=first_step, evidence=evidence, basis="inferred", symptom="zero_loss",
            remedies=["Count the targets per batch after loading: labels present and not all the ignore index, boxes "
                      "and masks not empty, the label files found where the loader looks.",
                      "Check the loss gets what it expects: raw logits and class indices (not one-hot or probabilities), "
                      "targets of the right shape, the right reduction."])
        return
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity=severity, confidence=confidence,
        title="All labels masked: the loss has no supervised tokens" if severity == "error" else
              f"{n_warned} samples had every label masked",
        message="; ".join(reasons) + ".",
        first_step=first_step, evidence=evidence,
        remedies=[
            ("Use the conversation template that matches the model (LLaVA: the --version for the LLM, e.g. mpt for "
            "Yi-34B-based v1.6-34b) so the per-turn lengths agree with the tokenizer."),
            ("Pass the response template as token ids tokenized in context (TRL DataCollatorForCompletionOnlyLM), "
            "or use assistant_only_loss with a chat template that has generation tags."),
            ("Raise max_length / cutoff_len so the completion survives truncation; drop rows whose labels are all "
            "-100 before training and count them."),
        ],
        references=list(REFS),
        basis="direct" if warned else "inferred", symptom="zero_loss",
    )
