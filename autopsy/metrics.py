"""Canonical metric names.

Every reader maps the keys it finds to one vocabulary so detectors never care whether a value
came from ``trainer_state.json`` (``loss``), TensorBoard (``train/loss``), Lightning
(``train_loss``), minimind (``loss``/``lr``) or ms-swift (``loss``). The original key is kept
in the ``key`` column of ``Run.scalars``.
"""

from __future__ import annotations

import re

#: exact aliases (lower-cased key -> canonical)
ALIASES: dict[str, str] = {
    "loss": "loss",
    "train_loss_step": "loss",
    "train/loss": "loss",
    "training_loss": "loss",
    "train/gpt_loss": "loss",
    "gpt_loss": "loss",
    "lm_loss": "loss",
    # TensorFlow-era scripts name the training loss "cost" (``cost = tf.reduce_mean(...)``; ``Epoch: 3 cost= 0.52``)
    "cost": "loss",
    "train_cost": "loss",
    "training_cost": "loss",
    "grad_norm": "grad_norm",
    "train/grad_norm": "grad_norm",
    "gradient_norm": "grad_norm",
    "grad-norm": "grad_norm",
    "grad norm": "grad_norm",
    "learning_rate": "learning_rate",
    "train/learning_rate": "learning_rate",
    "lr": "learning_rate",
    "train/lr": "learning_rate",
    "learning rate": "learning_rate",
    "actor lr": "learning_rate",
    "epoch": "epoch",
    "train/epoch": "epoch",
    "eval_loss": "eval_loss",
    # chainer's LogReport/PrintReport keys (ESPnet1's results/log and console table)
    "main/loss": "loss",
    "validation/main/loss": "eval_loss",
    "eval/loss": "eval_loss",
    "val_loss": "eval_loss",
    "valid_loss": "eval_loss",
    "validation_loss": "eval_loss",
    "val/loss": "eval_loss",
    "loss_scale": "loss_scale",
    "loss-scale": "loss_scale",
    "train/loss_scale": "loss_scale",
    "scale": "loss_scale",
    "nll_loss": "nll_loss",
    "train/nll_loss": "nll_loss",
    "sft_loss": "nll_loss",
    "train/sft_loss": "nll_loss",
    "logits_loss": "logits_loss",
    "aux_loss": "aux_loss",
    "token_acc": "token_accuracy",
    "mean_token_accuracy": "token_accuracy",
    "acc": "accuracy",
    "accuracy": "accuracy",
    "num_tokens": "num_tokens",
    "memory(gib)": "memory_gib",
    "dpo_loss": "dpo_loss",
    "actor loss": "loss",
    "reward": "reward",
    "current_steps": "step",
    "global_step": "step",
    "step": "step",
}

#: summary keys written once at the end (HF final record); kept, but not a training series.
SUMMARY_KEYS = {
    "train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos", "train_loss",
}

_PREFIX_RE = re.compile(r"^(train|training)[/_.]")


def canonical(key: str) -> str:
    """Canonical name of a metric key; unknown keys are normalised but otherwise kept."""
    k = key.strip()
    low = k.lower()
    if low in ALIASES:
        return ALIASES[low]
    if " " in low and (spaced := ALIASES.get(" ".join(low.split()).replace(" ", "_"))) is not None:
        return spaced  # SpeechBrain's FileTrainLogger "valid loss", a loop's "learning rate": the alias's words
    # TensorBoard-style prefixes written by HF's rewrite_logs: train/x -> x, eval/x -> eval_x
    if low.startswith("eval/"):
        rest = low[5:]
        return "eval_" + ALIASES.get(rest, rest)
    if low.startswith("val/") or low.startswith("valid/"):
        rest = low.split("/", 1)[1]
        return "eval_" + ALIASES.get(rest, rest)
    if low.startswith("train/"):
        rest = k[6:]
        rl = rest.lower()
        return ALIASES.get(rl, rest)
    return k


#: any learning-rate series' name: the canonical one, per-group copies (``current_lr_0``, ``lr_group1``, Composer's
#: ``lr-DecoupledAdamW/group0``), a loop's ``LR``
LR_NAME = re.compile(r"(?i)(?:^|[/_.\s-])(?:lr|learning_rate)(?:$|[/_.\s-]|\d)|^lr[-_]|current_lr")
#: where the text readers record how a log prints its learning rate when it prints a zero in fixed point
#: (``lr: 0.0000``): the number of decimals; such a zero only says the LR is below half a unit of the last one
LR_PRINT_DECIMALS = "log.lr_print_decimals"


#: a headerless table's column as the text reader names it (``autopsy.ingest.text_formats.parse_columns``): a value
#: whose meaning the log does not give
UNNAMED_COLUMN = re.compile(r"column \d+$")


def unnamed_column(i: int) -> str:
    """The name of a headerless table's i-th column (1-based; the first is the step): what UNNAMED_COLUMN matches."""
    return f"column {i}"


#: names of a loss that is the sum of a run's terms (detection, TTS, multi-task trainers): the run's loss when it
#: logs no ``loss`` itself (``autopsy.ingest.base.RunBuilder``)
TOTAL_LOSS_NAMES = frozenset({"total_loss", "total loss", "totalloss", "loss_total", "total_losses", "losses",
                              "train_total_loss", "overall_loss", "loss/total_loss"})
#: names of a running or per-step training loss a trainer prints instead of ``loss``: kohya sd-scripts' bar postfix
#: ``avr_loss`` (the epoch's running mean), diffusers' example scripts ``step_loss``, litgpt ``loss train:``, and the
#: averages hand-written loops print. The run's loss when it logs neither ``loss`` nor a total, and only one of these
RUNNING_LOSS_NAMES = frozenset({"avr_loss", "avg_loss", "loss_avg", "average_loss", "step_loss", "loss_train",
                                "mean_loss", "loss_mean", "running_loss", "batch_loss", "train_avg_loss",
                                "avg_train_loss", "train_batch_loss", "minibatch_loss"})

#: metrics that detectors treat as "the" training loss signal
LOSS_METRICS = ("loss",)
NONFINITE_WATCH = ("loss", "grad_norm", "eval_loss")


#: the series a report leads with when a run logs them (the per-step loss; an epoch summary's or the evaluation's;
#: the perplexity a trainer prints instead, as the Lua OpenNMT does)
PRIMARY_LOSSES = ("loss", "train_loss", "eval_loss", "ppl", "eval_ppl")
#: "loss" as a part of a metric's name (``loss_cls``, ``train_mel_loss_before``, ``decode.loss_seg``, ``generator_loss``);
#: not a path segment of its own (``ray/tune/loss``: a tracker's copy of the loss on its own step axis); a term after a
#: path is one (Chainer/ESPnet1 ``main/loss_ctc``, ``train/loss_cls``)
LOSS_PART = re.compile(r"(?:^|[_.\s-])loss(?:$|[_/.\s-])|/loss[_.]")
#: a camel-case loss term (GluonCV ``ObjLoss``/``BoxCenterLoss``, Keras-style ``CrossEntropyLoss``, ``TotalLoss``)
_CAMEL_LOSS = re.compile(r"[a-z0-9]Loss(?:$|[A-Z0-9_/.\s-])")
#: held-out series (``eval_loss_A``, ``val/loss_cls``): a stand-in loss only when the run logs no training one
_HELD_OUT = re.compile(r"(?i)^(?:eval|val|valid|validation|test)[_/.]")


def loss_like(metric: str) -> bool:
    """A loss, a loss term or a watched training signal by its name (``grad_norm`` included: detectors watch it)."""
    m = metric.lower()
    if m in SUMMARY_KEYS or m.startswith("loss_scale") or m.endswith("loss_scale"):
        return False
    return (m in NONFINITE_WATCH or m.startswith("loss") or LOSS_PART.search(m) is not None
            or _CAMEL_LOSS.search(metric) is not None)


def stand_in_losses(counts: dict[str, int], limit: int = 2) -> list[str]:
    """When a run logs none of PRIMARY_LOSSES: the loss-like series a report shows instead (per-model or per-term
    losses, e.g. faceswap's ``loss_A``/``loss_B``), training ones first, then the most logged, at most ``limit``.
    ``counts``: metric name -> number of points."""
    if any(m in counts for m in PRIMARY_LOSSES):
        return []
    got = [m for m, n in counts.items() if n and loss_like(m) and m not in NONFINITE_WATCH]
    got.sort(key=lambda m: (_HELD_OUT.match(m) is not None, -counts[m], m))
    return got[:limit]
