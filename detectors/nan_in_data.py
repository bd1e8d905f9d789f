"""NaN in data: non-finite values appear abruptly, at particular batches, with no divergence.

What it detects:
    A non-finite onset where everything just before was healthy: the loss at its normal level
    (``rose_before`` false: the last log within 1.5x of its recent median and no steady climb across the
    recent logs, the test NUM001 shares), ``grad_norm`` not growing (within
    ``CALM_GRAD``), no value past fp16's range. Strongest when the run is finite again after the
    bad logs (the NaN came with particular batches and left with them) and no fp16 precision is
    involved; when the NaN persists, this is only one candidate among several.

Why it matters:
    Optimisation blow-ups announce themselves (rising loss, growing gradients). A NaN out of a calm
    curve points at the input: a NaN/Inf feature, an empty or fully-masked sample, a division by a
    zero length. Lowering the LR will not help; filtering the data will.

Evidence used:
    ``loss``, ``grad_norm`` series; precision config (fp16 makes activation overflow an equally
    good explanation of an abrupt NaN).

Remedies:
    Scan the dataset for NaN/Inf and empty samples (``torch.isfinite`` on inputs and labels, a
    count of unmasked label tokens per sample); log the batch indices at the failing steps and
    re-run them alone; skip non-finite batches in the loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from autopsy.metrics import UNNAMED_COLUMN
from autopsy.model import Evidence, Finding, Run
from detectors._common import (
    FP16_MAX,
    HELD_OUT,
    Onset,
    bf16_or_fp32,
    count_of,
    event_evidence,
    fmt,
    fp16_signals,
    latest_attempt,
    nonfinite_onset,
    onset_at,
    points,
    robust_level,
    rose_before,
)

CODE = "DATA001"
SLUG = "nan-in-data"
ROOT_CAUSE = "nan_in_data"
NEEDS = ("scalars", "events")
NEEDS_ANY = True

#: last grad_norm before the NaN within 3x of its median = no gradient growth
CALM_GRAD = 3.0
#: finite loss logs needed before the onset to call the curve calm at all
MIN_HISTORY = 3
#: a calm curve that turns NaN for good in bf16/fp32 (no loss scaler to skip the batch): the data, more often than not
PERSISTENT_CALM_CONFIDENCE = 0.55
#: the same with no grad_norm logged before the onset (growing gradients cannot be ruled out)
PERSISTENT_CALM_NO_GRAD_CONFIDENCE = 0.45
#: logs before the onset that define "recent"
RECENT = 8


#: numpy's floating-point warnings: an invalid value (NaN) or a division by zero (Inf) computed somewhere
NUMPY_FP_WARNING = re.compile(r"RuntimeWarning: (invalid value|divide by zero|overflow) encountered in (\w+)")
#: ... in a source file of the input pipeline (the ``path.py:LINE:`` warnings.warn prefix): data, not optimisation
DATA_SOURCE = re.compile(r"(?i)(?:^|[/\\\s])((?:[\w.-]*/)*[\w.-]*(?:data|loader|transform|augment|preprocess|collat|"
                         r"label|annotation|voc|coco|feature|sampler)[\w.-]*\.py):(\d+):")


def detect(run: Run) -> Iterable[Finding]:
    """One finding per run: the pipeline's own warning when there is one, with the calm-curve evidence added."""
    onset = nonfinite_onset(run)
    ctc = _ctc_no_alignment(run, onset) or _alignment_inf(run, onset) or _printed_lengths(run, onset)
    if ctc is not None:
        yield ctc
        return
    warned = _data_pipeline_warnings(run, onset)
    calm = _calm_curve_nan(run, onset)
    if warned is not None and calm is not None:
        warned.evidence += [ev for ev in calm.evidence if ev not in warned.evidence]
        warned.confidence = max(warned.confidence, calm.confidence)
        warned.first_step = calm.first_step if warned.first_step is None else warned.first_step
    found = warned or calm
    if found is None and onset is not None:
        found = _named_input_nan(run, onset) or _one_term_nan(run, onset) or _early_box_nan(run, onset)
    if found is None:
        found = _rejected_losses(run)
    if found is not None:
        yield found


#: a term of an alignment-based sequence loss: CTC, a transducer (RNN-T; icefall's pruned ``simple_loss`` and
#: ``pruned_loss``), whose value is +inf for a sample with no valid alignment
_ALIGN_TERM = re.compile(r"(?i)ctc|rnnt|transducer|(?:^|[/_.])(?:simple|pruned)_loss$")


def _with_onset(ev: list[Evidence], onset: Onset | None) -> bool:
    """Whether the run went non-finite; if so its onset joins ``ev`` (the CTC findings are errors only then)."""
    if onset is None:
        return False
    ev.append(onset.evidence)
    return True


#: the remedies for samples with more labels than frames (a +inf alignment loss, printed lengths)
_CTC_LENGTH_REMEDIES = (
    "Drop the samples whose label length exceeds their frame count after subsampling (icefall and ESPnet recipes "
    "filter on that ratio), or subsample less.",
    "Let the loss skip them instead of returning inf: zero_infinity=True in torch.nn.CTCLoss, "
    "ignore_longer_outputs_than_inputs=True in tf.nn.ctc_loss.",
)


def _alignment_inf(run: Run, onset: Onset | None) -> Finding | None:
    """A CTC or transducer term logged as +inf (not NaN): the log-likelihood of no path at all, a sample whose labels
    cannot be aligned to its frames (more labels than the subsampled frames allow). A NaN alone has other causes."""
    for m in run.metrics():
        if not _ALIGN_TERM.search(m):
            continue
        pts = points(run, m)
        inf = np.flatnonzero(np.isposinf(pts.values))
        if not inf.size:
            continue
        p = pts[int(inf[0])]
        others = [o for o in run.metrics() if o != m and _ALIGN_TERM.search(o) and bool(np.isposinf(points(run, o).values).any())]
        ev = [p.evidence(f"{m} = {fmt(p.value)} at step {p.step} ({inf.size} of {len(pts)} logs)"
                         + (f"; {', '.join(others[:3])} too" if others else ""))]
        hit = _with_onset(ev, onset)
        return Finding(
            code=CODE, name=SLUG, root_cause="ctc_output_longer_than_input", severity="error" if hit else "warning",
            confidence=0.65 if hit else 0.45,
            title=f"{m} is +inf at step {p.step}: a sample with no valid alignment",
            message=(f"{m} is +inf at step {p.step}: an alignment-based loss (CTC, transducer) is +inf exactly when a "
                     "sample has no valid path, its label sequence longer than the frames left after subsampling "
                     "(pruned transducers emit at most one symbol per frame; CTC needs a blank between repeated "
                     "labels)" + (f"; the run's loss went non-finite at {onset_at(onset)}" if hit else "") + "."),
            first_step=p.step, evidence=ev,
            remedies=list(_CTC_LENGTH_REMEDIES),
            basis="inferred", symptom="nonfinite_loss" if hit else None,
        )
    return None


#: the remedies of TensorFlow CTC's no-path messages, warned or fatal
_CTC_NO_PATH_REMEDIES = (
    "Make the network's output sequence longer than the longest label: fewer downsampling steps (or a longer max time / "
    "sequence length), or drop the samples whose label length exceeds the output length (count a blank between "
    "repeated labels).",
    "Let the loss skip them instead of returning inf: ignore_longer_outputs_than_inputs=True in tf.nn.ctc_loss "
    "(zero_infinity=True in torch.nn.CTCLoss).",
)


def _ctc_no_alignment(run: Run, onset: Onset | None) -> Finding | None:
    """TensorFlow's CTC loss said "No valid path found." (ctc_loss_calculator.cc): a sample whose label sequence
    cannot be aligned to its frames, whose loss is inf. Occasional ones early in training are harmless (the
    maintainers' usual answer, returnn-experiments#1); with the loss itself non-finite the run is hit."""
    evs = run.events_of("ctc_no_alignment")
    if not evs:
        return None
    n = sum(e.count for e in evs)
    ev = [event_evidence(e, e.message.strip()[:200] + (f" (x{e.count})" if e.count > 1 else "")) for e in evs[:3]]
    hit = _with_onset(ev, onset)
    fatal = next((e for e in evs if e.data.get("fatal")), None)
    no_path = ("TensorFlow's CTC loss found no valid alignment for a sample: its label sequence (with the blanks CTC needs "
               "between repeated labels) is longer than the frames the network outputs for it")
    why = no_path + ", so that sample's loss is inf"
    if fatal is not None and not hit:
        need, have = fatal.data.get("required"), fatal.data.get("available")
        return Finding(
            code=CODE, name=SLUG, root_cause="ctc_output_longer_than_input", severity="error", confidence=0.85,
            title=f"CTC: a label sequence needs {need} frames, its input has {have}: the step fails",
            message=(no_path + f" (required {need}, available {have}), and with "
                     "ignore_longer_outputs_than_inputs=False TensorFlow raises instead of returning inf: training "
                     "stops at that batch."),
            first_step=fatal.step, evidence=ev,
            remedies=list(_CTC_NO_PATH_REMEDIES),
            basis="direct", symptom="crash",
        )
    return Finding(
        code=CODE, name=SLUG, root_cause="ctc_output_longer_than_input", severity="error" if hit else "warning",
        confidence=0.75 if hit else 0.5,
        title=(f"CTC found no valid path {n} time(s)" + (f"; the loss went non-finite at {onset_at(onset)}" if hit else
                                                           "")),
        message=(why + (f"; here the logged loss went non-finite at {onset_at(onset)}: those samples reach the "
                        "average." if hit else
                        ". An occasional warning early in training is harmless; if it recurs, those samples never "
                        "contribute and the ones that do may be few.")),
        first_step=onset.step if hit else next((e.step for e in evs if e.step is not None), None),
        evidence=ev,
        remedies=list(_CTC_NO_PATH_REMEDIES),
        basis="direct", symptom="nonfinite_loss" if hit else None,
    )


def _printed_lengths(run: Run, onset: Onset | None) -> Finding | None:
    """A loop that printed the CTC loss's length arguments (``input_lengths``, ``label_lengths``/``target_lengths``) on
    one line, and in them a sample with more labels than frames: CTC has no path for it (one frame per label at the
    least, two for a repeated label), so its loss is inf, or -inf as a log-likelihood (thu-spmi/CAT#22: 149 labels on
    113 frames, the loss -inf at the first step)."""
    evs = [e for e in run.events_of("ctc_lengths") if e.data.get("inputs")]
    bad = []
    for e in evs:
        over = [(i, x) for i, (x, y) in enumerate(zip(e.data["inputs"], e.data["labels"])) if y > x]
        if over:
            bad.append((e, over))
    if not bad:
        return None
    e, over = bad[0]
    n_samples = sum(len(o) for _, o in bad)
    n_printed = sum(len(x.data["inputs"]) for x in evs)
    pairs = ", ".join(f"{e.data['labels'][i]} labels on {x} frames" for i, x in over[:3])
    ev = [event_evidence(e, f"sample {over[0][0]} of {len(e.data['inputs'])}: {pairs}"
                            + (f" ({len(over)} samples in this batch)" if len(over) > 1 else ""))]
    ev += [event_evidence(x, f"{len(o)} more sample(s) with more labels than frames") for x, o in bad[1:3]]
    hit = _with_onset(ev, onset)
    return Finding(
        code=CODE, name=SLUG, root_cause="ctc_output_longer_than_input", severity="error" if hit else "warning",
        confidence=0.7 if hit else 0.45,
        title=(f"{n_samples} of {n_printed} printed samples have more labels than input frames"
               + (f"; the loss went non-finite at {onset_at(onset)}" if hit else "")),
        message=("The printed CTC lengths hold samples whose label sequence is longer than their input after "
                 f"subsampling ({pairs}): CTC needs at least one frame per label (two for a repeated one), so those "
                 "samples have no alignment and their loss is infinite"
                 + (f"; the run's loss went non-finite at {onset_at(onset)}" if hit else "") + "."),
        first_step=onset.step if hit else e.step, evidence=ev,
        remedies=list(_CTC_LENGTH_REMEDIES),
        basis="direct", symptom="nonfinite_loss" if hit else None,
    )


def _rejected_losses(run: Run) -> Finding | None:
    """ESPnet1 left batch losses out of its log ("loss (=X) is not correct": NaN or out of its range, 1e4 for CTC
    models). The run goes on (the gradient of a NaN batch is dropped by the updater's NaN grad-norm check, a huge one
    is clipped), but those batches are broken; in a CTC model a loss far below zero is an utterance with more labels
    than frames."""
    evs = run.events_of("loss_rejected")
    if not evs:
        return None
    vals = [e.data.get("value") for e in evs if isinstance(e.data.get("value"), float)]
    negative = [v for v in vals if v < 0]
    shown = ", ".join(fmt(v) for v in vals[:6]) + (", ..." if len(vals) > 6 else "")
    return Finding(
        code=CODE, name=SLUG, root_cause="ctc_output_longer_than_input" if negative else ROOT_CAUSE, severity="warning",
        confidence=0.5, title=f"{len(evs)} batch loss(es) left out of the log as not correct ({shown})",
        message=(f"ESPnet reported {len(evs)} batch loss(es) it would not log ({shown}): NaN or out of the range it "
                 "accepts (CTC_LOSS_THRESHOLD, 1e4). Training goes on, but those batches are broken"
                 + (f"; {len(negative)} are negative, which a CTC or cross-entropy loss never is: utterances whose "
                    "label sequence is longer than their subsampled input frames have no CTC alignment"
                    if negative else "") + "."),
        first_step=next((e.step for e in evs if e.step is not None), None),
        evidence=[event_evidence(e, e.message.strip()[:200]) for e in evs[:3]],
        remedies=["Filter the training utterances by input/output length ratio (the recipes' data filtering before "
                  "dump: max frames, max output length, and output length <= subsampled input length).",
                  "If only a handful of batches are affected, it is harmless; if they recur, find the utterance ids of "
                  "those batches (batch-bins / sorted json) and check their transcripts and durations."],
        basis="direct", symptom=None,
    )


#: metrics that are not loss terms (rates, norms, timings, throughput, accuracy, counters)
NOT_A_TERM = re.compile(r"(?i)^(?:loss|total_loss|eval_.*|val_.*|test_.*)$|lr|learning_rate|grad|norm|time|cost|eta|mem|"
                        r"ips|epoch|acc|speed|token|sample|throughput|scale|step|iter|(?:^|_)it$|fg|bg|"
                        # statistics over a subset of the batch (preference/RL trainers: TRL's logps/rejected,
                        # rewards/chosen): NaN whenever a batch holds none of that subset, whatever the data's values
                        r"logps|logits|reward|margin|chosen|rejected|perplexity|ppl|(?:^|/)kl$|"
                        # a headerless table's columns ("column 2"): nothing says which is a loss term
                        r"^" + UNNAMED_COLUMN.pattern)
#: quality metrics, no head of the model: SuperPoint's precision is NaN as the mean of no detections (its loss went NaN
#: at the same log, rpautrat/SuperPoint#296), not a term whose inputs are broken
QUALITY_METRIC = re.compile(r"(?i)(?:^|[/_.\s])(?:precision|recall|f1|fscore|f_score|m?ap(?:50|75)?|auc|bleu|rouge\w*|wer|"
                            r"cer|miou|psnr|ssim)(?:$|[/_.@\s])")
def is_term(metric: str) -> bool:
    """A loss term of the model's heads: not a rate, norm, timing, counter, subset statistic or quality score."""
    return NOT_A_TERM.search(metric) is None and QUALITY_METRIC.search(metric) is None


#: a term non-finite at this many logs with the other terms finite beside it, the later one after the first
MIN_PARTIAL_LOGS = 2
#: the last word of a box-regression loss term's name, "loss" words left out (rpn_loss_box, loss_bbox, loss_box_reg,
#: giou_loss, loc_loss; not loss_box_cls or loss_box_reid, the classification and re-id heads on the boxes)
BOX_REGRESSION_WORDS = {"box", "bbox", "boxes", "reg", "regression", "iou", "giou", "diou", "ciou", "l1", "loc", "delta",
                        "deltas"}


def is_box_regression(name: str) -> bool:
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w and w not in ("loss", "losses")]
    return bool(words) and words[-1] in BOX_REGRESSION_WORDS


def _one_term_nan(run: Run, onset: Onset) -> Finding | None:
    """One loss term is non-finite at several logs while the other terms of the same logs stay finite: the weights are
    sound (the other heads still compute), so the NaN is made by that term's inputs on some samples (a zero-width box
    in a log-space box encoding, an empty target), not by the optimisation, which would break every term."""
    onset = nonfinite_onset(run)
    if onset is None:
        return []
    terms = {m: points(run, m) for m in run.metrics() if is_term(m)}
    terms = {m: p for m, p in terms.items() if len(p)}
    for name, pts in terms.items():
        bad_steps = pts.steps[~pts.finite]
        partial = []
        for st in bad_steps.tolist():
            others = [m for m, p in terms.items() if m != name and (p.steps == st).any()
                      and bool(p.finite[p.steps == st].all())]
            if others:
                partial.append((st, others))
        box = is_box_regression(name)
        # a box-regression term alone non-finite beside two or more finite terms is the signature of a degenerate box
        # (zero or negative width/height: log-space targets of -inf) even at one log, where nothing after it shows every
        # term broken (TensorFlow2.0-Examples#8: giou_loss NaN at one log, every term the next, the LR's doing); any
        # other term needs two logs
        one_log = (box and len(partial) == 1 and len(partial[0][1]) >= 2
                   and not any(bool((p.steps > partial[0][0]).any()) for p in terms.values()))
        if not partial or (len(partial) < MIN_PARTIAL_LOGS and not one_log):
            continue
        (s0, others0), (s1, _) = partial[0], partial[-1]
        # every term non-finite at that first log: when they are as many as the finite ones, most of the model's
        # outputs broke together, which a few samples' targets do not explain
        bad0 = [m for m, p in terms.items() if (p.steps == s0).any() and not bool(p.finite[p.steps == s0].all())]
        if len(bad0) >= max(2, len(others0)):
            return None
        p0 = pts[int(np.flatnonzero(pts.steps == s0)[0])]
        beside = ", ".join(f"{m} {fmt(float(terms[m].values[terms[m].steps == s0][0]))}" for m in others0[:4])
        # the terms finite at every one of those logs (another term may follow it into NaN later)
        steady = [m for m in others0 if all(m in o for _, o in partial)]
        kept = (f"{', '.join(steady[:3])} stay{'s' if len(steady) == 1 else ''} finite" if steady
                else "other terms finite beside it")
        return Finding(
            code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.5 if one_log else 0.6,
            title=(f"Only {name} goes non-finite" if steady == others0 else f"{name} goes non-finite first")
                  + (f" (steps {s0}..{s1}); {kept}" if s1 != s0 else f" (step {s0}); {kept}"),
            message=(f"{name} is non-finite at {count_of(len(partial), 'log')} from step {s0} while "
                     + (', '.join(steady[:4]) if steady else "other terms") + " at the "
                     "same logs are finite: the shared weights still compute, so the NaN comes from that term's inputs "
                     "on some samples" + (" (a box with zero or negative width/height, whose log-space regression target "
                                          "is -inf or NaN)" if box else "") + "."
                     + (" This is the last log read: if every term went non-finite right after it, the updates broke the "
                        "weights instead (the learning rate)." if one_log else "")),
            first_step=s0, evidence=[p0.evidence(f"{name} = {fmt(p0.value)} at step {s0} while {beside} are finite"),
                                onset.evidence],
            basis="inferred", symptom="nonfinite_loss",
            remedies=[("Validate the annotations: drop boxes with x2 <= x1 or y2 <= y1 (after resizing/flipping too) and "
                       "images without boxes." if box else
                       f"Check the inputs of {name} on the batches of those steps (empty targets, zero denominators)."),
                      "Filter NaN/Inf/empty samples at data preparation; skip non-finite batches in the loop and log their "
                      "indices."],
        )
    return None


#: a box detector non-finite within this many iterations of the (latest) attempt's start, ...
EARLY_BOX_STEPS = 1000
#: ... after at most this many finite logs of the failing series, ...
EARLY_BOX_LOGS = 2
#: ... with the learning rate constant up to it (no warmup ramp) and no higher than the SGD rate detection recipes use
#: for 16 images (Faster R-CNN 0.02; RetinaNet 0.01)
EARLY_BOX_MAX_LR = 0.02


def _early_box_nan(run: Run, onset: Onset) -> Finding | None:
    """A box detector (a box-regression term among its losses) non-finite at one of its first logs, at a constant,
    modest learning rate: there were too few updates of too small a size for the optimisation to have blown up, and
    the classic cause is the annotations (jwyang/faster-rcnn.pytorch#75, #336, #548, #797: 0-based VOC coordinates
    that the loader's ``- 1`` turns into 65535 in uint16, boxes with x2 <= x1). Every term may be NaN at once here:
    the logs are 100 iterations apart, time enough for one bad box to spread to the whole model."""
    if onset.step is None or onset.step > EARLY_BOX_STEPS or HELD_OUT.search(onset.metric):
        return None
    boxes = sorted(m for m in run.metrics() if is_box_regression(m))
    if not boxes or fp16_signals(run):
        return None
    pts = latest_attempt(points(run, onset.metric))
    bad = np.flatnonzero(~pts.finite)
    if not bad.size or bool(pts.finite[: int(bad[0])].sum() > EARLY_BOX_LOGS):
        return None
    first = pts[int(bad[0])]
    # the terms at that log: a box term finite there puts the NaN elsewhere (a total with a weight-decay term NaN while
    # every printed term is finite, tf-faster-rcnn#458: the weights'); a box term NaN beside a finite term is the boxes'
    at: dict[str, bool] = {}
    box_bad = None  # a box term's non-finite point at that log
    for m in run.metrics():
        if m == onset.metric or not is_term(m):
            continue
        tp = latest_attempt(points(run, m))
        hit = np.flatnonzero(tp.steps == first.step)
        if hit.size:
            at[m] = bool(tp.finite[int(hit[-1])])
            if m in boxes and not at[m] and box_bad is None:
                box_bad = (m, tp[int(hit[-1])])
    if any(m in at for m in boxes) and all(at.get(m, True) for m in boxes):
        return None
    partial = box_bad is not None and any(at.values())
    lr = latest_attempt(points(run, "learning_rate")).finite_only().before(first.step, inclusive=True)
    # constant: seen at two logs or more, or at one when the box term alone broke at it
    if (len(lr) < (1 if partial else 2) or float(lr.values.max()) != float(lr.values.min())
            or float(lr.values.max()) > EARLY_BOX_MAX_LR):
        return None
    n_before = int(bad[0])
    at_start = n_before == 0 and first.step == 0
    when = ("its first log" if at_start else "the first log read" if not n_before else
            f"after {count_of(n_before, 'finite log')}")
    evidence = [first.evidence(f"{onset.metric} = {fmt(first.value)} at step {first.step}, {when}"
                               + (": before any update" if at_start else "")),
                lr[-1].evidence(f"learning rate {fmt(lr[-1].value)}, constant over the {len(lr)} logs up to it (no "
                                "warmup ramp)" if len(lr) > 1 else f"learning rate {fmt(lr[-1].value)} at step {lr[-1].step}")]
    if partial:
        fine = [m for m, ok in at.items() if ok]
        evidence.insert(1, box_bad[1].evidence(f"{box_bad[0]} = {fmt(box_bad[1].value)} at step {first.step} while "
                                               f"{', '.join(fine[:3])} {'is' if len(fine) == 1 else 'are'} finite"))
    if n_before:
        evidence.insert(1, pts[n_before - 1].evidence(f"{onset.metric} {fmt(pts[n_before - 1].value)} at step "
                                                      f"{pts[n_before - 1].step}"))
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.55 if at_start else 0.5,
        title=(f"The box detector is non-finite at step {first.step} ({when}), at {'a constant ' if len(lr) > 1 else ''}"
               f"lr {fmt(lr[-1].value)}: suspect the box annotations"),
        message=(f"{onset.metric} is non-finite at step {first.step} with the learning rate "
                 + (f"constant at {fmt(lr[-1].value)} (no warmup ramp" if len(lr) > 1 else f"at {fmt(lr[-1].value)} (")
                 + ", not above the SGD rate detection recipes use for 16 images) and box-regression terms "
                 f"({', '.join(boxes[:3])}) in the loss"
                 + (f"; {box_bad[0]} broke while other terms stayed finite. " if partial else ". ")
                 + ("A NaN at the first log comes before any update, so not from the step size. " if at_start else
                    "So few updates of that size rarely blow a detector up. ")
                 + "The usual cause is a box the regression cannot encode: VOC-style loaders subtract 1 from 1-based "
                   "coordinates and keep boxes in uint16, so a 0 coordinate wraps to 65535; boxes with x2 <= x1 or "
                   "outside the image give log-space targets of -inf."),
        first_step=first.step, evidence=evidence, basis="inferred", symptom="nonfinite_loss",
        remedies=["Validate the annotations before training: every box with 0 <= x1 < x2 <= width and 0 <= y1 < y2 <= "
                  "height, after any flip or resize; drop or fix the others. With 0-based VOC coordinates, remove the "
                  "'- 1' in the loader (py-faster-rcnn/faster-rcnn.pytorch datasets/pascal_voc.py).",
                  "Tell it from the learning rate: rerun with the LR divided by 10; a NaN at the same early iterations "
                  "follows the data."],
    )


def _named_input_nan(run: Run, onset: Onset) -> Finding | None:
    """The loop or the loss said that inputs or samples were non-finite (``5/42 samples got nan grad``, ``batch
    contains NaN``) and the run went non-finite: the message names the data, whatever the curve looked like."""
    named = run.events_of("nan_input")
    if not named:
        return None
    evidence = [event_evidence(e, f"the run reported non-finite input: \"{e.message.strip()[:160]}\"") for e in named[:2]]
    evidence.append(onset.evidence)
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.7,
        title="Non-finite inputs reported, then the run went non-finite: suspect the data",
        message=(f"{count_of(len(named), 'message')} {'says' if len(named) == 1 else 'say'} samples or inputs were non-finite (first: \"{named[0].message.strip()[:120]}\"), "
                 + (f"and the training went non-finite at step {onset.step}." if onset.step is not None
                    else "and the training went non-finite.")),
        first_step=onset.step, evidence=evidence, basis="direct", symptom="nonfinite_loss",
        remedies=["Find the samples the message names (log their ids) and check inputs and labels with torch.isfinite; for "
                  "CTC, drop utterances whose label is longer than the downsampled input (or set zero_infinity=True).",
                  "Filter NaN/Inf/empty samples at data preparation; skip non-finite batches in the loop and log their indices."],
    )


def _calm_curve_nan(run: Run, onset: Onset | None) -> Finding | None:
    """A NaN out of a calm loss and grad_norm curve: nothing diverged first, so a bad batch is the likeliest cause."""
    if onset is None or onset.step is None or onset.metric == "eval_loss":
        return None  # an eval-only NaN with finite training is DATA002's (eval batches without supervised tokens)
    loss = points(run, "loss")
    loss = loss.select(loss.finite & (loss.values != 0.0))
    before = loss.before(onset.step)[-RECENT:]
    if len(before) < MIN_HISTORY or bool((loss.values > FP16_MAX).any()):
        return None
    level = robust_level(before.values[:-1])
    if level is None or level <= 0 or rose_before(before.values):
        return None
    gn = points(run, "grad_norm").before(onset.step).finite_only()[-RECENT:]
    if len(gn) >= 2:
        glevel = robust_level(gn.values[:-1])
        if glevel and gn[-1].value > CALM_GRAD * glevel:
            return None
    allpts = points(run, onset.metric)
    bad_steps = allpts.steps[~allpts.finite]
    recovered = bool(bad_steps.size) and bool(allpts.finite[-1]) and not onset.hidden_zero
    fp16 = [s for s in fp16_signals(run) if s.strength != "hint" or bf16_or_fp32(run) is None]
    if recovered and not fp16:
        conf, severity = 0.6, "error"
    elif recovered:
        conf, severity = 0.45, "warning"
    elif not fp16 and len(gn):
        # bf16/fp32 have no scaler to skip the bad step: one bad batch puts NaN in the weights and it stays
        conf, severity = PERSISTENT_CALM_CONFIDENCE, "error"
    elif not fp16:
        # no grad_norm logged: gradients may have been growing unseen, so a calm loss alone is half the evidence
        conf, severity = PERSISTENT_CALM_NO_GRAD_CONFIDENCE, "warning"
    else:
        conf, severity = 0.35, "warning"
    named = [e for e in run.events_of("nan_input") if e.step is None or e.step <= onset.step + 1]
    evidence = [before[-1].evidence(f"loss {fmt(before[-1].value)} at step {before[-1].step}, at its recent level "
                                    f"{fmt(level)}: no divergence before the NaN"), onset.evidence]
    if len(gn):
        evidence.insert(1, gn[-1].evidence(f"grad_norm {fmt(gn[-1].value)} at step {gn[-1].step}: not growing"))
    if named:
        evidence[:0] = [event_evidence(e, f"the data pipeline reported non-finite input: \"{e.message.strip()[:160]}\"")
                        for e in named[:2]]
        conf, severity = max(conf, 0.85), "error"
    steps_txt = ", ".join(str(s) for s in bad_steps[:8].tolist()) + (" ..." if len(bad_steps) > 8 else "")
    shape = (f"non-finite only at steps {steps_txt}, finite again afterwards" if recovered
             else f"non-finite from step {onset.step} on")
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity=severity, confidence=conf,
        title=f"Abrupt NaN at step {onset.step} out of a calm curve: suspect the data",
        message=f"{onset.metric} is {shape}, with loss{' and grad_norm' if len(gn) else ''} normal just before"
                + ("" if len(gn) else " (no grad_norm logged to rule out growing gradients)")
                + ("; fp16 activation overflow on those batches is an equally good explanation." if fp16 else "."),
        first_step=onset.step, evidence=evidence, basis="direct" if named else "inferred", symptom="nonfinite_loss",
        remedies=[(f"Dump the batches of step(s) {steps_txt or onset.step} and check inputs and labels with torch.isfinite; "
                  "count unmasked label tokens per sample (0 gives NaN means)."),
                  "Filter NaN/Inf/empty samples at data preparation; skip non-finite batches in the loop and log their indices."],
    )


def _data_pipeline_warnings(run: Run, onset: Onset | None) -> Finding | None:
    """numpy warns that the input pipeline computed NaN/Inf (``data.py:40: RuntimeWarning: invalid value encountered in
    sqrt``: a negative box width, a log of 0): the data carries non-finite values into the loss."""
    hits = []
    for e in run.events:
        m = NUMPY_FP_WARNING.search(e.message)
        src = DATA_SOURCE.search(e.message) if m else None
        if m and src:
            hits.append((e, m, src))
    if not hits:
        return None
    e0, m0, s0 = hits[0]
    evidence = [event_evidence(e, f"{src[1]}:{src[2]} computed {m[1]} in {m[2]}: non-finite values made by the input "
                                  "pipeline") for e, m, src in hits[:3]]
    if onset is not None:
        evidence.append(onset.evidence)
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.75 if onset is not None else 0.6,
        title=f"The input pipeline computes NaN/Inf ({m0[1]} in {m0[2]}, {s0[1].rsplit('/', 1)[-1]}:{s0[2]})",
        message=(f"numpy warned {sum(e.count for e, _, _ in hits)} time(s) that data code produced non-finite values "
                 f"(first: {m0[1]} encountered in {m0[2]} at {s0[1]}:{s0[2]})"
                 + (f"; the training went non-finite at {onset_at(onset)}" if onset is not None else "")
                 + ". A sqrt or log of a negative or zero input usually means a malformed sample (an annotation with "
                   "xmin > xmax, an empty box, a zero-length feature)."),
        first_step=e0.step, evidence=evidence, basis="direct", symptom="nonfinite_loss",
        remedies=[f"Validate the inputs of {s0[1].rsplit('/', 1)[-1]}:{s0[2]} (assert finite, non-negative widths/heights) "
                  "and drop or fix the samples that fail; run with np.seterr(invalid='raise') to stop on the first one.",
                  "Filter NaN/Inf/empty samples at data preparation; skip non-finite batches in the loop and log their indices."],
    )
