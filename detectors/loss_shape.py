"""Loss shape mismatch: the loss compares predictions and targets of different shapes, and broadcasting hides it.

What it detects:
    PyTorch's own message from ``torch.nn.functional``'s regression losses (``mse_loss``, ``l1_loss``,
    ``smooth_l1_loss``, ``huber_loss`` warn; ``binary_cross_entropy`` raises): "Using a target size
    (torch.Size([64])) that is different to the input size (torch.Size([64, 1]))". It is reported when the two shapes
    hold different numbers of elements (a ``[1]`` prediction against ``[10]`` targets), broadcast to more elements than
    either holds (``[N, 1]`` against ``[N]`` gives ``[N, N]``: every prediction is compared with every target), or when
    the prediction is empty (a dimension of 0: the mean over nothing is NaN). Shapes that differ only by size-1
    dimensions (``[3, 32, 32]`` beside ``[1, 3, 32, 32]``) pair the same values and are left alone. And the crash of
    ``nll_loss``/``cross_entropy`` refusing rows that do not pair up: "Expected input batch_size (60) to match target
    batch_size (10)" (a flatten folding features into the batch, sequence lengths that differ, a fixed batch size), and
    binary cross-entropy raising on the same size mismatch ("ValueError: Using a target size ...", "Target size (...)
    must be the same as input size (...)"), where the run dies instead of training on a broadcast.

Why it matters:
    Nothing crashes. The loss is a number, it even falls a little (the model learns the targets' mean), and the run
    looks merely stuck: forum threads about a regression net "not learning" end with this line in the log.

Evidence used:
    Event ``loss_shape_mismatch`` (the two shapes); the ``loss`` series, for what it did afterwards.

Remedies:
    Make the shapes equal before the loss: ``output.squeeze(-1)`` for an ``[N, 1]`` head or ``target.unsqueeze(1)``;
    check the model's output is not empty (a slice or a head that returns nothing).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from autopsy.model import Event, Finding, Run
from detectors._common import event_evidence, fmt, points

CODE = "SHP001"
SLUG = "loss-shape-mismatch"
ROOT_CAUSE = "loss_shape_mismatch"
NEEDS = ("events",)


def _numel(dims: list[int]) -> int:
    return math.prod(dims) if dims else 1


def _broadcast(a: list[int], b: list[int]) -> list[int] | None:
    """The shape ``a`` and ``b`` broadcast to, or None when they do not (the loss would have raised)."""
    try:
        return list(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        return None


def _size(dims: list[int]) -> str:
    return f"[{', '.join(str(d) for d in dims)}]"


_RESHAPE = ("Make the prediction and the target the same shape right before the loss: output.squeeze(-1) for an [N, 1] "
            "head, or target.unsqueeze(1); print both shapes once to check.")
_EMPTY = ("An empty prediction (a dimension of 0): check the model's last layer and any slicing of its output (an index "
          "past the end, a mask that selects nothing).")


def _remedies(empty: bool) -> list[str]:
    return [_EMPTY, _RESHAPE] if empty else [_RESHAPE]


def _rows(ev: Event) -> Finding:
    """nll_loss/cross_entropy refused a prediction with another number of rows than its target."""
    n_in, n_t = int(ev.data["batch_input"]), int(ev.data["batch_target"])
    folded = n_in > n_t > 0 and n_in % n_t == 0
    causes = [f"the output has {n_in // n_t}x as many rows as there are targets: a view(-1, K) or flatten in the forward "
              "pass folds part of each sample into the batch dimension (an input resolution or feature count other "
              "than the layer was sized for)"] if folded else []
    causes += ["sequence outputs and targets flattened with different lengths (logits [N*T, C] against labels [N*T'])",
               "a batch size fixed inside the model or the loss (the last, smaller batch of an epoch breaks it)"]
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.75,
        title=f"The loss got {n_in} prediction rows for {n_t} targets",
        message=("nll_loss/cross_entropy takes one row of class scores per target and refused a prediction of "
                 f"{n_in} rows against {n_t} targets. Usual causes: " + "; ".join(causes) + "."),
        first_step=ev.step, evidence=[event_evidence(ev, f"PyTorch: input batch_size {n_in}, target batch_size {n_t}")],
        basis="direct", symptom="crash",
        remedies=["Print output.shape and target.shape right before the loss: flatten with x.view(x.size(0), -1) (or "
                  "torch.flatten(x, 1)) and size the next Linear layer from the real feature count; for sequences, "
                  "flatten logits to [N*T, C] and labels to [N*T] from the same T (pad or cut both).",
                  "Take the batch size from the tensors (x.size(0)), never from a constant, so the last batch fits."])


def _refused(ev: Event, target: list[int], pred: list[int]) -> Finding:
    """binary_cross_entropy(_with_logits) refused a target whose shape differs from the prediction's (it raises where
    the regression losses only warn): the run died at its first loss."""
    if len(target) == len(pred) + 1 and target[:len(pred)] == pred:
        why = f"the target has an extra trailing dimension of {target[-1]} (one-hot labels, or a mask read with channels)"
    elif len(pred) == len(target) + 1 and pred[-1] == 1 and pred[:-1] == target:
        why = "the model's [N, 1] output against [N] labels: squeeze the output or unsqueeze the target"
    elif len(pred) == len(target) and sum(a != b for a, b in zip(pred, target)) == 1 and len(pred) >= 2 \
            and pred[1] != target[1]:
        why = (f"the channels differ ({pred[1]} predicted, {target[1]} in the target): the head's number of classes, or "
               "a mask loaded in RGB where one channel was expected")
    else:
        why = "print both shapes right before the loss"
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.75,
        title=f"The loss refused a target of shape {_size(target)} for a prediction of shape {_size(pred)}",
        message=("Binary cross-entropy takes a target of exactly the prediction's shape and raised on "
                 f"{_size(target)} against {_size(pred)}: {why}."),
        first_step=ev.step, evidence=[event_evidence(ev, f"PyTorch: target size {_size(target)}, input size {_size(pred)}")],
        basis="direct", symptom="crash",
        remedies=[_RESHAPE, "If the channels or classes differ: build the head with the target's number of classes, or "
                  "load masks as one channel of class indices (convert('L'), nearest-neighbour resize)."])


def _label_form(ev: Event) -> Finding | None:
    """A classification loss given its labels in another form than it takes (integers for one-hot, one-hot for
    integers, a sequence's class dimension in the wrong place): the run died at its first loss."""
    d = ev.data
    form = d.get("form")
    if form == "keras":
        a, b = int(d["a"]), int(d["b"])
        if 1 not in (a, b) or a == b:
            return None  # two widths, neither 1: not the label-form mistake (the message has other sources)
        k = max(a, b)
        what = (f"integer class labels (one column) met a {k}-way output: categorical_crossentropy takes one-hot labels, "
                "sparse_categorical_crossentropy takes integers (or a 1-unit head met one-hot labels)")
        remedies = ["With integer labels use loss='sparse_categorical_crossentropy' (and the sparse accuracy metric); "
                    "with categorical_crossentropy, one-hot the labels (keras.utils.to_categorical(y, num_classes)).",
                    "Check that the last Dense layer has one unit per class."]
        said = f"Keras: shapes (None, {a}) and (None, {b}) incompatible"
    elif form == "tf_logits":
        a, b = int(d["a"]), int(d["b"])
        what = (f"the logits have {a} classes and the one-hot labels {b}: the head and the label encoding disagree on the "
                "number of classes")
        remedies = ["Build the output layer with the labels' number of classes (or one-hot the labels with "
                    "depth=num_classes of the head); check the class list the dataset was encoded with."]
        said = f"TensorFlow: logits [.., {a}] against labels [.., {b}]"
    elif form == "torch_seq":
        what = (f"cross_entropy read the second dimension of the prediction as the classes and expected a target of "
                f"{_size(list(d['expected']))}, got {_size(list(d['got']))}: sequence logits passed as [N, L, C] (the "
                "loss wants [N, C, L]), or the wrong dimension holds the classes")
        remedies = ["For sequence outputs pass logits.permute(0, 2, 1) (classes second), or flatten both: "
                    "loss(logits.view(-1, C), labels.view(-1)).",
                    "Print the prediction's and the target's shapes right before the loss."]
        said = f"PyTorch: expected target {_size(list(d['expected']))}, got {_size(list(d['got']))}"
    elif form == "torch_multi":
        what = ("cross_entropy/nll_loss takes class indices of shape [N], and got a 2-D target: one-hot labels [N, C] or "
                "a column [N, 1]")
        remedies = ["Pass class indices: labels.argmax(dim=1) for one-hot labels, labels.squeeze(1) for an [N, 1] "
                    "column (as int64); or keep one-hot/probability targets as float with a loss that takes them."]
        said = "PyTorch: 0D or 1D target tensor expected"
    else:
        return None
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.75,
        title="The loss got its labels in another form than it takes",
        message=f"The run died at the loss: {what}.",
        first_step=ev.step, evidence=[event_evidence(ev, said)], basis="direct", symptom="crash", remedies=remedies)


def detect(run: Run) -> Iterable[Finding]:
    for ev in run.events_of("loss_shape_mismatch"):
        if "form" in ev.data:
            found = _label_form(ev)
            if found is not None:
                yield found
                return
            continue
        if "batch_input" in ev.data:
            yield _rows(ev)
            return
        if ev.data.get("raised"):
            yield _refused(ev, list(ev.data.get("target") or []), list(ev.data.get("input") or []))
            return
        target, pred = list(ev.data.get("target") or []), list(ev.data.get("input") or [])
        empty = 0 in pred
        both = _broadcast(target, pred)
        if both is None or (not empty and _numel(target) == _numel(pred) == _numel(both)):
            continue  # no broadcast (it raised: the traceback says so), or extra size-1 dims that pair the same values
        if empty:
            what = (f"the prediction is empty ({_size(pred)}, target {_size(target)}): the loss is a mean over nothing, "
                    "NaN, or 0 where a framework filters it, and no gradient reaches the model")
        else:
            what = (f"the prediction {_size(pred)} and the target {_size(target)} broadcast to {_size(both)}: "
                    + ("every prediction is compared with every target" if _numel(both) > max(_numel(target), _numel(pred))
                       else f"{_numel(pred)} predicted value(s) against {_numel(target)} targets")
                    + ", so the best the model can do is predict the targets' mean, and the loss stays high")
        evidence = [event_evidence(ev, f"PyTorch: target size {_size(target)} differs from input size {_size(pred)}")]
        loss = points(run, "loss")
        if len(loss):
            first, last = loss[0], loss[-1]
            evidence.append(last.evidence(f"loss {fmt(first.value)} at step {first.step} -> {fmt(last.value)} at step "
                                          f"{last.step}"))
        yield Finding(
            code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.75 if empty else 0.7,
            title=f"The loss compares a prediction of shape {_size(pred)} with a target of shape {_size(target)}",
            message=f"PyTorch warned that the loss's target and input sizes differ: {what}.",
            first_step=ev.step, evidence=evidence, basis="direct", symptom="config_defect",
            remedies=_remedies(empty),
        )
        return
