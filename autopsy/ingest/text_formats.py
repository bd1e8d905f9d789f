"""Metric lines of frameworks outside the HF dict family, each as its framework prints it.

One parser per format, with the signature of :data:`autopsy.ingest.text_metrics.PARSERS`:
``parse(text, first_line, st, out, steps, used)`` scans a chunk (bytes) with a regex that starts
with a literal, adds points to the :class:`Collector`, marks the step in force for events and
claims the line so the generic ``step N ... loss X`` parser does not read it again. Keys keep the
framework's own name (``key`` column); ``out.metric_override`` maps them to canonical metrics
(``lm loss`` -> ``loss``, ``gnorm`` -> ``grad_norm``). Print formats were checked against the
frameworks' sources:

- detectron2 ``CommonMetricPrinter``: `` eta: 5:41:49  iter: 379  total_loss: 1.707  loss_cls: 1.184 ...  lr: 0.003796``
  and the ``FloatingPointError`` message ``Loss became infinite or NaN at iteration=N! loss_dict = {...}``
- timm ``train.py``: ``Train: 1 [4550/5004 ( 91%)]  Loss: 5.240773 (5.9820)  Time: ...  LR: 2.133e-02``
- fairseq ``SimpleProgressBar`` / ``JsonProgressBar``: ``epoch 003:  5 / 356 loss=9.44, ..., num_updates=700``,
  ``epoch 002 | loss 9.803 | ... | num_updates 695``, ``| INFO | train_inner | {"epoch": 1, "loss": "16.4", ...}``
- verl ``concat_dict_to_str``: ``step:59 - actor/pg_loss:nan - actor/grad_norm:nan - ...``
- Megatron-LM ``training_log``: ``iteration 3383/ 8000 | ... | lm loss: 7.33E-01 | loss scale: 1.0 | grad norm: 0.752 |
  number of skipped iterations: 0 | number of nan iterations: 0 |`` and ``validation loss at iteration N | lm loss value: X``
- Caffe ``solver.cpp`` / ``sgd_solver.cpp``: ``Iteration 1660, loss = 2.19062``, ``Iteration 1660, lr = 0.001``
- torchtune recipes' bar description ``1|25|Loss: 1.2345`` (epoch|global_step|Loss)
- Keras ``Progbar``: ``Epoch 3/10`` then ``100/100 [====] - 2s 20ms/step - loss: 0.69 - val_loss: nan``
  (Keras 3 draws the bar with ``━``)
- tqdm bars with a ``key=value`` postfix (OpenRLHF ``Train step of epoch 0: ...| 10/100 [..., gpt_loss=0.1, lr=1e-5]``,
  PPO ``Episode [1/2]: ...| 5/10 [..., policy_loss=0.1]`` and ``Train epoch [1/1]: ...| 2/2 [..., pg=0.16, rm=0.39]``)
- YOLO (ultralytics) console rows under ``Epoch GPU_mem box_loss cls_loss dfl_loss Instances Size``
- ParallelWaveGAN-style trainers (kan-bayashi) and TensorFlowTTS ``base_trainer``: ``(Steps: 400) train/generator_loss =
  2.1234.``, ``(Step: 95400) train_mel_loss_before = nan.``, one metric per line
- llama-recipes / llama-cookbook ``train_utils``: ``Training Epoch: 1/3, step 10/100 completed (loss: tensor(1.23, ...))``,
  `` eval_ppl=tensor(...) eval_epoch_loss=tensor(...)``, ``Epoch 1: train_perplexity=..., train_epoch_loss=...``,
  ``Key: avg_train_loss, Value: ...``
- stable-baselines3 / OpenAI baselines ``HumanOutputFormat`` tables: a dashed rule, ``| key | value |`` rows (SB3 puts
  keys under ``| rollout/ |  |`` section rows, indented by three), a dashed rule; the step is ``total_timesteps``
- JSON metric records inside a text log (LLaMA-Factory ``trainer_log.jsonl`` lines pasted into an issue)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable

from autopsy.ingest.text_metrics import (
    NUM,
    Collector,
    Lines,
    StepMarks,
    StepState,
    Used,
    epoch_local_step,
    finditer_at,
    generic_pairs,
    has,
    is_loss_like,
    line_end,
    line_start,
    literal_positions,
    loss_key_metric,
)
from autopsy.metrics import unnamed_column


def _mark(st: StepState, steps: StepMarks, used: Used, pos: int, step: int, framework: str | None = None) -> None:
    steps.append((pos, step))
    st.last_step, st.exact_seen = step, True
    used.add(pos)
    if framework:
        st.frameworks.add(framework)


def _add_pairs(out: Collector, step: int, line: int, pairs: list, canon: dict[str, str] | None = None,
               canon_of: Callable[[str], str | None] | None = None) -> None:
    """The one shape every row parser ends in: (key, value) pairs added at a step, each key keeping the
    framework's name and, where ``canon`` (a table) or ``canon_of`` (a rule) gives one, its canonical metric."""
    for k, v in pairs:
        key = k.decode() if isinstance(k, bytes) else k
        out.add(step, key, float(v), line)
        c = canon.get(key) if canon is not None else canon_of(key) if canon_of is not None else None
        if c:
            out.metric_override[key] = c


def _num(raw: bytes | str) -> float | None:
    try:
        return float(raw)
    except (TypeError, ValueError):
        return None


# -- detectron2 ----------------------------------------------------------------------------------

_D2 = re.compile(rb"\biter: (\d+)  ([^\n\r]{0,4000})")
_D2_PAIR = re.compile(rb"([A-Za-z_][\w/.]{0,60}): (" + NUM + rb")(?![\w.])")
_D2_SKIP = {b"time", b"data_time", b"eta", b"max_mem", b"epoch"}
_D2_LOSS_DICT = re.compile(rb"loss_dict = \{([^\n\r]{0,4000})\}")
#: a term's value: a tensor (detectron2 0.1-0.2: ``tensor(nan, device='cuda:0', ...)``), a float (``metrics_dict`` of
#: later releases: ``nan``, ``inf``) or its NumPy 2 repr (``np.float64(nan)``)
_D2_TENSOR = re.compile(rb"'([\w/.]{1,60})': (?:tensor\(|np\.float(?:16|32|64)\()?(" + NUM + rb")")
_D2_NAN_AT = re.compile(rb"Loss became infinite or NaN at iteration=(\d+)")
_D2_KEYS = {"total_loss": "loss"}


def parse_detectron2(text: bytes, first_line: int, st: StepState, out: Collector,
                     steps: StepMarks, used: Used) -> None:
    lines = Lines(text, first_line)
    if has(text, b"iter: "):
        for m in _D2.finditer(text):
            pairs = [(k, v) for k, v in _D2_PAIR.findall(m[2]) if k not in _D2_SKIP]
            if not any(b"loss" in k for k, _ in pairs):
                continue
            _add_pairs(out, int(m[1]), lines.at(m.start()), pairs, _D2_KEYS)
            _mark(st, steps, used, m.start(), int(m[1]), "detectron2")
    if has(text, b"loss_dict = {"):
        lines = Lines(text, first_line)
        for m in _D2_LOSS_DICT.finditer(text):
            # the FloatingPointError names the iteration just before the dict; else the last step seen
            at = _D2_NAN_AT.search(text, max(0, m.start() - 400), m.start())
            step = int(at[1]) if at else (st.last_step if st.last_step is not None else 0)
            line = lines.at(m.start())
            vals = [(k.decode(), float(v)) for k, v in _D2_TENSOR.findall(m[1])]
            for k, v in vals:
                out.add(step, k, v, line)
            if vals:
                finite = [v for _, v in vals if not math.isinf(v)]
                out.add(step, "total_loss", sum(finite) if len(finite) == len(vals) else math.inf, line)
                out.metric_override["total_loss"] = "loss"
                _mark(st, steps, used, m.start(), step, "detectron2")


# -- timm ----------------------------------------------------------------------------------------

_TIMM = re.compile(rb"Train: (\d+) \[\s*(\d+)/(\d+) \(\s*\d+%\)\]([^\n\r]{0,4000})")
_TIMM_PAIR = re.compile(rb"([A-Za-z][\w@-]{0,30}): +(" + NUM + rb")(?:\s*\(\s*" + NUM + rb"\))?(?![\w.])")
_TIMM_KEYS = {"Loss": "loss", "LR": "learning_rate"}


def parse_timm(text: bytes, first_line: int, st: StepState, out: Collector,
               steps: StepMarks, used: Used) -> None:
    """timm prints the current value then the running mean in brackets; the current value is kept."""
    if not has(text, b"Train: "):
        return
    lines = Lines(text, first_line)
    for m in _TIMM.finditer(text):
        epoch, idx, total = int(m[1]), int(m[2]), int(m[3])
        pairs = [(k, v) for k, v in _TIMM_PAIR.findall(m[4]) if k not in (b"Time", b"Data")]
        if not pairs:
            continue
        step = epoch * total + idx  # timm's epoch is 0-based in train.py; batch_idx too
        _add_pairs(out, step, lines.at(m.start()), pairs, _TIMM_KEYS)
        _mark(st, steps, used, m.start(), step, "timm")


# -- Swin-Transformer / timm-style "Train: [e/E][i/N]" loops ------------------------------------

_SWIN = re.compile(rb"Train: \[(\d+)/(\d+)\]\[\s*(\d+)/(\d+)\]([^\n\r]{0,4000})")
_SWIN_PAIR = re.compile(rb"(?<![\w.])([A-Za-z_][\w]{0,30}) (" + NUM + rb")(?:\s*\(\s*" + NUM + rb"\))?(?![\w.])")


def parse_swin(text: bytes, first_line: int, st: StepState, out: Collector,
               steps: StepMarks, used: Used) -> None:
    """Swin-Transformer ``main.py``: ``Train: [0/300][4050/5004]  eta 0:17:06 lr 0.000500  time 1.17 (1.07)
    loss 3.2572 (3.3279)  grad_norm 1.0323 (nan)  mem 4814MB``; the value before the bracketed running mean is kept."""
    if not has(text, b"Train: ["):
        return
    lines = Lines(text, first_line)
    for m in _SWIN.finditer(text):
        pairs = [(k, v) for k, v in _SWIN_PAIR.findall(m[5]) if k not in (b"time", b"eta", b"mem")]
        if not any(b"loss" in k or k == b"grad_norm" for k, _ in pairs):  # (a paste cut to the column asked about)
            continue
        step = int(m[1]) * int(m[4]) + int(m[3])  # both 0-based
        _add_pairs(out, step, lines.at(m.start()), pairs)
        _mark(st, steps, used, m.start(), step)


# -- fairseq -------------------------------------------------------------------------------------

#: fairseq's stat names -> canonical (the rest keep their name; "valid_"/"train_" prefixes handled below)
FAIRSEQ_KEYS = {"loss": "loss", "nll_loss": "nll_loss", "gnorm": "grad_norm", "lr": "learning_rate",
                "loss_scale": "loss_scale", "ppl": "ppl"}
_FS_INNER = re.compile(rb"epoch (\d+):\s+(\d+) / (\d+) ([^\n\r]{0,4000})")
_FS_EQ = re.compile(rb"([A-Za-z_][\w]{0,40})=(" + NUM + rb")(?![\w.])")
#: fairseq before num_updates (0.4-0.5, 2018): ``| epoch 005  1000 / 8223 loss=2.17 (3.20), wps=959, ..., gnorm=2.7374``
#: (the running mean in brackets), an epoch-local counter; its summaries ``| epoch 005 | train loss 2.92 | train ppl 7.59``
_FS_OLD_INNER = re.compile(rb"\| epoch (\d+)[ \t]+(\d+) / (\d+) (loss=[^\n\r]{0,4000})")
_FS_OLD_PAIR = re.compile(rb"\| (?:train |valid )?([A-Za-z_][\w/]{0,40}) (" + NUM + rb")(?= \||\s*$)")
_FS_PIPES = re.compile(rb"epoch (\d+) \| ((?:valid on '[^'\n]{0,60}' subset \| )?)([^\n\r]{0,4000})")
_FS_PIPE_PAIR = re.compile(rb"\| ([A-Za-z_][\w]{0,40}) (" + NUM + rb")(?= \||\s*$)")
#: JsonProgressBar records: ``| INFO | train_inner | {...}`` (fairseq_cli logging) and
#: ``[2021-07-06 06:58:09,462][train_inner][INFO] - {...}`` (fairseq-hydra-train's hydra logging); a record a
#: terminal wrapped over several lines (``"t\nrain_nll_loss"``, fairseq#2696) is rejoined below
_FS_JSON = re.compile(rb"(?:\| (train_inner|train|valid|test) \||\[(train_inner|train|valid|test)\]\[[A-Z]+\] -) "
                      rb"(\{[^\n\r]{0,8000})")
#: lines a wrapped JSON record may span
_FS_WRAP_LINES = 12
_FS_SKIP = {"num_updates", "epoch", "update", "best_loss", "wall", "train_wall"}


def _fairseq_add(out: Collector, step: int, line: int, pairs: list[tuple[str, float]], prefix: str) -> int:
    n = 0
    for k, v in pairs:
        if k in _FS_SKIP:
            continue
        if prefix and k.startswith(prefix):
            k = k[len(prefix):]  # newer summaries name their keys already: "valid_loss", not "loss"
        key = prefix + k
        out.add(step, key, v, line)
        if prefix in ("valid_", "test_"):
            out.metric_override[key] = "eval_" + FAIRSEQ_KEYS.get(k, k)
        elif prefix == "train_":  # an epoch average: a summary series (train_loss), not the per-update loss
            out.metric_override[key] = "train_" + FAIRSEQ_KEYS.get(k, k)
        elif k in FAIRSEQ_KEYS:
            out.metric_override[key] = FAIRSEQ_KEYS[k]
        n += 1
    return n


def parse_fairseq(text: bytes, first_line: int, st: StepState, out: Collector,
                  steps: StepMarks, used: Used) -> None:
    """Steps are ``num_updates`` (optimizer updates); the per-epoch summaries become ``train_*``
    summary series, not the per-update loss (they average a whole epoch)."""
    if has(text, b"num_updates") and has(text, b"epoch "):  # the rarer first: a chunk's letters often hold "epoch"
        lines = Lines(text, first_line)
        for m in _FS_INNER.finditer(text):
            pairs = [(k.decode(), float(v)) for k, v in _FS_EQ.findall(m[4])]
            d = dict(pairs)
            if "num_updates" not in d or "loss" not in d:
                continue
            step = int(d["num_updates"])
            if _fairseq_add(out, step, lines.at(m.start()), pairs, ""):
                _mark(st, steps, used, m.start(), step, "fairseq")
        lines = Lines(text, first_line)
        in_force: int | None = None  # the update count of the last epoch summary above
        for m in _FS_PIPES.finditer(text):
            pairs = [(k.decode(), float(v)) for k, v in _FS_PIPE_PAIR.findall(b"| " + m[3])]
            d = dict(pairs)
            if "num_updates" in d:
                step = in_force = int(d["num_updates"])
            elif m[2] and in_force is not None:
                step = in_force  # a validation line without its own count (fairseq's older summary): that epoch's
            else:
                continue
            prefix = "valid_" if m[2] else "train_"
            if _fairseq_add(out, step, lines.at(m.start()), pairs, prefix):
                _mark(st, steps, used, m.start(), step, "fairseq")
    elif has(text, b"epoch ") and has(text, b"loss="):
        _parse_fairseq_old(text, first_line, st, out, steps, used)
    if has(text, b"| {") or has(text, b"] - {"):
        lines = Lines(text, first_line)
        for m in _FS_JSON.finditer(text):
            rec = _json_record(text, m[3], m.end())
            if not isinstance(rec, dict):
                continue
            tag = (m[1] or m[2]).decode()
            pre = "" if tag == "train_inner" else tag + "_"
            upd = _num(rec.get(pre + "num_updates", rec.get("num_updates")))
            if upd is None or math.isnan(upd):
                continue
            pairs = []
            for k, v in rec.items():
                f = _num(v) if isinstance(v, (str, int, float)) and not isinstance(v, bool) else None
                if f is None:
                    continue
                base = k[len(pre):] if pre and k.startswith(pre) else k
                pairs.append((base, f))
            step = int(upd)
            prefix = {"train_inner": "", "train": "train_", "valid": "valid_", "test": "test_"}[tag]
            if _fairseq_add(out, step, lines.at(m.start()), pairs, prefix):
                _mark(st, steps, used, m.start(), step, "fairseq")


def _parse_fairseq_old(text: bytes, first_line: int, st: StepState, out: Collector, steps: StepMarks,
                       used: Used) -> None:
    """fairseq 0.4-0.5: the per-log loss at the epoch-local counter made run-wide (:func:`epoch_local_step`); an
    epoch's ``train``/``valid`` summary line at the step of the last log above it (0 before any)."""
    inner = list(_FS_OLD_INNER.finditer(text))
    if not inner and "fairseq_old" not in st.epoch_base:
        return
    lines = Lines(text, first_line)
    rows = sorted([(m.start(), 0, m) for m in inner] + [(m.start(), 1, m) for m in _FS_PIPES.finditer(text)],
                  key=lambda r: r[0])
    for pos, summary, m in rows:
        if not summary:
            pairs = [(k.decode(), float(v)) for k, v in _FS_EQ.findall(m[4])]
            step = epoch_local_step(st, "fairseq_old", int(m[1]), int(m[2]), int(m[3]))
            if _fairseq_add(out, step, lines.at(pos), pairs, ""):
                _mark(st, steps, used, pos, step, "fairseq")
            continue
        pairs = [(k.decode(), float(v)) for k, v in _FS_OLD_PAIR.findall(b"| " + m[3])]
        if _fairseq_add(out, st.last_step or 0, lines.at(pos), pairs, "valid_" if m[2] else "train_"):
            used.add(pos)


def _json_record(text: bytes, head: bytes, end: int) -> object:
    """The JSON object starting at ``head`` (the rest of its line); when the line does not close it, the
    next lines are appended as they are (a terminal's hard wrap splits anywhere, even inside a key)."""
    body = head.rstrip()
    if not body.endswith(b"}"):
        tail = text[end:end + 8000].split(b"\n", _FS_WRAP_LINES)[:_FS_WRAP_LINES]
        for part in tail[1:] if tail and tail[0].strip() == b"" else tail:
            body += part.strip(b"\r")
            if body.rstrip().endswith(b"}"):
                break
        else:
            return None
    try:
        return json.loads(body)
    except ValueError:
        return None


# -- verl ----------------------------------------------------------------------------------------

#: ``step:`` at a line start or after a space/``]``/``:``/``|``; the literal comes first so the scan runs
#: as a fast literal search (a leading ``^``/lookbehind made the regex engine try every byte: ~0.3 s a 4 MB chunk)
_VERL = re.compile(rb"step:(?:(?<=[\s\]:|]step:)|(?<=\Astep:))(\d+) - ([^\n\r]{0,20000})")
#: pprint of a numpy scalar under numpy 2 prints ``np.float64(0.5)``
_VERL_PAIR = re.compile(rb"([A-Za-z_][\w/@.()\[\]-]{0,120}?):(?:np\.\w+\()?(" + NUM + rb")\)?(?= - |\s*-?\s*$)")
#: verl metric names with a canonical meaning (the rest keep verl's names)
VERL_KEYS = {"actor/grad_norm": "grad_norm", "actor/lr": "learning_rate", "critic/score/mean": "reward",
             "val/test_score/mean": "eval_reward"}


def parse_verl(text: bytes, first_line: int, st: StepState, out: Collector,
               steps: StepMarks, used: Used) -> None:
    if not has(text, b"step:"):
        return
    lines = Lines(text, first_line)
    for m in _VERL.finditer(text):
        body = m[2].rstrip()
        pairs = _VERL_PAIR.findall(body)
        if not pairs:
            continue
        _add_pairs(out, int(m[1]), lines.at(m.start()), pairs, VERL_KEYS)
        _mark(st, steps, used, m.start(), int(m[1]), "verl")


# -- Megatron-LM / NeMo (Megatron core) ----------------------------------------------------------

_MEGA = re.compile(rb"iteration\s+(\d+)\s*/\s*(\d+) \|([^\n\r]{0,8000})")
_MEGA_PAIR = re.compile(rb"\s*([A-Za-z][\w ()/.-]{0,80}?):\s+(" + NUM + rb")\s*(?:\||$)")
_MEGA_VAL = re.compile(rb"validation loss at iteration (\d+)[^|\n\r]{0,80}\|([^\n\r]{0,4000})")
#: Megatron's printed names -> canonical metrics
MEGATRON_KEYS = {
    "lm loss": "loss", "learning rate": "learning_rate", "loss scale": "loss_scale", "grad norm": "grad_norm",
    "number of skipped iterations": "skipped_iterations", "number of nan iterations": "nan_iterations",
    "skipped iterations": "skipped_iterations", "nan iterations": "nan_iterations",
    "consumed samples": "consumed_samples", "global batch size": "batch_size",
    "elapsed time per iteration (ms)": "iteration_time_ms", "params norm": "params_norm",
    "num zeros": "num_zeros",
}


def _megatron_metric(key: str) -> str | None:
    canon = MEGATRON_KEYS.get(key)
    return canon if canon is not None or not key.endswith(" loss") else key.replace(" ", "_")


def parse_megatron(text: bytes, first_line: int, st: StepState, out: Collector,
                   steps: StepMarks, used: Used) -> None:
    if not has(text, b"iteration"):
        return
    lines = Lines(text, first_line)
    for m in _MEGA.finditer(text):
        pairs = _MEGA_PAIR.findall(m[3])
        if not pairs:
            continue
        step = int(m[1])
        _add_pairs(out, step, lines.at(m.start()), [(k.strip(), v) for k, v in pairs], canon_of=_megatron_metric)
        _mark(st, steps, used, m.start(), step, "megatron")
    if has(text, b"validation loss at iteration"):
        lines = Lines(text, first_line)
        for m in _MEGA_VAL.finditer(text):
            step, line = int(m[1]), lines.at(m.start())
            for k, v in _MEGA_PAIR.findall(m[2]):
                key = k.decode().strip()
                if not key.endswith(" value"):
                    if key.endswith("PPL"):
                        out.add(step, "validation " + key, float(v), line)
                        out.metric_override["validation " + key] = "eval_ppl"
                    continue
                name = key[:-6]
                vkey = "validation " + name
                out.add(step, vkey, float(v), line)
                out.metric_override[vkey] = "eval_loss" if name == "lm loss" else "eval_" + name.replace(" ", "_")
            _mark(st, steps, used, m.start(), step, "megatron")


# -- Caffe ---------------------------------------------------------------------------------------

_CAFFE = re.compile(rb"Iteration (\d+)(?: \([^)\n]{0,80}\))?, (loss|lr) = (" + NUM + rb")")
#: solver.cpp's test pass: ``Iteration 18000, Testing net (#0)``, then one ``    Test net output #2: loss = 3.30735
#: (* 1 = 3.30735 loss)`` per output blob (the mean over test_iter batches); in training, after ``Iteration N, loss =``,
#: ``    Train net output #0: loss_bbox = 0.12 (* 1 = 0.12 loss)`` per output blob of that iteration
_CAFFE_TESTING = re.compile(rb"Iteration (\d+)(?: \([^)\n]{0,80}\))?, Testing net \(#(\d+)\)")
_CAFFE_OUTPUT = re.compile(rb"(Test|Train) net output #\d+: ([^\s=][^=\r\n]{0,80}?) = (" + NUM + rb")")


def parse_caffe(text: bytes, first_line: int, st: StepState, out: Collector,
                steps: StepMarks, used: Used) -> None:
    """``loss`` is Caffe's smoothed loss (``average_loss`` iterations), printed every ``display``; the test nets'
    outputs are ``eval_<blob>`` (``eval<k>_<blob>`` for test net #k > 0) at the iteration of their ``Testing net``
    line, the train net's outputs other than ``loss`` (the smoothed one is kept) ``<blob>`` at the last iteration."""
    if not has(text, b"Iteration "):
        return
    lines = Lines(text, first_line)
    found = list(_CAFFE.finditer(text))
    for m in found:
        step, key = int(m[1]), m[2].decode()
        out.add(step, key, float(m[3]), lines.at(m.start()))
        _mark(st, steps, used, m.start(), step, "caffe")
    if not has(text, b" net output #"):
        return
    marks = sorted([(m.start(), m) for m in _CAFFE_TESTING.finditer(text)]
                   + [(m.start(), m) for m in found] + [(m.start(), m) for m in _CAFFE_OUTPUT.finditer(text)],
                   key=lambda t: t[0])
    test_step = train_step = None
    prefix = "eval_"
    for pos, m in marks:
        if m.re is _CAFFE_TESTING:
            test_step, net = int(m[1]), int(m[2])
            prefix = "eval_" if net == 0 else f"eval{net}_"
            _mark(st, steps, used, pos, test_step, "caffe")
        elif m.re is _CAFFE:
            train_step = int(m[1])
        else:
            name = m[2].decode().strip()
            if m[1] == b"Test" and test_step is not None:
                out.add(test_step, prefix + name, float(m[3]), lines.at(pos))
            elif m[1] == b"Train" and train_step is not None and name != "loss":
                out.add(train_step, name, float(m[3]), lines.at(pos))
            else:
                continue
            used.add(line_start(text, pos))


# -- torchtune -----------------------------------------------------------------------------------

#: ``epoch|global_step|Loss: x`` after anything but a digit, pipe or dot (a line start, ``\r``, torchrun's
#: ``[trainer0|0]:`` prefix); a paste that lost the ``epoch|step`` part keeps ``|Loss: x: ... | n/N [``, whose
#: bar counter is then the step
_TORCHTUNE = re.compile(rb"(?:(?<![\w|.])(\d+)\|(\d+))?\|Loss: (" + NUM + rb")(?::[^|\r\n]{0,20}\|[^|\r\n]{0,400}\|"
                        rb"\s*(\d+)/\d+ \[)?")


def parse_torchtune(text: bytes, first_line: int, st: StepState, out: Collector,
                    steps: StepMarks, used: Used) -> None:
    """The bar description ``epoch|global_step|Loss: x``; tqdm redraws it, so a step repeats (same value)."""
    if not has(text, b"|Loss: "):
        return
    lines = Lines(text, first_line)
    last = getattr(st, "torchtune_last", None)  # a redraw may open the next chunk
    for m in _TORCHTUNE.finditer(text):
        if m[2] is None and m[4] is None:
            continue  # neither the step nor a bar counter: not placed
        step = int(m[2] if m[2] is not None else m[4])
        if step == last:
            continue
        last = st.torchtune_last = step  # type: ignore[attr-defined]
        out.add(step, "loss", float(m[3]), lines.at(m.start()))
        _mark(st, steps, used, m.start(), step, "torchtune")


# -- Keras ---------------------------------------------------------------------------------------

#: (not glued to a value before it: ``- loss: nanEpoch 1/1000`` is a nested fit's header printed mid-row, and
#: the rows after it still belong to the outer epoch)
_KERAS_EPOCH = re.compile(rb"(?<![\w.])Epoch (\d+)/(\d+)")
_KERAS_ROW = re.compile(rb"(?<![\w/])(\d+)/(\d+) (?:\[[=>.]*\]|(?:\xe2\x94[\x81\x80])+|(?=- \d+m?s - ))([^\r\n]{0,4000})")
#: ``verbose=2`` in Keras <= 2.2: one `` - 5s - loss: 0.29 - acc: 0.91`` line per epoch under its ``Epoch e/E`` header
_KERAS_V2_OLD = re.compile(rb"(?m)^ - \d+m?s(?: - \d+m?s/step)? (- [^\r\n]{0,4000})")
#: a value ends at a non-word character, or where TerminateOnNaN glued its message: ``loss: 44.4110Batch 3: Invalid loss``
_KERAS_PAIR = re.compile(rb" - ([\w/]+): (" + NUM + rb")(?:(?![\w.])|(?=Batch \d))")


def parse_keras(text: bytes, first_line: int, st: StepState, out: Collector,
                steps: StepMarks, used: Used) -> None:
    """Progbar rows; step = (epoch - 1) * batches + batch. The values are running means of the epoch."""
    if (not has(text, b"/step") and not has(text, b"ETA") and not has(text, b"/sample") and not has(text, b"] - ")
            and not has(text, b"\n - ")):
        return  # Keras 1 rows have no "/step": "9595/9595 [=====] - 1s - loss: nan"
    epochs = [(m.start(), int(m[1])) for m in _KERAS_EPOCH.finditer(text)]
    lines = Lines(text, first_line)
    ei = -1
    epoch = getattr(st, "keras_epoch", 1)
    for m in _KERAS_ROW.finditer(text):
        while ei + 1 < len(epochs) and epochs[ei + 1][0] < m.start():
            ei += 1
            epoch = epochs[ei][1]
        batch, total = int(m[1]), int(m[2])
        step = (epoch - 1) * total + batch
        line = lines.at(m.start())
        pairs = [(k, v) for k, v in _KERAS_PAIR.findall(m[3]) if k != b"ETA"]
        if not pairs:
            continue
        _add_pairs(out, step, line, pairs, canon_of=lambda k: "eval_" + k[4:] if k.startswith("val_") else None)
        _mark(st, steps, used, m.start(), step, "keras")
    if epochs and has(text, b"\n - "):
        ei = -1
        for m in _KERAS_V2_OLD.finditer(text):
            while ei + 1 < len(epochs) and epochs[ei + 1][0] < m.start():
                ei += 1
            if ei < 0:
                continue
            pairs = [(k, v) for k, v in _KERAS_PAIR.findall(b" " + m[1])]
            if pairs:
                step = epochs[ei][1]
                _add_pairs(out, step, lines.at(m.start()), pairs,
                           canon_of=lambda k: "eval_" + k[4:] if k.startswith("val_") else None)
                _mark(st, steps, used, m.start(), step, "keras")
        epoch = epochs[-1][1]
    st.keras_epoch = epoch  # type: ignore[attr-defined]


# -- tqdm bars with a key=value postfix (OpenRLHF and other loops) -------------------------------

#: a tqdm bar's head ``50%|█████ | 10/100 [``; its postfix runs to ``]``, or, when the terminal width cut the
#: bar (NeMo's long postfix), to the next redraw or the line end
_TQDM_HEAD = re.compile(rb"%\|[^|\r\n]{0,400}\|\s*(\d+)/(\d+)\s*\[")
_POST_PAIR = re.compile(rb",\s*([A-Za-z_][\w/.]{0,60})=(" + NUM + rb")(?=,|\s*$)")
_EPOCH_IN_DESC = re.compile(rb"[Ee]poch[ :]*(\d+)")
_LIGHTNING_DESC = re.compile(rb"\s*Epoch \d+:\s*$")
#: OpenRLHF's PPO loop (trainer/ppo_trainer.py): ``Episode [e/E]`` counts the rollouts of episode e (1-based), one
#: PPO update each, so its counter is the update within the episode
_EPISODE_DESC = re.compile(rb"Episode \[(\d+)/\d+\]")
#: OpenRLHF's PPO actor/critic (trainer/ray/ppo_actor.py, ppo_critic.py): ``Train epoch [e/E]`` is drawn anew for
#: every PPO update and counts its micro-batches, so its counter restarts at each update
_PPO_INNER_DESC = re.compile(rb"Train epoch \[\d+/\d+\]")
#: OpenRLHF's postfix names -> canonical. SFT/DPO/RM bars (``gpt_loss``, ``loss_mean``, ``lr``); the PPO actor's short
#: status: ``pg``/``rm``/``ret``/``glen``/``tlen``/``kl``/``act_lr`` (+``cri``/``vals``/``cri_lr``/``ptx``) from
#: 2023-10 to 2025-04, then ``act_loss``/``reward``/``return``/``gen_len``/``tot_len``/``kl``/``act_lr``/``grad_norm``
POSTFIX_KEYS = {"gpt_loss": "loss", "policy_loss": "loss", "actor_lr": "learning_rate", "lr": "learning_rate",
                "eval_loss": "eval_loss", "reduced_train_loss": "loss", "train_loss": "loss", "val_loss": "eval_loss",
                "pg": "loss", "act_loss": "loss", "rm": "reward", "act_lr": "learning_rate", "cri": "critic_loss",
                "cri_lr": "critic_learning_rate", "ptx": "ptx_loss"}
#: OpenRLHF's short postfix names of a loss or reward (they hold neither word)
_SHORT_LOSS_KEYS = ("pg", "rm", "cri", "ptx")
#: postfix keys that name the trainer's own loss; beside one of them the bar's ``loss`` (Lightning's running
#: mean, NaN on pipeline stages that do not compute the loss) is kept as ``bar_loss``
_TRAINER_LOSS_KEYS = ("reduced_train_loss",)


def _bars(text: bytes) -> list[tuple[int, int, int, bytes, bytes]]:
    """(position, counter, total, description, postfix) of every bar redraw in a chunk."""
    heads = list(_TQDM_HEAD.finditer(text))
    bars = []
    prev_end = 0
    for i, m in enumerate(heads):
        le = line_end(text, m.end())
        stop = min(heads[i + 1].start() if i + 1 < len(heads) else le, le)
        close = text.find(b"]", m.end(), stop)
        body_end = close if close >= 0 else stop
        ls = max(line_start(text, m.start()), prev_end)
        desc = text[ls:m.start()].rstrip(b"0123456789 ")  # without the "50" of "50%"
        bars.append((m.start(), int(m[1]), int(m[2]), desc, text[m.end():body_end]))
        prev_end = body_end + 1
    return bars


#: a ``[`` with an ``=`` after it, before any ``]`` or line break: what every postfix pair has in front of it
_OPEN_EQ = re.compile(rb"\[[^\]\r\n]*=")


def _postfix_may_hold_pairs(text: bytes) -> bool:
    """False when no ``=`` of the chunk can lie in a bar's postfix, so :func:`_bars` need not run.

    A postfix runs from its bar's ``[`` to the next ``]`` on the same line (or less), so an ``=`` is in
    one only if its line has a ``[`` before it with no ``]`` between. A chunk of plain tqdm redraws
    (45k a 4 MB chunk of HF Trainer output) beside DeepSpeed's ``[Rank 0] step=`` or a warning's
    ``requires_grad=True`` has none: the bar scan, most of this parser's cost, would find no pair.
    Each line holding an ``=`` is looked at once.
    """
    find, rfind = text.find, text.rfind
    q = find(b"=")
    while q >= 0:
        ls = max(rfind(b"\n", 0, q), rfind(b"\r", 0, q)) + 1
        le = line_end(text, q)
        if _OPEN_EQ.search(text, ls, le) is not None:
            return True
        q = find(b"=", le)
    return False


#: a postfix of ``key: value`` pairs, tqdm's ``set_postfix_str(f"Loss: {loss:.4f}")`` (NeuralHydrology's trainer,
#: many hand-written loops: ``loss: 0.12, rmse: 0.3``, ``Loss: 0.5 (0.6) Acc: 0.9 (0.8)``, ``Loss: 0.5 - LR: 1e-4``),
#: after the bar's rate; a key of up to three words
_POST_RATE = re.compile(rb"(?:it/s|s/it),")
_POST_COLON = re.compile(rb"(?:^|[\s,|(-])([A-Za-z_][\w/.]{0,40}(?: [A-Za-z_][\w/.]{0,40}){0,2}):\s*(" + NUM
                         + rb")(?![\w:.])")


def _colon_pairs(post: bytes) -> list[tuple[str, float]]:
    """The ``key: value`` pairs of a postfix after its rate (``[06:41<02:46, 26.91it/s, Loss: 1.4837``)."""
    m = _POST_RATE.search(post)
    if m is None:
        return []
    return [(k.decode(), float(v)) for k, v in _POST_COLON.findall(post, m.end())]


def parse_tqdm_postfix(text: bytes, first_line: int, st: StepState, out: Collector,
                       steps: StepMarks, used: Used) -> None:
    """Only bars whose postfix has a loss-like key; the last redraw of each counter wins.
    Lightning's ``Epoch N:`` bars have their own parser (same idea, epoch-based steps), unless the postfix
    carries NeMo's ``global_step`` (the trainer's step, read here)."""
    if not has(text, b"%|"):
        return
    # ``key: value`` postfixes follow the rate and a comma; a bar with nothing after its rate closes at once (``it/s]``)
    colon = has(text, b"it/s, ") or has(text, b"s/it, ")
    if not colon and (b"=" not in text or not _postfix_may_hold_pairs(text)):
        return
    lines = Lines(text, first_line)
    best: dict[int, tuple[int, int, list]] = {}
    nemo_lines: set[int] = set()
    for pos, n, total, desc, post in _bars(text):
        if b"=" in post:
            pairs = [(k.decode(), float(v)) for k, v in _POST_PAIR.findall(b"," + post.rstrip(b", "))]
        elif colon and b":" in post:
            pairs = _colon_pairs(post)
        else:
            continue
        gs = [v for k, v in pairs if k == "global_step"]  # NeMo puts the trainer's step in the postfix
        if not gs and _LIGHTNING_DESC.match(desc.rsplit(b",", 1)[-1]):
            continue  # Lightning's own "Epoch N: 50%|..." bars: parse_lightning
        if not any("loss" in k.lower() or k.startswith("reward") or k in _SHORT_LOSS_KEYS for k, _ in pairs):
            continue
        line = lines.at(pos)
        episode = _EPISODE_DESC.search(desc)
        if gs and not math.isnan(gs[0]):
            step = int(gs[0])
            pairs = [(k, v) for k, v in pairs if k != "global_step"]
            nemo_lines.add(line)
        elif line in nemo_lines or b"global_step=" in text[line_start(text, pos):line_end(text, pos)]:
            continue  # a NeMo redraw cut before its global_step: its step is unknown
        elif episode:
            step = (int(episode[1]) - 1) * total + n
            st.ppo_episodes = True  # type: ignore[attr-defined]
        elif _PPO_INNER_DESC.search(desc):
            step = _ppo_inner_step(st, n, total, frozenset(k for k, _ in pairs))
            if step is None:
                continue
        else:
            em = _EPOCH_IN_DESC.search(desc)
            step = int(em[1]) * total + n if em else n
        if any(k in _TRAINER_LOSS_KEYS for k, _ in pairs):
            pairs = [("bar_loss" if k == "loss" else k, v) for k, v in pairs]
        best[step] = (pos, line, pairs)
    for step, (pos, line, pairs) in sorted(best.items(), key=lambda kv: kv[1][0]):
        _add_pairs(out, step, line, pairs, POSTFIX_KEYS)
        _mark(st, steps, used, pos, step)


def _ppo_inner_step(st: StepState, n: int, total: int, keys: frozenset[str]) -> int | None:
    """Step of an OpenRLHF ``Train epoch [e/E]`` bar: the bar restarts at every PPO update, so its updates are
    numbered in order (a counter lower than the last one opens the next update) and step = update * total + n,
    a micro-batch timeline. The actor's and the critic's bars (other postfix keys, other Ray actors, their
    lines interleaved) are numbered apart. None once the ``Episode [e/E]`` bars gave the updates their own
    steps (the same losses, one per update)."""
    if getattr(st, "ppo_episodes", False):
        return None
    bars: dict[frozenset[str], tuple[int, int]] = getattr(st, "ppo_inner", None) or {}
    last, update = bars.get(keys, (None, 0))
    if last is not None and n < last:
        update += 1
    bars[keys] = (n, update)
    st.ppo_inner = bars  # type: ignore[attr-defined]
    return update * total + n


# -- YOLO (ultralytics) console -----------------------------------------------------------------

#: YOLOv8+ ``Epoch GPU_mem box_loss cls_loss dfl_loss Instances Size``; YOLOv5/v7 ``Epoch gpu_mem box obj cls total labels img_size``
_YOLO_HEAD = re.compile(rb"Epoch[ \t]+(?:GPU_mem|gpu_mem)((?:[ \t]+\w+)+)")
#: YOLOv5/v7 short column names -> metric; the count and size columns are not metrics
YOLO_COLUMNS = {"box": "box_loss", "obj": "obj_loss", "cls": "cls_loss", "total": "loss", "seg": "seg_loss"}
_YOLO_NOT_METRICS = {"Instances", "Size", "labels", "img_size"}
_YOLO_ROW = re.compile(rb"(?<![\w/])(\d+)/(\d+)[ \t]+[\d.]+G((?:[ \t]+" + NUM + rb")+)[ \t]*:")


def parse_yolo(text: bytes, first_line: int, st: StepState, out: Collector,
               steps: StepMarks, used: Used) -> None:
    """Rows ``  1/100  2.61G  1.218  1.408  1.208  167  640: 100%|...``; step = epoch (last redraw)."""
    if not has(text, b"GPU_mem") and not has(text, b"gpu_mem") and not getattr(st, "yolo_cols", None):
        return
    head = None
    for h in _YOLO_HEAD.finditer(text):
        head = h
    cols = [c.decode() for c in head[1].split()] if head is not None else getattr(st, "yolo_cols", None)
    if not cols:
        return
    st.yolo_cols = cols  # type: ignore[attr-defined]
    lines = Lines(text, first_line)
    best: dict[int, tuple[int, int, list[bytes]]] = {}
    for m in _YOLO_ROW.finditer(text):
        best[int(m[1])] = (m.start(), lines.at(m.start()), m[3].split())
    for step, (pos, line, vals) in sorted(best.items(), key=lambda kv: kv[1][0]):
        _add_pairs(out, step, line, [(n, raw) for n, raw in zip(cols, vals) if n not in _YOLO_NOT_METRICS], YOLO_COLUMNS)
        _mark(st, steps, used, pos, step, "ultralytics")


# -- JSON records inside a text log ---------------------------------------------------------------

_JSON_LINE_BODY = rb'[ \t]*(\{"[^\n\r]{0,20000}\})[ \t]*(?=\r?\n|\r?\Z)'
#: step keys of known JSON trainer logs, in order of preference
JSON_STEP_KEYS = ("current_steps", "global_step", "step", "iteration", "iter", "num_updates")
_JSON_SKIP = {"current_steps", "total_steps", "global_step", "step", "iteration", "iter", "num_updates",
              "elapsed_time", "remaining_time", "percentage", "epoch_time"}


#: a pretty-printed JSON record: ``{`` alone on its line, one ``"key": value`` per deeper-indented line, ``}`` (or
#: ``},``; a paste may shift its indentation). Chainer's ``LogReport`` writes its ``log`` file so (``json.dump(self._log, f,
#: indent=4)``: ESPnet1's ``exp/*/results/log``; pytorch-pfn-extras' ``log``), and people paste such records whole
_JSON_BLOCK = re.compile(rb'(?m)^([ \t]*)\{[ \t]*\r?\n((?:\1[ \t]+"[^\n\r]{1,400}\r?\n){1,200})[ \t]*\},?[ \t]*(?=\r?\n|\r?\Z)')
_JSON_BLOCK_GATE = re.compile(rb'\{\r?\n[ \t]+"')
#: the key of one ``"key": value`` line of such a record (JSON string escapes kept, decoded by ``json.loads``)
_JSON_BLOCK_KEY = re.compile(rb'[ \t]*"((?:[^"\\]|\\.)*)"\s*:')


def _json_step(rec: dict) -> tuple[int | None, object]:
    step = None
    for k in JSON_STEP_KEYS:
        v = rec.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            step = v
            break
    gm = rec.get("global_step/max_steps")
    if step is None and isinstance(gm, str) and gm.split("/")[0].strip().isdigit():
        step = int(gm.split("/")[0])
    return step, gm


def _json_pairs(rec: dict) -> list[tuple[str, float]] | None:
    """A record's metric pairs, or None when it names no loss, reward or lr (not a training record)."""
    pairs = [(k, float(v)) for k, v in rec.items()
             if k not in _JSON_SKIP and isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not any("loss" in k or k.startswith("reward") or k == "lr" for k, _ in pairs):
        return None
    return pairs


def parse_json_lines(text: bytes, first_line: int, st: StepState, out: Collector,
                     steps: StepMarks, used: Used) -> None:
    """LLaMA-Factory/ms-swift/generic JSON metric records pasted among other text (an issue body), one per line or
    pretty-printed over several (a Chainer/ESPnet1 ``log`` file)."""
    if not has(text, b'{"'):  # has: 0.4 ms on a 4 MB chunk of dicts, where "in" took 3.5 ms (a frequent "{")
        if _json_block_gate(text):
            _json_blocks(text, Lines(text, first_line), st, out, steps, used)
        return
    lines = Lines(text, first_line)
    for m in line_matches(_JSON_LINE_BODY, text, b'{"'):
        try:
            rec = json.loads(m[1])  # bare NaN/Infinity are accepted; a cut record is not
        except ValueError:
            continue
        if not isinstance(rec, dict):
            continue
        step, gm = _json_step(rec)
        if step is None:
            continue
        pairs = _json_pairs(rec)
        if pairs is None:
            continue
        line = lines.at(m.start())
        for k, v in pairs:
            out.add(step, k, v, line)
        _mark(st, steps, used, m.start(), step,
              "llamafactory" if "current_steps" in rec else ("ms_swift" if gm is not None else None))
    if has(text, b"json_stats: {"):
        _json_stats(text, lines, st, out, steps, used)
    if _json_block_gate(text):
        _json_blocks(text, lines, st, out, steps, used)


def _json_block_gate(text: bytes) -> bool:
    """A pretty-printed record may be here: a line ending in ``{`` (json.dump writes no trailing blanks) whose next
    line is an indented ``"key"``. Found with C substring scans, each hit checked by one anchored match: a regex
    scan of every ``{`` cost ~8 ms per 4 MB chunk of dict logs, where multi-line Python dicts also end lines in ``{``."""
    match = _JSON_BLOCK_GATE.match
    for opener in (b"{\n", b"{\r\n"):
        i = text.find(opener) if has(text, opener) else -1  # has: a C pass over the chunk's skeleton when absent
        while i >= 0:
            if match(text, i):
                return True
            i = text.find(opener, i + 2)
    return False


def _json_blocks(text: bytes, lines: Lines, st: StepState, out: Collector, steps: StepMarks, used: Used) -> None:
    """Pretty-printed records (``_JSON_BLOCK``) with a step key: each value at the line that prints it; every line of
    the record is marked read, so no line parser reads its ``"key": value`` lines again as records of their own."""
    for m in _JSON_BLOCK.finditer(text):
        body = m[2].rstrip()
        try:
            rec = json.loads(b"{" + (body[:-1] if body.endswith(b",") else body) + b"}")
        except ValueError:
            continue
        if not isinstance(rec, dict):
            continue
        step, _ = _json_step(rec)
        pairs = _json_pairs(rec) if step is not None else None
        if step is None or pairs is None:
            continue
        at: dict[str, int] = {}
        pos = m.start(2)
        for raw in m[2].splitlines(keepends=True):
            km = _JSON_BLOCK_KEY.match(raw)
            if km:
                try:
                    at.setdefault(json.loads(b'"' + km[1] + b'"'), pos)
                except ValueError:
                    pass
            used.add(pos)
            pos += len(raw)
        for k, v in pairs:
            out.add(step, k, v, lines.at(at.get(k, m.start())))
        _mark(st, steps, used, m.start(), step, "chainer" if "main/loss" in rec else None)
        used.add(m.end() - 1)


#: Detectron's ``log_json_stats`` (``print('json_stats: {:s}'.format(json.dumps(stats)))``, floats as ``'{:.6f}'``
#: strings, ``iter`` an int) and PySlowFast / pycls ``logging.log_json_stats`` (``"_type": "train_iter"``, ``"epoch":
#: "1/196"``, ``"iter": "10/500"``, numbers); a record may follow a logger prefix
_JSON_STATS = re.compile(rb'json_stats: (\{[^\n\r]{0,20000}\})')
_JSON_STATS_SKIP = {"iter", "cur_iter", "global_iter", "epoch", "eta", "time", "dt", "dt_data", "dt_net", "mb_qsize", "mem", "gpu_mem",
                    "RAM", "_type"}


def _frac(v: object) -> tuple[int, int] | None:
    """``"10/500"`` -> (10, 500)."""
    if isinstance(v, str) and "/" in v:
        a, _, b = v.partition("/")
        if a.strip().isdigit() and b.strip().isdigit():
            return int(a), int(b)
    return None


def _json_stats(text: bytes, lines: Lines, st: StepState, out: Collector, steps: StepMarks, used: Used) -> None:
    for m in _JSON_STATS.finditer(text):
        try:
            rec = json.loads(m[1])
        except ValueError:
            continue
        if not isinstance(rec, dict):
            continue
        it, ep, gi = rec.get("iter", rec.get("cur_iter")), _frac(rec.get("epoch")), _frac(rec.get("global_iter"))
        it_frac = _frac(it)
        if isinstance(it, int) and not isinstance(it, bool):
            step = it
        elif gi is not None:
            step = gi[0]
        elif it_frac is not None and ep is not None:
            step = (ep[0] - 1) * it_frac[1] + it_frac[0]
        elif ep is not None and st.last_step is not None:
            step = st.last_step  # an epoch summary: at the last iteration seen
        else:
            continue
        kind = str(rec.get("_type", ""))
        evaluation = kind.startswith(("val", "test"))
        pairs = []
        for k, v in rec.items():
            if k in _JSON_STATS_SKIP or isinstance(v, bool) or k.startswith("dt") or k.endswith(("_time", "time_diff")):
                continue
            num = v if isinstance(v, (int, float)) else _num(v) if isinstance(v, str) else None
            if num is not None:
                pairs.append((k, float(num)))
        if not pairs:
            continue
        line = lines.at(m.start())
        for k, v in pairs:
            key = f"{kind}/{k}" if kind and kind != "train_iter" else k
            out.add(step, key, v, line)
            if evaluation and "loss" in k:
                out.metric_override[key] = "eval_loss" if k == "loss" else "eval_" + k
            elif kind.endswith("_epoch"):
                out.metric_override[key] = "train_" + k
            elif k == "lr":
                out.metric_override[key] = "learning_rate"
        if not evaluation and not kind.endswith("_epoch"):
            _mark(st, steps, used, m.start(), step, "detectron" if isinstance(it, int) else "pyslowfast")
        else:
            used.add(m.start())


class _LineMatch:
    """A match of a row pattern at a line start (the same interface as the parts of re.Match used here)."""

    __slots__ = ("_m", "_off")

    def __init__(self, m: re.Match[bytes], off: int) -> None:
        self._m, self._off = m, off

    def start(self) -> int:
        return self._m.start() + self._off

    def end(self) -> int:
        return self._m.end()

    def __getitem__(self, i: int) -> bytes:
        return self._m[i]

    @property
    def text(self) -> bytes:
        return self._m.string[self.start():self._m.end()]


_LINE_RX: dict[bytes, tuple[re.Pattern[bytes], re.Pattern[bytes]]] = {}


def line_matches(body: bytes, text: bytes, lead: bytes | None = None) -> list[_LineMatch]:
    """Matches of ``body`` anchored at line starts. The pattern is searched as ``\\n`` + body, so the
    scan jumps from newline to newline in C (a ``(?m)^`` pattern is tried at every byte: 30x slower
    on a tqdm-heavy log).

    ``lead``: a literal every match of ``body`` starts with, after blanks (``[ \\t]*``). The pattern is then
    tried only at the line breaks in front of its occurrences (found by a literal scan, and absent from
    most chunks) instead of at every one of a chunk's ~50k; a match holds no line break, so none starts
    inside another and the matches are the scan's own."""
    rx = _LINE_RX.get(body)
    if rx is None:
        rx = _LINE_RX[body] = (re.compile(body), re.compile(b"\n" + body))
    out = []
    first = rx[0].match(text)
    if first is not None:
        out.append(_LineMatch(first, 0))
    if lead is None:
        out.extend(_LineMatch(m, 1) for m in rx[1].finditer(text))
        return out
    starts = set()
    for q in literal_positions(text, (lead,)):
        ls = q
        while ls > 0 and text[ls - 1] in (32, 9):  # the blanks in front of it
            ls -= 1
        if ls > 0 and text[ls - 1] == 10:
            starts.add(ls - 1)
    out.extend(_LineMatch(m, 1) for m in finditer_at(rx[1], text, sorted(starts)))
    return out


# -- pipe tables (the HF notebook progress table, Markdown tables in issues) ---------------------

#: (an epoch cell may show the total: ultralytics' ``0/299``)
_PIPE_ROW_BODY = rb"[ \t]*\|?[ \t]*(\d+)(?:/\d+)?[ \t]*\|([^\n\r]{1,8000})(?=\r?\n|\r?\Z)"
#: table headers -> canonical metrics (HF's notebook table and its Markdown copies)
TABLE_KEYS = {"training loss": "loss", "validation loss": "eval_loss", "train loss": "loss", "val loss": "eval_loss",
              "learning rate": "learning_rate", "grad norm": "grad_norm"}


def _cells(line: bytes) -> list[str]:
    return [c.strip() for c in line.decode("utf-8", "replace").strip().strip("|").split("|")]


def parse_pipe_table(text: bytes, first_line: int, st: StepState, out: Collector,
                     steps: StepMarks, used: Used) -> None:
    """``Step | Training Loss | reward | kl`` then rows ``1 | -0.2836 | 13.43 | nan``; ``No Log`` cells are skipped."""
    if b"|" not in text:
        return
    lines = Lines(text, first_line)
    header: list[str] | None = None
    header_end = -1
    for m in line_matches(_PIPE_ROW_BODY, text):
        if used.covers(m.start(), m.end()):
            continue
        ls = m.start()
        # the header is the nearest line above with the same number of cells whose first cell is a step name
        if header is None or not _between_rows(text, header_end, ls):
            header = _find_header(text, ls)
            if header is None:
                continue
        cells = _cells(m.text)
        if len(cells) != len(header):
            continue
        step, line = int(m[1]), lines.at(m.start())
        n = 0
        for name, raw in zip(header[1:], cells[1:]):
            f = _num(raw)
            if f is None:
                continue
            key = name.replace(" / ", "/")
            out.add(step, key, f, line)
            canon = TABLE_KEYS.get(name.lower())
            if canon:
                out.metric_override[key] = canon
            n += 1
        if n:
            _mark(st, steps, used, m.start(), step)
            _hf_notebook_table(st, header)
        header_end = m.end()


def _hf_notebook_table(st: StepState, names: list[str]) -> None:
    """transformers' NotebookProgressCallback (and Unsloth's and TRL's copies) names its columns ``[Step|Epoch,
    "Training Loss", ("Validation Loss"), ...]``: its losses are the Trainer's logs (logging_nan_inf_filter included)."""
    if len(names) >= 2 and names[0].lower() in ("step", "epoch") and names[1].lower() in ("training loss", "training_loss"):
        st.frameworks.add("hf_trainer")


def _between_rows(text: bytes, prev_end: int, start: int) -> bool:
    """True when only table rows lie between the previous row and this one (same table)."""
    return prev_end >= 0 and text[prev_end:start].strip(b"\r\n") == b""


def _find_header(text: bytes, row_start: int) -> list[str] | None:
    pos = row_start - 1
    for _ in range(3):  # the header, maybe a Markdown "-- | --" separator, maybe a blank line
        if pos <= 0:
            return None
        ls = line_start(text, pos)
        cells = _cells(text[ls:pos])
        if len(cells) >= 2 and cells[0].lower() in _STEP_NAMES and any(c and not _num(c) for c in cells[1:]):
            return cells
        pos = ls - 1
    return None


# -- the Trainer's model card table ("Training results" in every README.md a Trainer pushes) --------------------------

#: transformers ``modelcard.make_markdown_table`` of ``parse_log_history``: one row per evaluation, ``Training Loss``
#: the last training log before it (``No log`` before the first), then ``Epoch``, ``Step``, ``Validation Loss`` and
#: the evaluation's other metrics camel-cased without their ``eval_`` (``Wer``, ``Accuracy``, ``Rewards/chosen``)
_CARD_HEAD = re.compile(rb"[ \t]*\|[ \t]*Training Loss[ \t]*\|[ \t]*Epoch[ \t]*\|[ \t]*Step[ \t]*\|([^\r\n]*)\|[ \t]*\r?(?:\n|\Z)")
_CARD_RULE = re.compile(rb"[ \t]*\|(?:[ \t]*:?-+:?[ \t]*\|)+[ \t]*\r?(?:\n|\Z)")
_CARD_ROW = re.compile(rb"[ \t]*\|([^\r\n]*)\|[ \t]*\r?(?:\n|\Z)")


def parse_model_card(text: bytes, first_line: int, st: StepState, out: Collector,
                     steps: StepMarks, used: Used) -> None:
    """Each row at its ``Step``: the validation loss as ``eval_loss``, the other metrics as ``eval_<name>``, the
    epoch, and the training loss where it is a new log (a row repeats the last one when the Trainer logged less often
    than it evaluated: a repeat is the same log, not a flat loss)."""
    if not has(text, b"Training Loss"):
        return
    lines = Lines(text, first_line)
    pos = text.find(b"Training Loss")
    while pos >= 0:
        head = _CARD_HEAD.match(text, line_start(text, pos))
        pos = text.find(b"Training Loss", pos + 1)
        if head is None:
            continue
        extra = [" ".join(c.split()) for c in head[1].decode("utf-8", "replace").split("|")]
        names = ["Training Loss", "Epoch", "Step", *extra]
        at = head.end()
        rule = _CARD_RULE.match(text, at)
        if rule is not None:
            at = rule.end()
        last_train: float | None = None
        while True:
            row = _CARD_ROW.match(text, at)
            if row is None:
                break
            cells = [c.strip() for c in row[1].decode("utf-8", "replace").split("|")]
            at = row.end()
            if len(cells) != len(names):
                break
            step = _num(cells[2])
            if step is None or step != step or step < 0 or step != int(step):
                break
            step_i, line = int(step), lines.at(row.start())
            train = _num(cells[0])  # "No log": none yet
            if train is not None and train != last_train:  # (a NaN is never equal: each one is kept)
                out.add(step_i, "loss", train, line)
            if train is not None:
                last_train = train
            epoch = _num(cells[1])
            if epoch is not None:
                out.add(step_i, "epoch", epoch, line)
            for name, raw in zip(names[3:], cells[3:]):
                value = _num(raw)
                if value is None or not name:
                    continue
                key = "eval_loss" if name == "Validation Loss" else "eval_" + name.lower().replace(" ", "_")
                out.add(step_i, key, value, line)
            _mark(st, steps, used, row.start(), step_i, "hf_trainer")
        used.add(head.start())


# -- "(Steps: N) key = value." (kan-bayashi's ParallelWaveGAN trainers and TensorFlowTTS' base_trainer) ---------

#: ``logging.info(f"(Step: {self.steps}) train_{name} = {value:.4f}.")``: one metric per line, with its step
_PAREN_STEP = re.compile(rb"\((?:Steps?|steps?): (\d{1,18})\) ([A-Za-z][\w/.-]{0,80}) = (" + NUM + rb")\.?[ \t]*\r?(?=\n|\Z)")


def parse_paren_steps(text: bytes, first_line: int, st: StepState, out: Collector,
                      steps: StepMarks, used: Used) -> None:
    if not has(text, b"(Step") and not has(text, b"(step"):
        return
    lines = Lines(text, first_line)
    for m in _PAREN_STEP.finditer(text):
        step = int(m[1])
        out.add(step, m[2].decode("utf-8", "replace"), float(m[3]), lines.at(m.start()))
        _mark(st, steps, used, m.start(), step)


# -- llama-recipes / llama-cookbook (train_utils.py) -------------------------------------------------------

#: the tqdm description of each step: ``Training Epoch: 1/3, step 10/100 completed (loss: tensor(1.23, device=...))``
#: (``loss.detach().float()`` is a tensor, so its repr is printed; forks print a plain float)
_LR_STEP = re.compile(rb"Training Epoch: (\d+)/\d+, step (\d+)/(\d+) completed \(loss: (?:tensor\()?(" + NUM + rb")")
#: ``evaluation()`` prints ``f" {eval_ppl=} {eval_epoch_loss=}"``: two tensors
_LR_EVAL = re.compile(rb"eval_ppl=(?:tensor\()?(" + NUM + rb")[^\r\n]{0,200}?eval_epoch_loss=(?:tensor\()?(" + NUM + rb")")
#: the end of each epoch: ``Epoch 1: train_perplexity=2.9854, train_epoch_loss=1.0937, epoch time 3146.01s``
_LR_EPOCH = re.compile(rb"Epoch \d+: train_perplexity=(" + NUM + rb"), train_epoch_loss=(" + NUM + rb")")
#: finetuning.py's summary, ``[print(f'Key: {k}, Value: {v}') for k, v in results.items()]``
_LR_KEY = re.compile(rb"Key: (avg_\w+), Value: (" + NUM + rb")")
_LR_SKIP = ("_time",)


def parse_llama_recipes(text: bytes, first_line: int, st: StepState, out: Collector,
                        steps: StepMarks, used: Used) -> None:
    """Step losses at ``(epoch - 1) * steps_per_epoch + step`` (step counts from 0); evaluations, epoch means and the
    final summary at the step in force when they are printed."""
    if not any(has(text, lit) for lit in (b"Training Epoch: ", b"eval_ppl=", b"Key: avg_", b"train_epoch_loss=")):
        return
    lines = Lines(text, first_line)
    found: list[tuple[int, int, bytes, bytes | None, int | None]] = []  # (pos, kind, a, b, step)
    for m in _LR_STEP.finditer(text):
        found.append((m.start(), 0, m[4], None, (int(m[1]) - 1) * int(m[3]) + int(m[2])))
    for rx, kind in ((_LR_EVAL, 1), (_LR_EPOCH, 2), (_LR_KEY, 3)):
        for m in rx.finditer(text):
            found.append((m.start(), kind, m[1], m[2], None))
    found.sort()
    last_marked = getattr(st, "llama_recipes_step", None)
    for pos, kind, a, b, step in found:
        if used.covers(line_start(text, pos), pos + 1):
            continue
        line = lines.at(pos)
        if kind == 0:
            if step != last_marked:  # tqdm redraws the same description: one point per step
                out.add(step, "loss", float(a), line)
                _mark(st, steps, used, pos, step, "llama_recipes")
                last_marked = step
            else:
                used.add(pos)  # a redraw, read: no other parser takes its (loss: ...) for a record of its own
            continue
        at = st.last_step if st.last_step is not None else 0
        if kind == 1:
            out.add(at, "eval_ppl", float(a), line)
            out.add(at, "eval_epoch_loss", float(b), line)
            out.metric_override["eval_epoch_loss"] = "eval_loss"
        elif kind == 2:
            out.add(at, "train_perplexity", float(a), line)
            out.add(at, "train_epoch_loss", float(b), line)
        elif not a.decode().endswith(_LR_SKIP):
            out.add(at, a.decode(), float(b), line)
        used.add(pos)
        st.frameworks.add("llama_recipes")
    st.llama_recipes_step = last_marked  # type: ignore[attr-defined]


# -- key/value tables (stable-baselines3, OpenAI baselines, stable-baselines) ----------------------

#: one dump of SB3's ``HumanOutputFormat`` / baselines' ``logger.dumpkvs``: a dashed rule, ``| key | value |`` rows
#: (SB3 groups keys under ``| rollout/ |  |`` section rows and indents them), a dashed rule
_KV_TABLE = re.compile(rb"-{8,}[ \t]*\r?\n((?:[ \t]*\|[^\r\n|]*\|[^\r\n|]*\|[ \t]*\r?\n){2,400})[ \t]*-{8,}")
_KV_ROW = re.compile(rb"[ \t]*\|([ \t]*)([^|\r\n]*?)[ \t]*\|[ \t]*([^|\r\n]*?)[ \t]*\|")
#: the x axis these loggers print (SB3 ``time/total_timesteps``, 0.x ``total timesteps``, baselines ``total_timesteps``
#: / ``timesteps``), then the update counters when no timestep count is printed (OpenAI improved-/guided-diffusion's
#: ``TrainLoop.log_step`` logs ``step`` and ``samples`` through the same logger)
_KV_STEP_KEYS = ("total_timesteps", "total timesteps", "timesteps", "timesteps_total", "iterations", "n_updates",
                 "nupdates", "serial_timesteps", "step")
#: bytes looked at for CRLF line ends before a chunk is scanned for the CRLF form of a table
CRLF_PROBE = 64 * 1024
#: spaces after the ``|`` of a row under a section (SB3 writes ``| `` then the key indented by three)
KV_INDENT = 3
#: the training signals of these tables under the names the detectors know
_KV_CANON = {"loss": "loss", "learning_rate": "learning_rate", "lr": "learning_rate", "ep_rew_mean": "reward",
             "eprewmean": "reward"}


def parse_kv_table(text: bytes, first_line: int, st: StepState, out: Collector,
                   steps: StepMarks, used: Used) -> None:
    """Each table is one record at the step its timestep counter gives (numbered on from the last step without one)."""
    if not has(text, b"-\n|") and not (text.find(b"\r\n", 0, CRLF_PROBE) >= 0 and has(text, b"-\r\n|")):
        return  # (the CRLF form only in a chunk whose lines end in CRLF: one scan, not two, per chunk)
    lines = Lines(text, first_line)
    for m in _KV_TABLE.finditer(text):
        section = b""
        pairs: list[tuple[str, float]] = []
        counters: dict[str, int] = {}
        for indent, key, raw in _KV_ROW.findall(m[1]):
            if not raw:  # ``| rollout/ |  |``: the section of the indented rows below it
                section = key if key.endswith(b"/") else b""
                continue
            name = section + key if section and len(indent) >= KV_INDENT else key  # SB3 indents a section's keys
            value = _num(raw)
            if value is None:
                continue
            bare = key.strip().decode("utf-8", "replace")
            if bare in _KV_STEP_KEYS and value == value and 0 <= value < 2 ** 62:
                counters[bare] = int(value)
            pairs.append((name.decode("utf-8", "replace"), value))
        if not any(_kv_signal(k) for k, _ in pairs):
            continue
        step = next((counters[k] for k in _KV_STEP_KEYS if k in counters), None)
        if step is None:
            step = (st.last_step or 0) + 1
            st.inferred = True
        line = lines.at(m.start())
        _add_pairs(out, step, line, pairs, canon_of=lambda k: _KV_CANON.get(k.rsplit("/", 1)[-1]))
        for pos in (m.start(), m.start(1), m.end() - 1):
            used.add(pos)
        _mark(st, steps, used, m.start(1), step, "stable_baselines")


def _kv_signal(key: str) -> bool:
    k = key.rsplit("/", 1)[-1].lower()
    return "loss" in k or "rew" in k or k in ("learning_rate", "approx_kl", "approxkl")


# -- bare numeric columns ------------------------------------------------------------------------

_COL_ROW_BODY = (rb"[ \t]*(\d+)(?:[ \t]*[,;|\t][ \t]*|[ \t]+)(" + NUM + rb")"
                 rb"((?:(?:[ \t]*[,;|\t][ \t]*|[ \t]+)" + NUM + rb")*)[ \t]*[,;|]?[ \t]*(?=\r?\n|\r?\Z)")
_COL_HEAD = re.compile(rb"(?m)^[ \t#]*([A-Za-z_][\w/.-]*(?:[ \t]*[,;|\t][ \t]*|[ \t]+)[A-Za-z_][\w/.-]*"
                       rb"(?:(?:[ \t]*[,;|\t][ \t]*|[ \t]+)[A-Za-z_][\w/.-]*)*)[ \t]*[,;|]?[ \t]*\r?$")
_SPLIT = re.compile(rb"[ \t]*[,;|\t][ \t]*|[ \t]+")
#: consecutive numeric rows needed before a run is read as a table (fewer is prose with numbers)
MIN_COLUMN_ROWS = 3
#: ... or under a header naming the columns (``step loss grad_norm``)
MIN_HEADED_ROWS = 2
#: a row elided by whoever pasted the table (``...``, ``…``, ``⋮``) does not end it
_ELISION = re.compile(rb"(?m)^[ \t]*(?:\.{3,}|\xe2\x80\xa6|\xe2\x8b\xae)[ \t]*\r?\n")
_STEP_NAMES = {"step", "steps", "global_step", "iter", "iteration", "iters", "epoch", "update", "updates",
               "num_updates", "it", "#", "e"}
#: step columns finer than an epoch column beside them
_FINE_STEP_NAMES = {"step", "steps", "global_step", "iter", "iteration", "iters", "update", "updates", "num_updates",
                    "#"}
_DELIMS = re.compile(rb"[,;|]")
_TOKEN = re.compile(rb"[^ \t\r\n]+")
#: a rule line under a table header: dash groups (``------  ------------  --------``), maybe joined by ``+``/``|``
_RULE = re.compile(rb"[ \t]*-{1,}(?:[ \t+|]+-{1,})*[ \t]*\r?")
_DASHES = re.compile(rb"-+")


def _row_cells(text: bytes, m: re.Match[bytes], names: list[str], starts: list[int] | None) -> dict[str, bytes]:
    """A row's cells by column name: in order, or (fixed-width table) each value under the header column whose
    offset is the last at or before the value's own (a blank cell takes no value)."""
    if starts is None:
        vals = [m[1], m[2]] + [v for v in _SPLIT.split(m[3].strip(b" \t,;|")) if v]
        return dict(zip(names, vals))
    ls = m.start()
    cells: dict[str, bytes] = {}
    for t in _TOKEN.finditer(text, ls, m.end()):
        off = t.start() - ls
        i = max((k for k, c in enumerate(starts) if c <= off + 1), default=0)
        cells.setdefault(names[i], t[0])
    return cells


#: a header's two-word column names (``train loss``, ``valid acc``): a split word and a metric word after it
_SPLIT_LEADS = {"train", "training", "trn", "valid", "validation", "val", "dev", "test", "eval"}
_SPLIT_TAILS = {"loss", "acc", "accuracy", "error", "err", "ppl", "perplexity", "f1", "auc", "map", "iou", "wer", "cer",
                "bleu", "score"}


def _joined_names(names: list[str]) -> list[str]:
    """Header cells with each ``<split> <metric>`` pair of words joined by ``_`` (``train_loss``)."""
    out: list[str] = []
    i = 0
    while i < len(names):
        if i + 1 < len(names) and names[i].lower() in _SPLIT_LEADS and names[i + 1].lower() in _SPLIT_TAILS:
            out.append(f"{names[i]}_{names[i + 1]}")
            i += 2
        else:
            out.append(names[i])
            i += 1
    return out


def _aligned(text: bytes, m: re.Match[bytes], offsets: list[int]) -> bool:
    """Every value of a fixed-width row starts under a header cell (within a column of it): else the header's
    words do not name the row's columns."""
    ls = m.start()
    return all(any(abs(t.start() - ls - c) <= 1 for c in offsets) for t in _TOKEN.finditer(text, ls, m.end()))


#: a comma-separated row whose counter is named in a cell before it and whose values are not: PointNetLK's logger
#: ("INFO:PointNetLK-Revisited, 2022-03-10 16:44:36,515, epoch, 0001, 0.170037, 0.054935, 0.001698, 0.001877", from
#: LOGGER.info('epoch, %04d, %f, %f, %f, %f', ...)); read like a headerless table, its values as "column 2"...
_CSV_COUNTERS = (b"epoch, ", b"step, ", b"iter, ", b"iteration, ")
_CSV_ROW = re.compile(rb"(?:^|, )(?:epoch|step|iter|iteration), (\d+)((?:, " + NUM + rb"){2,})[ \t]*\r?$")
#: ... and the space-separated form opening a line, the counter with its colon (DeepCTR's example loop "batch: 387 nan
#: 0.6595617 0.72703314"); "\n"-led so the engine skips to line starts
_SPACE_BODY = (rb"[ \t]*(?:[Ee]poch|[Ss]tep|[Ii]ter|[Ii]teration|[Bb]atch):[ \t]+(\d+)((?:[ \t]+" + NUM
               + rb"){2,})[ \t]*\r?(?=\n|\Z)")
_SPACE_ROW = re.compile(rb"\n" + _SPACE_BODY)
_SPACE_FIRST = re.compile(_SPACE_BODY)


def _counter_rows(text: bytes) -> list[tuple[int, int, list[bytes]]]:
    """(line start, count, value cells) of the chunk's counter rows, in order."""
    rows: list[tuple[int, int, list[bytes]]] = []
    present = [lit for lit in _CSV_COUNTERS if has(text, lit)]
    if present:
        seen: set[int] = set()
        for lit in present:
            at = text.find(lit)
            while at >= 0:
                ls = line_start(text, at)
                if ls not in seen:
                    seen.add(ls)
                    m = _CSV_ROW.search(text, ls, line_end(text, at))
                    if m is not None:
                        rows.append((ls, int(m[1]), m[2].split(b", ")[1:]))
                at = text.find(lit, at + len(lit))
    if any(has(text, w) for w in (b"poch: ", b"tep: ", b"ter: ", b"tion: ", b"atch: ")):
        first = _SPACE_FIRST.match(text)
        found = ([first] if first is not None else []) + list(_SPACE_ROW.finditer(text))
        rows += [(m.start() + (m is not first), int(m[1]), m[2].split()) for m in found]
    return sorted(rows)


def parse_counter_csv(text: bytes, first_line: int, st: StepState, out: Collector,
                      steps: StepMarks, used: Used) -> None:
    """Rows of ``<counter word>, N, v, v, ...`` or ``<counter word>: N v v ...`` (three or more, the counter rising): the
    values at step N, unnamed. Only in a chunk no other parser read a record from: unnamed values are the last
    resort, and a chunk of known formats is not searched for them."""
    if steps:
        return
    rows = [r for r in _counter_rows(text) if not used.covers(r[0], line_end(text, r[0]))]
    if len(rows) < MIN_COLUMN_ROWS or not _rising([step for _, step, _ in rows]):
        return
    lines = Lines(text, first_line)
    for ls, step, cells in rows:
        line = lines.at(ls)
        for i, raw in enumerate(cells, start=2):
            value = _num(raw.strip())
            if value is not None:
                out.add(step, unnamed_column(i), value, line)
        _mark(st, steps, used, ls, step)


def _rising(counts: list[int]) -> bool:
    """A headerless run's counter counts up, row by row: a step, not an epoch repeated over its rows."""
    return all(b > a for a, b in zip(counts, counts[1:]))


def parse_columns(text: bytes, first_line: int, st: StepState, out: Collector,
                  steps: StepMarks, used: Used) -> None:
    """Runs of ``step value [value...]`` rows (a pasted ``step loss`` listing, a code fence).

    The header line just above a run names the columns (``step loss lr``); without one, a two-column
    run is ``step loss``. Rows already claimed by another parser are left alone.
    """
    lines = Lines(text, first_line)
    run: list[re.Match[bytes]] = []

    def flush() -> None:
        if not run:
            return
        start = run[0].start()
        ncols = 2 + len([v for v in _SPLIT.split(run[0][3].strip(b" \t,;|")) if v])
        names: list[str] | None = None
        starts: list[int] | None = None  # the header's column offsets, for a fixed-width table with blank cells
        prev_end = start - 1
        if prev_end > 0 and _RULE.fullmatch(text, line_start(text, prev_end), prev_end) is not None:
            # tabulate's "simple" and wasabi tables (spaCy): a dashed rule between header and rows; its dash groups
            # are the columns, so a header cell may hold a space ("LOSS TOK2VEC")
            rs = line_start(text, prev_end)
            spans = [(g.start() - rs, g.end() - rs) for g in _DASHES.finditer(text, rs, prev_end)]
            hs = line_start(text, rs - 1) if rs > 0 else -1
            head = text[hs:rs - 1].rstrip(b"\r") if hs >= 0 else b""
            cells = [head[a:b].strip().replace(b" ", b"_").decode("utf-8", "replace") for a, b in spans]
            if head.strip() and all(cells) and len(cells) >= ncols:
                names = cells
                starts = None if len(cells) == ncols else [a for a, _ in spans]
            prev_end = -1
        if prev_end > 0 and text[line_start(text, prev_end):prev_end].strip() == b"" and prev_end > 1:
            prev_end = line_start(text, prev_end) - 1  # one blank line between header and rows (a rendered paste)
        hm = None
        if prev_end > 0:
            ls = line_start(text, prev_end)
            hm = _COL_HEAD.match(text, ls, prev_end)
            if hm is not None:
                cand = [c.decode() for c in _SPLIT.split(hm[1].strip()) if c]
                if len(cand) == ncols:
                    names = cand
                elif len(joined := _joined_names(cand)) == ncols:
                    names = joined  # "epoch train loss valid loss accuracy" (a rendered table pasted as text)
                elif len(cand) > ncols and b"\t" not in hm[1] and not _DELIMS.search(hm[1]):
                    # chainer's PrintReport (ESPnet1): fixed-width columns, a cell left blank where no value was
                    # reported this time (validation columns): values sit at their header's offset
                    offsets = [t.start() - ls for t in _TOKEN.finditer(text, ls, prev_end)]
                    if all(_aligned(text, m, offsets) for m in run):
                        names, starts = cand, offsets
        if names is None:
            if len(run) < MIN_COLUMN_ROWS or (ncols > 2 and (hm is not None or not _rising([int(m[1]) for m in run]))):
                run.clear()
                return  # more columns under a header whose words do not map to them: not guessed
            # a headerless run: two columns are "step loss"; more keep their places ("column 2"...), which NUM001
            # reads when nothing else names a loss (a value that was finite and went NaN, T2T-ViT's summary.csv)
            names = ["step", "loss"] if ncols == 2 else ["step"] + [unnamed_column(i) for i in range(2, ncols + 1)]
        elif len(run) < MIN_HEADED_ROWS and not any(is_loss_like(n) for n in names[1:]):
            run.clear()
            return  # one row under a header needs a loss column (fastai's "epoch train_loss valid_loss ..." at epoch 0)
        lows = [n.lower().lstrip("#") or "#" for n in names]
        if lows[0] not in _STEP_NAMES:
            run.clear()
            return
        # "epoch iteration main/loss ...": the finer counter is the step
        at = next((i for i, n in enumerate(lows) if n in _FINE_STEP_NAMES), 0)
        rows = [_row_cells(text, m, names, starts) for m in run]
        steps_seen = [_num(r.get(names[at], b"")) for r in rows]
        if any(v is None or v != int(v) for v in steps_seen) or any(
                b < a for a, b in zip(steps_seen, steps_seen[1:])):  # type: ignore[operator]
            run.clear()
            return  # not a step column
        _hf_notebook_table(st, names)
        for m, cells, step in zip(run, rows, steps_seen):
            line = lines.at(m.start())
            for i, name in enumerate(names):
                if i == at or (at != 0 and i == 0):
                    continue  # the step column, and the epoch column beside a finer one
                f = _num(cells.get(name, b""))
                if f is not None:
                    out.add(int(step), name, f, line)  # type: ignore[arg-type]
            _mark(st, steps, used, m.start(), int(step))  # type: ignore[arg-type]
        run.clear()

    last_end = -2
    for m in line_matches(_COL_ROW_BODY, text):
        if used.covers(m.start(), m.end()):
            continue
        gap = _ELISION.sub(b"", text[last_end:m.start()]) if last_end >= 0 else b""
        if run and (gap.strip(b"\r\n") != b"" or gap.count(b"\n") > 1 or last_end < 0):
            flush()
        run.append(m)
        last_end = m.end()
    flush()


#: a step word, its count and one unnamed value per line (``iter 1: 1.764603``, ``step 100: 2.31``): a ``step loss``
#: listing a user printed by hand, read like a headerless two-column run (MIN_COLUMN_ROWS consecutive lines at rising
#: steps; fewer is prose)
_STEP_VALUE_ROW = (rb"[ \t]*(?:[Ss]tep|STEP|[Ii]ter|ITER|[Ii]teration|[Ee]poch|EPOCH)[ \t]*(\d+)[ \t]*:[ \t]*(" + NUM
                   + rb")[ \t]*(?=\r?\n|\r?\Z)")


def parse_step_value_rows(text: bytes, first_line: int, st: StepState, out: Collector,
                          steps: StepMarks, used: Used) -> None:
    if steps:
        return  # a hand-printed listing is a log of its own: a chunk whose steps another format gave holds none
    lines = Lines(text, first_line)
    run: list[re.Match[bytes]] = []

    def flush() -> None:
        got = [int(m[1]) for m in run]
        if len(run) >= MIN_COLUMN_ROWS and all(b > a for a, b in zip(got, got[1:])):
            for m, step in zip(run, got):
                out.add(step, "loss", float(m[2]), lines.at(m.start()))
                _mark(st, steps, used, m.start(), step)
        run.clear()

    last_end = -2
    for m in line_matches(_STEP_VALUE_ROW, text):
        if used.covers(m.start(), m.end()):
            continue
        if run and (text[last_end:m.start()].strip(b"\r\n") != b"" or text.count(b"\n", last_end, m.start()) > 1):
            flush()
        run.append(m)
        last_end = m.end()
    flush()


# -- epoch-local batch counters ----------------------------------------------------------------------

def epoch_step(st: StepState, fmt: str, epoch: int, local: int) -> int:
    """A global step for a format that numbers batches within each epoch (ESPnet2 ``2epoch:train:1-375batch``,
    MXNet ``Epoch[3] Batch [200]``): the counter plus the batches of the epochs printed before it (each
    epoch's last counter seen; one more once the counter was seen at 0). An epoch number that goes back is a rerun:
    counting starts again."""
    cur = st.epoch_base.get(fmt)  # [epoch, base, highest counter in it, counts from 0 (0/1)]
    if cur is None or epoch < cur[0]:
        cur = [epoch, 0, 0, 0]
    elif epoch > cur[0]:
        cur = [epoch, cur[1] + cur[2] + cur[3], 0, cur[3]]  # a 0-based counter's epoch holds highest + 1 batches
    cur[2] = max(cur[2], local)
    cur[3] = cur[3] or int(local == 0)
    st.epoch_base[fmt] = cur
    return cur[1] + local


def epoch_end_step(st: StepState, fmt: str, epoch: int) -> int:
    """The step of an epoch's summary line (``Epoch[3] Validation-accuracy``, ESPnet's ``3epoch results``): that epoch's
    last batch seen, else the step in force, else the epoch number itself."""
    cur = st.epoch_base.get(fmt)
    if cur is not None and cur[0] == epoch:
        return cur[1] + cur[2]
    return st.last_step if st.last_step is not None else epoch


def _in_order(a: re.Pattern[bytes], b: re.Pattern[bytes], text: bytes) -> list[re.Match[bytes]]:
    """The matches of two patterns in file order (per-batch rows and the epoch summaries between them)."""
    return sorted([*a.finditer(text), *b.finditer(text)], key=lambda m: m.start())


# -- OpenNMT-py ----------------------------------------------------------------------------------------

#: ``onmt/utils/statistics.py`` ``Statistics.output``: ``Step %s; acc: %6.2f; ppl: %5.2f; xent: %4.2f; lr: %7.5f;
#: %3.0f/%3.0f tok/s; %6.0f sec`` with ``step_fmt = "%2d" % step`` and ``"%s/%5d"`` when train_steps is set;
#: before 0.4 (``onmt/Trainer.py``): ``Epoch %2d, %5d/%5d; acc: ...; ppl: ...; xent: ...; %3.0f src tok/s; ...``
_ONMT = re.compile(rb"(?:\bStep +(\d+)(?:/ *\d+)?|\bEpoch +(\d+), *(\d+)/ *(\d+)); (acc: [^\r\n]{0,400})")
_ONMT_PAIR = re.compile(rb"\b(acc|ppl|xent|aux|lr): *(" + NUM + rb")(?=;|\s|$)")
#: ``Validation perplexity: %g`` / ``Validation accuracy: %g`` (and ``Train ...``) after each validation
_ONMT_VALID = re.compile(rb"\b(Validation|Train) (perplexity|accuracy|xent): (" + NUM + rb")")
ONMT_KEYS = {"xent": "loss", "ppl": "ppl", "acc": "accuracy", "lr": "learning_rate"}
#: the Lua OpenNMT (``onmt/train/EpochState.lua`` ``EpochState:log``): ``Epoch %d ; Iteration %d/%d ; Learning rate %.4f ;
#: Source tokens/s %d ; Perplexity %.2f`` (the perplexity of the batches since the last report); the iteration restarts
#: every epoch, out of the epoch's %d
_ONMT_LUA = re.compile(rb"\bEpoch +(\d+) ; Iteration +(\d+)/(\d+) ; Learning rate (" + NUM + rb") ;[^\r\n;]{0,80}; "
                       rb"Perplexity (" + NUM + rb")")
_ONMT_VALID_KEYS = {b"perplexity": "ppl", b"accuracy": "accuracy", b"xent": "loss"}


def parse_opennmt(text: bytes, first_line: int, st: StepState, out: Collector,
                  steps: StepMarks, used: Used) -> None:
    """``xent`` is the per-token cross-entropy (the loss); ``ppl`` its exponential, capped at exp(100)."""
    if not has(text, b"acc: ") and not has(text, b"Validation ") and not has(text, b"; Perplexity "):
        return
    lines = Lines(text, first_line)
    if has(text, b"; Perplexity "):
        for m in _ONMT_LUA.finditer(text):
            step = (int(m[1]) - 1) * int(m[3]) + int(m[2]) if int(m[1]) >= 1 else int(m[2])
            _add_pairs(out, step, lines.at(m.start()), [("ppl", m[5]), ("lr", m[4])], ONMT_KEYS)
            _mark(st, steps, used, m.start(), step, "opennmt")
    for m in _ONMT.finditer(text):
        pairs = _ONMT_PAIR.findall(m[5])
        if not any(k in (b"ppl", b"xent") for k, _ in pairs):
            continue
        step = int(m[1]) if m[1] is not None else (int(m[2]) - 1) * int(m[4]) + int(m[3])
        _add_pairs(out, step, lines.at(m.start()), pairs, ONMT_KEYS)
        _mark(st, steps, used, m.start(), step, "opennmt")
    if st.last_step is None or "opennmt" not in st.frameworks:
        return
    for m in _ONMT_VALID.finditer(text):
        kind, name = m[1].decode(), _ONMT_VALID_KEYS[m[2]]
        key = f"{kind.lower()}_{m[2].decode()}"
        out.add(st.last_step, key, float(m[3]), lines.at(m.start()))
        out.metric_override[key] = ("eval_" if kind == "Validation" else "train_") + name
        used.add(m.start())


# -- darknet (pjreddie, AlexeyAB) -------------------------------------------------------------------------

#: ``detector.c`` ``train_detector``: ``%ld: %f, %f avg, %f rate, %lf seconds, %d images`` (pjreddie) and
#: ``\n %d: %f, %f avg loss, %f rate, %lf seconds, %d images, %f hours left`` (AlexeyAB); printf prints NaN as
#: ``nan`` or ``-nan``
_DARKNET = re.compile(rb"(?m)^[ \t]*(\d+): (" + NUM + rb"), (" + NUM + rb") avg(?: loss)?, (" + NUM
                      + rb") rate, " + NUM + rb" seconds, \d+ images")


def parse_darknet(text: bytes, first_line: int, st: StepState, out: Collector,
                  steps: StepMarks, used: Used) -> None:
    """The batch's loss, its running average (``avg_loss = 0.9 avg_loss + 0.1 loss``) and the LR, per iteration."""
    if not has(text, b" rate, "):
        return
    lines = Lines(text, first_line)
    for m in _DARKNET.finditer(text):
        step = int(m[1])
        _add_pairs(out, step, lines.at(m.start()), [("loss", m[2]), ("avg_loss", m[3]), ("rate", m[4])],
                   {"rate": "learning_rate"})
        _mark(st, steps, used, m.start(), step, "darknet")


#: a YOLO layer's statistics of one iteration (pjreddie ``Region 82 Avg IOU: ..., count: 9``; AlexeyAB ``v3 (mse loss,
#: Normalizer: ...) Region 82 Avg (IOU: ..., GIOU: ...), ..., count: 9, class_loss = ..., iou_loss = ...``), printed for
#: every yolo layer before the iteration's line: not a step, and ``-nan`` there is a layer that saw no object (count: 0)
_DARKNET_REGION = re.compile(rb"(?m)^[^\r\n]{0,160}\bRegion \d+ Avg[ (:]")


def parse_darknet_regions(text: bytes, first_line: int, st: StepState, out: Collector,
                          steps: StepMarks, used: Used) -> None:
    """Claims the per-layer lines so no other parser reads them as steps (their numbers are not the run's loss)."""
    if not has(text, b"Region ") or not has(text, b" Avg"):
        return
    for m in _DARKNET_REGION.finditer(text):
        used.add(m.start())


# -- openseg.pytorch / torchcv ---------------------------------------------------------------------------

#: the trainers of openseg.pytorch, torchcv and their forks (ContrastiveSeg, HRNet-OCR, ...) report every
#: ``display_iter`` iterations in one two-line message: ``Train Epoch: 0\tTrain Iteration: 30\tTime ...`` then
#: ``Learning rate = [0.00099, 0.0099]\tLoss = 0.71 (ave = 0.73)``. ``Loss`` is the last iteration's, ``ave`` the mean
#: since the last report; the LR is one value or a list, one per parameter group (the first is kept)
_OPENSEG = re.compile(rb"Train Iteration: (\d+)[^\r\n]{0,2000}\r?\n[ \t]*(Learning rate = \[?[ \t]*(" + NUM
                      + rb")[^\t\r\n]{0,2000}?[ \t]+)?Loss = (" + NUM + rb") \(ave = (" + NUM + rb")\)")


def parse_openseg(text: bytes, first_line: int, st: StepState, out: Collector,
                  steps: StepMarks, used: Used) -> None:
    if not has(text, b"Train Iteration: "):
        return
    lines = Lines(text, first_line)
    for m in _OPENSEG.finditer(text):
        step = int(m[1])
        pairs = [("loss", m[4]), ("loss_ave", m[5])] + ([("lr", m[3])] if m[3] is not None else [])
        _add_pairs(out, step, lines.at(m.start(4)), pairs, {"lr": "learning_rate"})
        _mark(st, steps, used, m.start(), step, "openseg")
        used.add(m.start(2) if m[2] is not None else m.start(4))


# -- VITS-family trainers (RVC, so-vits-svc, Bert-VITS2, GPT-SoVITS) ----------------------------------------

#: ``train.py`` every ``log_interval`` steps: ``Train Epoch: 478 [92%]``, then ``[global_step, lr]`` (a logged list),
#: then one or two lines of ``loss_disc=3.598, loss_gen=3.174, loss_fm=8.765,loss_mel=19.367, loss_kl=1.520`` (the
#: mel and kl terms are clamped to 75 and 9 before they are printed)
_VITS = re.compile(rb"Train Epoch: \d+ \[\d+%\][^\r\n]{0,200}\r?\n[^\r\n\[]{0,200}\[(\d+), (" + NUM
                   + rb")\][ \t]*\r?\n((?:[^\r\n]{0,200}?\bloss_\w{1,30}=" + NUM + rb"[^\r\n]{0,400}(?:\r?\n|\Z)){1,2})")
_VITS_PAIR = re.compile(rb"\b(loss_\w{1,30})=(" + NUM + rb")")


def parse_vits(text: bytes, first_line: int, st: StepState, out: Collector,
               steps: StepMarks, used: Used) -> None:
    if not has(text, b"loss_gen=") or not has(text, b"Train Epoch: "):  # (every VITS-family report has its GAN terms)
        return
    lines = Lines(text, first_line)
    for m in _VITS.finditer(text):
        step = int(m[1])
        _add_pairs(out, step, lines.at(m.start(3)), _VITS_PAIR.findall(m[3]))
        _add_pairs(out, step, lines.at(m.start(1)), [("lr", m[2])], {"lr": "learning_rate"})
        _mark(st, steps, used, m.start(), step, "vits")
        used.add(m.start(1))
        used.add(m.start(3))


# -- CleanRL (and the many single-file RL scripts copied from it) -------------------------------------------------

#: ``print(f"global_step={global_step}, episodic_return={info['episode']['r']}")`` once per finished episode: the return
#: is a float, or a one-element array (``episodic_return=[13.]``) where the episode info holds arrays
_CLEANRL = re.compile(rb"global_step=(\d{1,15}),[ \t]+episodic_return=\[?[ \t]*(" + NUM + rb")[ \t]*\]?")


def parse_cleanrl(text: bytes, first_line: int, st: StepState, out: Collector,
                  steps: StepMarks, used: Used) -> None:
    if not has(text, b"episodic_return="):
        return
    lines = Lines(text, first_line)
    for m in _CLEANRL.finditer(text):
        step = int(m[1])
        out.add(step, "episodic_return", float(m[2]), lines.at(m.start()))
        _mark(st, steps, used, m.start(), step, "cleanrl")


# -- InsightFace arcface_torch (and its forks) --------------------------------------------------------------------

#: utils_logging.CallBackLogging: ``Speed 2178.40 samples/sec   Loss nan   LearningRate 0.001000   Epoch: 0   Global
#: Step: 20   Fp16 Grad Scale:  0   Required: 194 hours`` (forks reorder the fields, print ``LR: x``, or several losses)
_INSIGHT = re.compile(rb"Speed [^\r\n]{0,400}?Global Step: (\d{1,15})[^\r\n]{0,400}")
_INSIGHT_PAIRS = re.compile(rb"(?<![\w/.-])(Loss|LearningRate|LR:|Fp16 Grad Scale:)[ \t]+(" + NUM + rb")(?![\w.])")
_INSIGHT_CANON = {"Loss": "loss", "LearningRate": "learning_rate", "LR": "learning_rate", "Fp16 Grad Scale": "loss_scale"}


def parse_insightface(text: bytes, first_line: int, st: StepState, out: Collector,
                      steps: StepMarks, used: Used) -> None:
    """The scale is the GradScaler's ``get_scale()`` printed ``%2.f``: 0 is a scale below 0.5, a collapsed one."""
    if not has(text, b"Global Step: "):
        return
    lines = Lines(text, first_line)
    for m in _INSIGHT.finditer(text):
        pairs = [(k.decode().rstrip(":"), v) for k, v in _INSIGHT_PAIRS.findall(m[0])]
        if not any(k == "Loss" for k, _ in pairs):
            continue
        step = int(m[1])
        _add_pairs(out, step, lines.at(m.start()), pairs, _INSIGHT_CANON)
        _mark(st, steps, used, m.start(), step, "insightface")


# -- YOLACT / yolact_edge -----------------------------------------------------------------------------------

#: ``train.py``: ``('[%3d] %7d ||' + (' %s: %.3f |' * len(loss_labels)) + ' T: %.3f || ETA: %s || timer: %.3f')``:
#: epoch, iteration, one letter per loss term, T the total
_YOLACT = re.compile(rb"(?m)^[ \t]*\[\s*(\d+)\]\s+(\d+) \|\|((?: [A-Z]: " + NUM + rb" \|)+) T: (" + NUM + rb") \|\|")
_YOLACT_PAIR = re.compile(rb" ([A-Z]): (" + NUM + rb") \|")
#: train.py's loss_types: B box localization, C class confidence, M mask, P prototype, D coefficient diversity,
#: E class existence, S semantic segmentation, I mask IoU
_YOLACT_KEYS = {b"B": "loss_box", b"C": "loss_conf", b"M": "loss_mask", b"P": "loss_proto", b"D": "loss_coef_div",
                b"E": "loss_class_existence", b"S": "loss_semantic_seg", b"I": "loss_mask_iou"}


def parse_yolact(text: bytes, first_line: int, st: StepState, out: Collector,
                 steps: StepMarks, used: Used) -> None:
    if not has(text, b" || ETA: ") or not has(text, b" T: "):
        return
    lines = Lines(text, first_line)
    for m in _YOLACT.finditer(text):
        step = int(m[2])
        pairs = [(_YOLACT_KEYS.get(k, k.decode()), v) for k, v in _YOLACT_PAIR.findall(m[3])] + [("T", m[4])]
        _add_pairs(out, step, lines.at(m.start()), pairs, {"T": "loss"})
        _mark(st, steps, used, m.start(), step, "yolact")


# -- nnDetection ---------------------------------------------------------------------------------------------

#: ``nndet/ptmodule/*/base.py``, once per epoch through loguru: ``Train loss reached: 0.00359`` (training_epoch_end) and
#: ``Val loss reached: 0.00189`` (validation_epoch_end); no epoch number: they are counted (the loss is -GIoU-based, so
#: it goes below 0 by design)
_NNDET = re.compile(rb"\b(Train|Val) loss reached: (" + NUM + rb")")


def parse_nndet(text: bytes, first_line: int, st: StepState, out: Collector,
                steps: StepMarks, used: Used) -> None:
    if not has(text, b" loss reached: "):
        return
    lines = Lines(text, first_line)
    for m in _NNDET.finditer(text):
        if m[1] == b"Train":
            step = st.nndet_epoch = getattr(st, "nndet_epoch", -1) + 1  # type: ignore[attr-defined]
            _add_pairs(out, step, lines.at(m.start()), [("train_loss", m[2])], {"train_loss": "loss"})
            _mark(st, steps, used, m.start(), step, "nndetection")
        else:
            step = getattr(st, "nndet_epoch", 0)  # the epoch of the last Train line
            _add_pairs(out, step, lines.at(m.start()), [("val_loss", m[2])], {"val_loss": "eval_loss"})
            used.add(m.start())


# -- Kaldi nnet3 / EESEN ----------------------------------------------------------------------------------

#: Kaldi ``nnet-training.cc`` ``PrintStatsForThisPhase``: ``Average objective function for 'output' for minibatches
#: 0-9 is -2.33515 over 1280 frames.`` (chain models: ``is -0.57137 + -0.00545086 = -0.576821 over``); the value is a
#: log-probability per frame, maximised, so the loss is its negation. iostream prints NaN as ``nan`` or ``-nan``.
_KALDI_PHASE = re.compile(rb"Average objective function for '([\w.-]{1,60})' for minibatches (\d+)-(\d+) is (?:"
                          + NUM + rb" \+ " + NUM + rb" = )?(" + NUM + rb") over")
#: EESEN ``ctc-loss.cc``: ``After %d sequences (%fHr): Obj(log[Pzx]) = %f   TokenAcc = %f%`` (VLOG 1) and
#: ``Progress %d sequences (%fHr): Obj(log[Pzx]) = %f Obj(frame) = %f TokenAcc = %f %``; Obj is log P(z|x) per
#: sequence, maximised: the loss is its negation
_EESEN = re.compile(rb"(?:After|Progress) (\d+) sequences \(" + NUM + rb" ?Hr\): Obj\(log\[Pzx\]\) = (" + NUM
                    + rb")(?:[ \t]+Obj\(frame\) = " + NUM + rb")?(?:[ \t]+TokenAcc = (" + NUM + rb") ?%)?")


def _neg(raw: bytes) -> float | None:
    v = _num(raw)
    return None if v is None else -v


def parse_kaldi(text: bytes, first_line: int, st: StepState, out: Collector,
                steps: StepMarks, used: Used) -> None:
    """Kaldi nnet3 per-phase objectives (the step is the phase's last minibatch) and EESEN's CTC progress lines (the
    step is the count of sequences seen); each objective is kept negated as the loss, under a key saying so."""
    lines = Lines(text, first_line)
    if has(text, b"objective function for '"):
        for m in _KALDI_PHASE.finditer(text):
            v = _neg(m[4])
            if v is None:
                continue
            name = m[1].decode()
            key = f"-objective[{name}]"
            step = int(m[3])
            out.add(step, key, v, lines.at(m.start()))
            out.metric_override[key] = "loss" if name == "output" else f"loss_{name}"
            _mark(st, steps, used, m.start(), step, "kaldi")
    if has(text, b"Obj(log[Pzx]) = "):
        for m in _EESEN.finditer(text):
            v = _neg(m[2])
            if v is None:
                continue
            step, line = int(m[1]), lines.at(m.start())
            out.add(step, "-Obj(log[Pzx])", v, line)
            out.metric_override["-Obj(log[Pzx])"] = "loss"
            if m[3] is not None:
                out.add(step, "TokenAcc", float(m[3]), line)
            _mark(st, steps, used, m.start(), step, "eesen")


# -- MXNet Speedometer / fit ------------------------------------------------------------------------------

#: ``mxnet/callback.py`` ``Speedometer``: ``Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec`` then ``\t%s=%f``
#: per metric (before 1.3: ``Batch [%d]`` and ``Train-<metric>``; gluon scripts join with ``, ``)
_MX_BATCH = re.compile(rb"\bEpoch\[(\d+)\] Batch \[(?:\d+-)?(\d+)\][ \t,]+Speed: " + NUM + rb" samples/sec"
                       rb"([^\r\n]{0,2000})")
_MX_PAIR = re.compile(rb"([A-Za-z][\w\-@.]{0,60})=(" + NUM + rb")(?![\w.])")
#: ``base_module.fit``: ``Epoch[%d] Train-%s=%f``, ``Epoch[%d] Validation-%s=%f`` once per epoch
_MX_EPOCH = re.compile(rb"\bEpoch\[(\d+)\] (Train|Validation)-([A-Za-z][\w\-@.]{0,60})=(" + NUM + rb")")
#: MXNet's metric names for a loss (``mx.metric.CrossEntropy`` is ``cross-entropy``, gluon's ``ce``; ``Loss``, ``nll-loss``)
_MX_LOSS = {"cross-entropy", "crossentropy", "ce", "nll-loss", "nll_loss", "loss"}


def _mx_name(raw: bytes) -> str:
    name = raw.decode()
    return name[6:] if name.startswith("Train-") else name


def parse_mxnet(text: bytes, first_line: int, st: StepState, out: Collector,
                steps: StepMarks, used: Used) -> None:
    """Per-batch metrics at ``epoch_step`` (the Batch counter restarts every epoch); a loss-named metric is the loss."""
    if not has(text, b"samples/sec") and not has(text, b"Validation-"):
        return
    lines = Lines(text, first_line)
    for m in _in_order(_MX_BATCH, _MX_EPOCH, text):
        if m.re is _MX_BATCH:
            pairs = [(_mx_name(k), v) for k, v in _MX_PAIR.findall(m[3])]
            if pairs:
                step = epoch_step(st, "mxnet", int(m[1]), int(m[2]))
                _add_pairs(out, step, lines.at(m.start()), pairs,
                           canon_of=lambda k: "loss" if k.lower() in _MX_LOSS else None)
                _mark(st, steps, used, m.start(), step, "mxnet")
            continue
        step = epoch_end_step(st, "mxnet", int(m[1]))
        name = m[3].decode()
        key = f"{m[2].decode().lower()}-{name}"
        out.add(step, key, float(m[4]), lines.at(m.start()))
        canon = "loss" if name.lower() in _MX_LOSS else name
        out.metric_override[key] = ("eval_" if m[2] == b"Validation" else "train_") + canon
        used.add(m.start())
        st.frameworks.add("mxnet")


# -- ESPnet2 ---------------------------------------------------------------------------------------------

#: ``espnet2/train/reporter.py`` ``SubReporter.log_message``: ``{epoch}epoch:{key}:{a}-{b}batch: k=v, k=v`` with
#: ``a``-``b`` the batches since the last message, counted within the epoch; ``Reporter.log_message``:
#: ``{epoch}epoch results: [train] k=v, ..., [valid] k=v, ...``
_ESPNET = re.compile(rb"\b(\d+)epoch:(\w+):\d+-(\d+)batch: ([^\r\n]{0,4000})")
_ESPNET_RESULTS = re.compile(rb"\b(\d+)epoch results: ([^\r\n]{0,8000})")
_ESPNET_SECTION = re.compile(rb"\[(\w+)\] ([^\[\r\n]*)")
_ESPNET_PAIR = re.compile(rb"([A-Za-z][\w]{0,60})=(" + NUM + rb")(?=,|\s|$)")
_ESPNET_SKIP = {"total_count", "time"}
_ESPNET_LR = re.compile(r"(?:optim\d+_)?lr_?\d+")


def _espnet_canon(key: str) -> str | None:
    if key in ("loss", "grad_norm", "loss_scale"):
        return key
    return "learning_rate" if _ESPNET_LR.fullmatch(key) else None


def parse_espnet(text: bytes, first_line: int, st: StepState, out: Collector,
                 steps: StepMarks, used: Used) -> None:
    """Training rows at ``epoch_step`` (batches restart every epoch); the epoch results at the epoch's last step,
    ``[valid]`` as evaluation, ``[train]`` as the epoch mean (``train_loss``). Timing keys (``*_time``) are skipped."""
    if not has(text, b"epoch:") and not has(text, b"epoch results: "):
        return
    lines = Lines(text, first_line)
    for m in _in_order(_ESPNET, _ESPNET_RESULTS, text):
        if m.re is _ESPNET:
            pairs = [(k.decode(), v) for k, v in _ESPNET_PAIR.findall(m[4]) if not k.endswith(b"_time")]
            if pairs:
                section = m[2].decode()
                step = epoch_step(st, "espnet:" + section, int(m[1]), int(m[3]))
                if section == "train":
                    _add_pairs(out, step, lines.at(m.start()), pairs, canon_of=_espnet_canon)
                else:
                    _add_pairs(out, step, lines.at(m.start()), [(f"{section}_{k}", v) for k, v in pairs])
                _mark(st, steps, used, m.start(), step, "espnet")
            continue
        step = epoch_end_step(st, "espnet:train", int(m[1]))
        line = lines.at(m.start())
        for sec in _ESPNET_SECTION.finditer(m[2]):
            section = sec[1].decode()
            for k, v in _ESPNET_PAIR.findall(sec[2]):
                name = k.decode()
                if name in _ESPNET_SKIP or name.endswith("_time"):
                    continue
                key = f"{section}_{name}"
                out.add(step, key, float(v), line)
                canon = _espnet_canon(name) or name
                if section == "valid":
                    out.metric_override[key] = "eval_" + canon
                elif section == "train":
                    out.metric_override[key] = "train_" + canon
        used.add(m.start())
        st.frameworks.add("espnet")


# -- WeNet --------------------------------------------------------------------------------------------

#: ``wenet/utils/train_utils.py`` ``log_per_step``: ``'{} Batch {}/{} loss {:.6f} '.format(tag, epoch, batch_idx, ...)``
#: then ``'{name} {value:.6f} '`` per loss term and ``lr {:.8f} grad_norm {:.6f} rank {}`` (TRAIN) or ``history loss
#: {:.6f} rank {}`` (CV); the first executor.py printed ``Batch {batch_idx}/{num_total_batch}`` instead
_WENET = re.compile(rb"\b(TRAIN|CV) Batch (\d+)/(\d+) loss (" + NUM + rb") ([^\r\n]{0,2000})")
_WENET_RANK = re.compile(rb"\brank 0\b")
_WENET_PAIR = re.compile(rb"([A-Za-z_]\w{0,40}) (" + NUM + rb")(?=\s|$)")


#: ``wenet/bin/train.py`` after each epoch's CV pass: ``'Epoch {} CV info cv_loss {}'`` (later `` rank {}``, forks add
#: `` accuracy {}`` or ``cv_acc {}``)
_WENET_CV = re.compile(rb"\bEpoch (\d+) CV info ((?:[A-Za-z_]\w{0,40} " + NUM + rb"[ \t]*)+)")


def parse_wenet(text: bytes, first_line: int, st: StepState, out: Collector,
                steps: StepMarks, used: Used) -> None:
    """TRAIN rows at ``epoch_step`` (WeNet counts batches within an epoch); CV rows as evaluation at the step in force;
    the epoch's ``CV info`` summary at that epoch's last TRAIN batch (else at the epoch number).
    Rows whose second number never changes while the first does are the old ``batch/total`` form."""
    rows = list(_WENET.finditer(text)) if has(text, b" Batch ") else []
    summaries = list(_WENET_CV.finditer(text)) if has(text, b" CV info ") else []
    if not rows and not summaries:
        return
    train = [m for m in rows if m[1] == b"TRAIN"]
    old_form = len({m[3] for m in train}) == 1 and len({m[2] for m in train}) > 1
    ranked = any(_WENET_RANK.search(m[5]) for m in rows)  # every rank prints its own row: rank 0's are kept
    lines = Lines(text, first_line)
    for m in sorted(rows + summaries, key=lambda m: m.start()):
        if m.re is _WENET_CV:
            pairs = [(k.decode(), v) for k, v in _WENET_PAIR.findall(m[2] + b" ") if k != b"rank"]
            if any(k == "cv_loss" for k, _ in pairs):
                step = epoch_end_step(st, "wenet", int(m[1])) if st.epoch_base.get("wenet") else int(m[1])
                _add_pairs(out, step, lines.at(m.start()), pairs, {"cv_loss": "eval_loss"})
                used.add(m.start())
                st.frameworks.add("wenet")
            continue
        rest = m[5].replace(b"history loss", b"history_loss")
        if ranked and not _WENET_RANK.search(rest):
            used.add(m.start())  # another rank's copy: no other parser reads it either
            continue
        pairs = [(k.decode(), v) for k, v in _WENET_PAIR.findall(rest) if k not in (b"rank", b"history_loss")]
        if m[1] == b"TRAIN":
            step = int(m[2]) if old_form else epoch_step(st, "wenet", int(m[2]), int(m[3]))
            _add_pairs(out, step, lines.at(m.start()), [("loss", m[4]), *pairs])
            _mark(st, steps, used, m.start(), step, "wenet")
        elif st.last_step is not None:
            _add_pairs(out, st.last_step, lines.at(m.start()), [("cv_loss", m[4])], {"cv_loss": "eval_loss"})
            used.add(m.start())


# -- Coqui TTS / Mozilla TTS console logger ---------------------------------------------------------------

#: ``TTS/utils/console_logger.py`` (and coqui ``trainer``'s ``ConsoleLogger``) ``print_train_step``:
#: ``   --> STEP: {step}/{batch_steps} -- GLOBAL_STEP: {global_step}`` then one ``     | > {key}: {value:.5f}  ({avg:.5f})``
#: line per loss and ``     | > current_lr: ...`` / ``step_time`` lines; ``print_eval_step``/``print_epoch_end``:
#: ``   --> EVAL PERFORMANCE`` then ``     | > avg_{key}: {value:.5f} ...``. Bold/colour escapes may wrap the header.
_TTS_STEP = re.compile(rb"--> (?:TIME: [^\n]{0,40}?-- )?STEP: \d+/\d+ -- GLOBAL_STEP: (\d+)[^\n]*\n((?:[ \t]*\| > [^\n]*(?:\n|\Z))+)")
_TTS_EVAL = re.compile(rb"--> EVAL PERFORMANCE[^\n]*\n((?:[ \t]*\| > [^\n]*(?:\n|\Z))+)")
_TTS_PAIR = re.compile(rb"\| > ([A-Za-z_][\w]{0,60}): (?:tensor\()?(" + NUM + rb")")
#: ``amp_scaler`` is the GradScaler's scale (fp16 training); GAN recipes print ``loss_0``/``loss_1`` per optimizer
TTS_KEYS = {"loss": "loss", "grad_norm": "grad_norm", "current_lr": "learning_rate", "lr": "learning_rate",
            "amp_scaler": "loss_scale"}


def parse_coqui_tts(text: bytes, first_line: int, st: StepState, out: Collector,
                    steps: StepMarks, used: Used) -> None:
    """Each step block at its GLOBAL_STEP (the value before the bracketed running mean); an evaluation block at the
    step in force, its ``avg_`` keys as ``eval_``. Timing lines (``*_time``) are skipped."""
    if not has(text, b"GLOBAL_STEP: ") and not has(text, b"EVAL PERFORMANCE"):
        return
    lines = Lines(text, first_line)
    for m in _in_order(_TTS_STEP, _TTS_EVAL, text):
        g = 2 if m.re is _TTS_STEP else 1
        base = m.start(g)
        # each value at its own line of the block (the evidence cites the line that printed it)
        pairs = [(p[1].decode(), p[2], lines.at(base + p.start())) for p in _TTS_PAIR.finditer(m[g])
                 if not p[1].endswith(b"_time")]
        if m.re is _TTS_STEP:
            step = int(m[1])
            for k, v, at in pairs:
                _add_pairs(out, step, at, [(k, v)], TTS_KEYS)
            _mark(st, steps, used, m.start(), step, "coqui_tts")
        elif st.last_step is not None and pairs:
            for k, v, at in pairs:
                name = k[4:] if k.startswith("avg_") else k
                key = "eval_" + name
                out.add(st.last_step, key, float(v), at)
                out.metric_override[key] = "eval_" + TTS_KEYS.get(name, name)
            used.add(m.start())


# -- icefall (k2) -------------------------------------------------------------------------------------------

#: icefall recipes' ``train.py``: ``f"Epoch {cur_epoch}, batch {batch_idx}, loss[{loss_info}], tot_loss[{tot_loss}],
#: batch size: {batch_size}, lr: {cur_lr:.2e}, " + f"grad_scale: {scale}"`` (fp16), with ``MetricsTracker`` printing
#: ``loss=0.5123, simple_loss=..., over 1000.00 frames. ``; validation: ``Epoch {e}, validation: loss=..., over ...``.
#: batch_idx counts within the epoch (ZipVoice adds ``global_batch_idx: N``)
_ICEFALL = re.compile(rb"\bEpoch (\d+), batch (\d+), (?:global_batch_idx: (\d+), )?(?:batch size: [\d.]+, )?"
                      rb"loss\[([^\]\n]{0,2000})\], tot_loss\[[^\]\n]{0,2000}\]([^\r\n]{0,400})")
_ICEFALL_VALID = re.compile(rb"\bEpoch (\d+), validation: ([^\r\n]{0,2000})")
_ICEFALL_PAIR = re.compile(rb"([A-Za-z_]\w{0,60})=(" + NUM + rb")")
_ICEFALL_TAIL = re.compile(rb"\b(lr|cur_lr|grad_scale): (" + NUM + rb")")
ICEFALL_KEYS = {"lr": "learning_rate", "cur_lr": "learning_rate", "grad_scale": "loss_scale"}


def parse_icefall(text: bytes, first_line: int, st: StepState, out: Collector,
                  steps: StepMarks, used: Used) -> None:
    """The batch's own losses (``loss[...]``; ``tot_loss`` is a decaying running sum, skipped), LR and fp16 grad scale
    at ``global_batch_idx`` or ``epoch_step``; validation losses as ``eval_`` at the step in force."""
    if not has(text, b"tot_loss[") and not has(text, b", validation: "):
        return
    lines = Lines(text, first_line)
    for m in _in_order(_ICEFALL, _ICEFALL_VALID, text):
        if m.re is _ICEFALL:
            step = int(m[3]) if m[3] is not None else epoch_step(st, "icefall", int(m[1]), int(m[2]))
            pairs = [(k.decode(), v) for k, v in _ICEFALL_PAIR.findall(m[4])]
            pairs += [(k.decode(), v) for k, v in _ICEFALL_TAIL.findall(m[5])]
            _add_pairs(out, step, lines.at(m.start()), pairs, ICEFALL_KEYS)
            _mark(st, steps, used, m.start(), step, "icefall")
        elif st.last_step is not None:
            for k, v in _ICEFALL_PAIR.findall(m[2]):
                key = "valid_" + k.decode()
                out.add(st.last_step, key, float(v), lines.at(m.start()))
                out.metric_override[key] = "eval_" + k.decode()
            used.add(m.start())


# -- epoch / batch counters of hand-written loops -----------------------------------------------------------

#: ``[Epoch 0][Batch 99], LR: ..., ObjLoss=...`` (GluonCV's scripts), ``[Epoch 1/10][Batch 100/500] loss: ...``,
#: ``Epoch: 3, Batch: 120, loss 0.5``, ``Elapsed [0:05:20] batch: 252  d_loss: 0.0  g_loss: 9.19`` (GAN loops): a
#: batch counter, an optional epoch before it, then pairs of which one names a loss. The generic parser's counters
#: are step/iter; "batch" is this one's (``batch size``/``batch_size`` are not counters: a digit must follow)
_BATCH_CORE = re.compile(rb"[Bb]atch(?:_idx)?\W{0,3}\d")
#: a run-wide step counter printed before a line's epoch and batch
_GLOBAL_STEP_BEFORE = re.compile(rb"\b(?:global[ _]step|[Ss]tep|[Ii]ter(?:ation)?)\b\W{0,3}\d")
#: a bracketed group of loss terms by their own names (eriklindernoren/PyTorch-YOLOv3's "[Epoch 0/30, Batch 323/1313]
#: [Losses: x nan, y nan, w nan, h nan, conf 0.755184, cls nan, total nan, recall: 0.0, precision: 0.0]")
_LOSSES_GROUP = re.compile(rb"\[\s*[Ll]osses:\s*")
#: scores printed inside such a group, which are not loss terms
_QUALITY_KEY = re.compile(r"(?i)recall|precision|acc|map|f1|iou|lr|time")
_EPOCH_BATCH = re.compile(rb"(?:\b[Ee]poch\W{0,3}(\d+)(?:\s*/\s*\d+)?\W{1,4})?\b[Bb]atch(?:_idx)?\W{0,3}(\d+)"
                          rb"(?:\s*/\s*\d+)?\]?")


def parse_epoch_batch(text: bytes, first_line: int, st: StepState, out: Collector,
                      steps: StepMarks, used: Used) -> None:
    """Batch counters restart every epoch when an epoch is printed (``epoch_step``), else count from the start."""
    if not has(text, b"atch"):
        return
    lines = Lines(text, first_line)
    seen: set[int] = set()
    for c in _BATCH_CORE.finditer(text):
        ls = line_start(text, c.start())
        le = line_end(text, c.start())
        if ls in seen or le - ls > 4000 or used.covers(ls, le):
            continue
        seen.add(ls)
        m = _EPOCH_BATCH.search(text, ls, le)
        if m is None or b" | " in text[m.end():le]:
            continue  # "Epoch 0/1 | Batch 0/N | Train Loss x | Learning Rate y": the pipe-row reader's (two-word keys)
        if _GLOBAL_STEP_BEFORE.search(text, ls, m.start()) is not None:
            continue  # PaddleNLP "global step 30/1000, epoch: 1, batch: 5, loss: ...": the generic parser's global step
        rest = text[m.end():le]
        pairs = [(k, v) for k, v in generic_pairs(rest) if k.lower() not in ("epoch", "batch")]
        group = _LOSSES_GROUP.search(rest)
        if group is not None:  # "[Losses: x nan, y nan, ..., total nan]": the group's keys are loss terms
            close = rest.find(b"]", group.end())
            inside = generic_pairs(rest[group.end():close if close >= 0 else len(rest)])
            names = {k for k, _ in inside if not is_loss_like(k) and not _QUALITY_KEY.search(k)}
            pairs = [(f"{k}_loss" if k in names else k, v) for k, v in pairs]
        if not any(is_loss_like(k) for k, _ in pairs):
            continue
        step = epoch_step(st, "epoch_batch", int(m[1]), int(m[2])) if m[1] is not None else int(m[2])
        line = lines.at(ls)
        for k, v in pairs:
            norm = k.replace(" ", "_")
            canon = loss_key_metric(norm.lower())  # "Train Loss nan": the step's loss, as the generic parser reads it
            if canon is not None:
                out.metric_override[norm] = canon
            out.add(step, norm, float(v), line)
        _mark(st, steps, used, ls, step)


# -- Marian NMT -----------------------------------------------------------------------------------------

#: ``src/training/scheduler.h`` ``update``: ``Ep. {} : Up. {} : Sen. {} : Cost {} : Time {:.2f}s : {:.2f} words/s``
#: then ``: gNorm {:.4f}`` and ``: L.r. {:.4e}`` when reported; the cost may carry ``* labels @ batch after total``
#: (``--disp-label-counts``). ``validate``: ``Ep. {} : Up. {} : {type} : {value} : new best`` or ``: stalled {} times``
_MARIAN = re.compile(rb"\bEp\. [\d.]+ : Up\. (\d+) : Sen\. [\d,]+ : Cost (" + NUM + rb")([^\r\n]{0,400})")
_MARIAN_EXTRA = re.compile(rb": (gNorm|L\.r\.) (" + NUM + rb")")
_MARIAN_VALID = re.compile(rb"\bEp\. [\d.]+ : Up\. (\d+) : ([\w-]{1,40}) : (" + NUM + rb") : (?:new best|stalled)")
#: validator types whose value is a loss (``cross-entropy``, ``ce-mean-words``, ``ce-sum``), else kept by name
_MARIAN_LOSS_TYPES = {"cross-entropy", "ce-mean-words", "ce-mean", "ce-sum"}


def parse_marian(text: bytes, first_line: int, st: StepState, out: Collector,
                 steps: StepMarks, used: Used) -> None:
    """The cost (the training loss, averaged since the last display) per update; gNorm and L.r. beside it;
    validation scores at their update, a cross-entropy validator as the eval loss."""
    if not has(text, b" : Up. "):
        return
    lines = Lines(text, first_line)
    for m in _MARIAN.finditer(text):
        step = int(m[1])
        pairs = [("cost", m[2])] + [(k.decode(), v) for k, v in _MARIAN_EXTRA.findall(m[3])]
        _add_pairs(out, step, lines.at(m.start()), pairs,
                   {"cost": "loss", "gNorm": "grad_norm", "L.r.": "learning_rate"})
        _mark(st, steps, used, m.start(), step, "marian")
    for m in _MARIAN_VALID.finditer(text):
        kind = m[2].decode()
        key = "valid_" + kind
        out.add(int(m[1]), key, float(m[3]), lines.at(m.start()))
        out.metric_override[key] = "eval_loss" if kind in _MARIAN_LOSS_TYPES else "eval_" + kind.replace("-", "_")
        used.add(m.start())
        st.frameworks.add("marian")


# -- MindSpore -----------------------------------------------------------------------------------------

#: ``mindspore/train/callback/_loss_monitor.py`` ``LossMonitor``: ``epoch: %s step: %s, loss is %s`` (the step counted
#: within the epoch; model-zoo copies add `` global_step: %s``); the docs' hand-written loops print
#: ``epoch: %s, step: %s, loss is %s`` or ``step: %s, loss is %s``. The loss may print as a Tensor
#: (``Tensor(shape=[], dtype=Float32, value= 2.30)``), first of a loss-scale cell's (loss, overflow, scale) tuple.
_MS_LOSS = re.compile(rb"(?:\bepoch: (\d+),? )?\bstep: (\d+),?(?: global_step: (\d+),?)? loss is (?:\(?Tensor\(shape=\[[\d, ]*\], "
                      rb"dtype=\w+, value=\s*\[?\s*)?(" + NUM + rb")")
#: the overflow flag and loss scale a loss-scale cell returns beside the loss, when the whole tuple is printed
_MS_SCALE = re.compile(rb"dtype=Bool, value= ?(True|False)\), Tensor\(shape=\[[\d, ]*\], dtype=\w+, value= ?(" + NUM + rb")")
#: ``LossMonitor`` raises ``ValueError("epoch: {} step: {}. Invalid loss, terminating training.")`` on NaN or Inf
_MS_INVALID = re.compile(rb"\bepoch: (\d+) step: (\d+)\. Invalid loss, terminating training")


def parse_mindspore(text: bytes, first_line: int, st: StepState, out: Collector,
                    steps: StepMarks, used: Used) -> None:
    """Loss lines at ``global_step`` when printed, else at ``epoch_local_step`` (the step restarts each epoch);
    LossMonitor's "Invalid loss" error records the non-finite loss it stopped on, at its step."""
    if not has(text, b"loss is") and not has(text, b"Invalid loss"):
        return
    lines = Lines(text, first_line)
    for m in _MS_LOSS.finditer(text):
        local = int(m[2])
        step = int(m[3]) if m[3] else epoch_local_step(st, "mindspore", int(m[1]), local, None) if m[1] else local
        line = lines.at(m.start())
        out.add(step, "loss", float(m[4]), line)
        sc = _MS_SCALE.search(text, m.end(), line_end(text, m.end()))
        if sc is not None:
            out.add(step, "overflow", 1.0 if sc[1] == b"True" else 0.0, line)
            out.add(step, "loss_scale", float(sc[2]), line)
        _mark(st, steps, used, m.start(), step, "mindspore")
    for m in _MS_INVALID.finditer(text):
        step = epoch_local_step(st, "mindspore", int(m[1]), int(m[2]), None)
        out.add(step, "loss", math.nan, lines.at(m.start()))
        _mark(st, steps, used, m.start(), step, "mindspore")


# -- GAN loops: DCGAN ``[e/E][b/B]`` rows, CycleGAN/pix2pix ``(epoch: e, iters: i, ...)`` rows ----------------

#: pytorch/examples ``dcgan/main.py`` and the PyTorch DCGAN tutorial: ``[%d/%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f
#: D(G(z)): %.4f / %.4f`` (epoch, epochs, batch within the epoch, batches per epoch; tab- or space-separated)
_BRACKET_ROW = re.compile(rb"(?m)^[ \t]*\[(\d+)/(\d+)\]\[(\d+)/(\d+)\][ \t]+([^\r\n]{0,2000})")
_BRACKET_PAIR = re.compile(rb"([A-Za-z][\w()]{0,40}):[ \t]*(" + NUM + rb")(?![\w.])")
#: junyanz pytorch-CycleGAN-and-pix2pix ``Visualizer.print_current_losses``: ``(epoch: %d, iters: %d, time: %.3f, data:
#: %.3f) `` then ``%s: %.3f `` per loss (``D_A``, ``G_GAN``, ``G_L1``...; the names of ``loss_<name>`` attributes, written
#: to ``loss_log.txt``); ``iters`` counts samples within the epoch. pix2pixHD/SPADE print no ``data:``
_CYCLEGAN = re.compile(rb"\(epoch: (\d+), iters: (\d+), time: " + NUM + rb"(?:, data: " + NUM + rb")?\) ([^\r\n]{0,2000})")
_CYCLEGAN_PAIR = re.compile(rb"([A-Za-z]\w{0,40}): (" + NUM + rb")(?![\w.])")


def parse_gan_rows(text: bytes, first_line: int, st: StepState, out: Collector,
                   steps: StepMarks, used: Used) -> None:
    """DCGAN rows at ``epoch_local_step`` (the batch counter restarts each epoch; its total is printed); CycleGAN rows
    likewise, each value a loss named ``loss_<name>`` as the model names it (they do not say "loss" themselves)."""
    if has(text, b"][") and has(text, b"Loss"):
        lines = Lines(text, first_line)
        for m in _BRACKET_ROW.finditer(text):
            pairs = _BRACKET_PAIR.findall(m[5])
            if not any(is_loss_like(k.decode()) for k, _ in pairs):
                continue
            step = epoch_local_step(st, "gan_brackets", int(m[1]), int(m[3]), int(m[4]))
            _add_pairs(out, step, lines.at(m.start()), pairs)
            _mark(st, steps, used, m.start(), step)
    if has(text, b"(epoch: "):
        lines = Lines(text, first_line)
        for m in _CYCLEGAN.finditer(text):
            pairs = [(k if b"loss" in k.lower() else b"loss_" + k, v) for k, v in _CYCLEGAN_PAIR.findall(m[3])]
            if not pairs:
                continue
            step = epoch_local_step(st, "cyclegan", int(m[1]), int(m[2]), None)
            _add_pairs(out, step, lines.at(m.start()), pairs)
            _mark(st, steps, used, m.start(), step, "cyclegan")


# -- CLU (JAX/Flax examples, big_vision, scenic) ------------------------------------------------------------

#: ``clu/metric_writers/logging_writer.py`` ``write_scalars``: ``logging.info("[%d]%s %s", step, collection, ", ".join(
#: f"{k}={v:.6g}"))`` (older: ``"%s[%d] %s"`` with a prefix), the keys sorted; the whole rest of the line is pairs
_CLU = re.compile(rb"\[(\d+)\](?: collection=(\w+))? ((?:[\w/.\-]{1,80}=[^,\s]{1,40}, )*[\w/.\-]{1,80}=[^,\s]{1,40})"
                  rb"[ \t]*(?=[\r\n]|$)")
_CLU_PAIR = re.compile(rb"([\w/.\-]{1,80})=(" + NUM + rb")(?=,|$)")
_HELD_OUT_COLLECTIONS = {b"eval", b"valid", b"validation", b"val", b"test"}


def _clu_starts(text: bytes) -> list[int]:
    """Where a ``[N] `` can open: the ``[`` before each ``] `` with only digits between (``] `` is rare in a log full
    of tqdm bars, ``[`` is not, so the regex is tried at these few places instead of at every ``[``)."""
    starts = []
    rfind = text.rfind
    for e in literal_positions(text, (b"] ",)):
        o = rfind(b"[", max(0, e - 21), e)
        if o >= 0 and text[o + 1:e].isdigit() and (not starts or o > starts[-1]):
            starts.append(o)
    return starts


def parse_clu(text: bytes, first_line: int, st: StepState, out: Collector,
              steps: StepMarks, used: Used) -> None:
    """Scalars at the step CLU was given; an eval collection's keys as ``eval_``. A line needs a loss or a
    learning rate among its pairs."""
    if b"=" not in text or not has(text, b"] "):
        return
    lines = Lines(text, first_line)
    for m in finditer_at(_CLU, text, _clu_starts(text)):
        pairs = _CLU_PAIR.findall(m[3])
        if not any(is_loss_like(k.decode()) or k.endswith((b"learning_rate", b"lr")) for k, _ in pairs):
            continue
        step = int(m[1])
        if m[2] in _HELD_OUT_COLLECTIONS:
            pairs = [(b"eval_" + k.removeprefix(b"eval_"), v) for k, v in pairs]
        _add_pairs(out, step, lines.at(m.start()), pairs)
        _mark(st, steps, used, m.start(), step, "clu")


# -- a header line, then one metric per indented line (OLMo, MosaicML Composer) ---------------------------

#: OLMo ``Trainer.log_metrics_to_console``: ``[step=10/739328]`` then ``    train/CrossEntropyLoss=10.88`` per metric
#: (values over 1000 with thousands commas); Composer ``ConsoleLogger.log_to_console``: ``[epoch=1][batch=10/100]:``
#: (``batch_in_epoch``) or ``[batch=10/100]:`` then ``\t Train loss/train/total: 7.5123`` per metric
#: one scan for any header (cheaper than a literal search per header name in a chunk full of ``[``)
#: a header's opening, each looked for alone (one regex for all, led by "[", stopped at every tqdm bar's)
_HEADER_HINTS = (b"[epoch=", b"[step=", b"[batch=", b"[ba=", b"[sample=", b"[token=")
_HEADER_BLOCK = re.compile(rb"(?m)(?:\[epoch=(\d+)\])?\[(step|batch|ba|sample|token)=(\d+)(?:/(\d+))?\](:?)[ \t]*\r?$")
_OLMO_ROW = re.compile(rb"[ \t]{2,}([A-Za-z][\w/.\-@]{0,120})=(-?[\d,]+(?:\.\d*)?(?:[eE][-+]?\d+)?|-?nan|-?inf)[ \t]*\r?(?:\n|\Z)")
_COMPOSER_ROW = re.compile(rb"\t (?:(Train|Eval) )?([A-Za-z][^:\r\n]{0,120}): (" + NUM + rb")[ \t]*\r?(?:\n|\Z)")
_COMPOSER_OTHER = re.compile(rb"\t [^\r\n]{0,2000}\r?(?:\n|\Z)")
#: Composer before 0.13 (``ConsoleLogger.log_data``): one metric a line, ``{training_progress}: {data_name}: {data_str}``
#: (``[batch=8/5000]: lr-DecoupledAdamW/group0: 0.0000``, mosaicml/examples llm/README.md; ``[epoch=1][batch=3/10]: ...``)
_COMPOSER_LINE = re.compile(rb"(?:\[epoch=(\d+)\])?\[(batch|ba|sample|token|step)=(\d+)(?:/(\d+))?\]: "
                            rb"([A-Za-z][^:\r\n]{0,120}): (" + NUM + rb")[ \t]*\r?(?=\n|\Z)")


def _block_metric(key: str, held_out: bool) -> str | None:
    """The canonical metric of a header block's key: OLMo ``train/CrossEntropyLoss``, ``optim/total_grad_norm``,
    ``optim/learning_rate_group0``; Composer ``loss/train/total``, ``lr-DecoupledAdamW/group0``,
    ``metrics/eval/LanguageCrossEntropy``."""
    low = key.lower()
    if held_out or low.startswith(("eval/", "metrics/eval/", "val/")):
        return "eval_loss" if low.endswith(("crossentropyloss", "languagecrossentropy", "/loss", "loss/total")) else None
    if low in ("train/crossentropyloss", "loss/train/total", "train/loss"):
        return "loss"
    if low.endswith("grad_norm") and ("total" in low or low == "optim/grad_norm"):
        return "grad_norm"
    if low.startswith(("optim/learning_rate", "lr-")):
        return "learning_rate"
    return None


def parse_header_blocks(text: bytes, first_line: int, st: StepState, out: Collector,
                        steps: StepMarks, used: Used) -> None:
    """Each indented metric at its header's step: OLMo's global step, Composer's batch (``epoch_local_step`` when the
    header names the epoch, as ``batch_in_epoch`` restarts). A header with no metric row under it is left alone."""
    if b"=" not in text or not any(has(text, h) for h in _HEADER_HINTS):
        return
    lines = Lines(text, first_line)
    for m in _HEADER_BLOCK.finditer(text):
        if m[1] is not None:
            step = epoch_local_step(st, "composer", int(m[1]), int(m[3]), int(m[4]) if m[4] else None)
        else:
            step = int(m[3])
        pos = m.end() + 1 if m.end() < len(text) and text[m.end():m.end() + 1] == b"\n" else m.end()
        rows = []
        while pos < len(text):
            r = _OLMO_ROW.match(text, pos) if not m[5] else _COMPOSER_ROW.match(text, pos)
            if r is None:
                o = _COMPOSER_OTHER.match(text, pos) if m[5] else None
                if o is None:
                    break
                pos = o.end()
                continue
            if m[5]:
                held_out, key, raw = r[1] == b"Eval", r[2].decode(), r[3]
            else:
                held_out, key, raw = False, r[1].decode(), r[2].replace(b",", b"")
            rows.append((key, raw, held_out, r.start()))
            pos = r.end()
        if not rows or not any("loss" in k.lower() or "crossentropy" in k.lower() for k, _, _, _ in rows):
            continue
        for key, raw, held_out, at in rows:
            name = ("eval/" + key) if held_out and not key.lower().startswith(("eval", "metrics/eval")) else key
            out.add(step, name, float(raw), lines.at(at))
            canon = _block_metric(name, held_out)
            if canon:
                out.metric_override[name] = canon
            used.add(at)
        _mark(st, steps, used, m.start(), step, "olmo" if not m[5] else "composer")
    _composer_lines(text, lines, st, out, steps, used)


def _composer_lines(text: bytes, lines: Lines, st: StepState, out: Collector, steps: StepMarks, used: Used) -> None:
    """Composer's one-metric lines, each at its progress's step (``epoch_local_step`` under an epoch), when one of the
    chunk's is a loss (as a block needs one: a header of another tool with ``key: value`` after it stays unread)."""
    found = list(_COMPOSER_LINE.finditer(text))
    if not any(is_loss_like(m[5].decode("utf-8", "replace")) for m in found):
        return
    for m in found:
        if m[1] is not None:
            step = epoch_local_step(st, "composer", int(m[1]), int(m[3]), int(m[4]) if m[4] else None)
        else:
            step = int(m[3])
        name = m[5].decode("utf-8", "replace").strip()
        value = _num(m[6])
        if value is None:
            continue
        out.add(step, name, value, lines.at(m.start()))
        canon = _block_metric(name, False)
        if canon:
            out.metric_override[name] = canon
        _mark(st, steps, used, m.start(), step, "composer")


# -- GluonTS, MONAI tutorials, fastText, segmentation_models_pytorch ----------------------------------------

#: ``gluonts/mx/trainer/_base.py``: ``Epoch[%d] Evaluation metric '%s'=%f`` (``epoch_loss``; ``validation_epoch_loss``)
#: and ``Epoch[{epoch_no}] Learning rate is {lr}``, once per epoch
_GLUONTS = re.compile(rb"\bEpoch\[(\d+)\] (?:Evaluation metric '(\w{1,60})'=|Learning rate is )(" + NUM + rb")")
#: MONAI tutorials: ``epoch {e}/{E}`` on its own line, ``{step}/{epoch_len}, train_loss: {loss:.4f}`` per batch (the
#: step restarts each epoch), ``epoch {e} average loss: {x:.4f}``
_MONAI_EPOCH = re.compile(rb"(?m)^epoch (\d+)/\d+[ \t]*\r?$")
_MONAI_ROW = re.compile(rb"(?m)^(\d+)/(\d+), (?:[^\r\n]{0,200}?)\btrain_loss: (" + NUM + rb")")
_MONAI_AVG = re.compile(rb"\bepoch (\d+) average loss: (" + NUM + rb")")
#: fastText ``FastText::printInfo``: ``\rProgress: %.1f%% words/sec/thread: %7.0f lr: %9.6f avg.loss: %9.6f ETA: ...``
_FASTTEXT = re.compile(rb"Progress:\s*([\d.]+)% words/sec/thread:\s*[\d.]+\s+lr:\s*(" + NUM + rb")\s+avg\.loss:\s*("
                       + NUM + rb")")
#: segmentation_models_pytorch ``utils/train.py`` ``Epoch.run``: a tqdm bar named by the stage whose postfix is
#: ``", ".join("{} - {:.4}".format(k, v))`` (``dice_loss - 0.5432, iou_score - 0.4321``); the examples print
#: ``Epoch: {i}`` before each epoch
_SMP_BAR = re.compile(rb"(?:(?<![\w])(train|valid)): +\d+%\|[^|\r\n]{0,400}\|\s*(\d+)/(\d+) \[[^,\]\r\n]{0,60}, ([^\]\r\n]{0,2000})\]")
_SMP_PAIR = re.compile(rb"([A-Za-z]\w{0,60}) - (" + NUM + rb")(?=,|$)")
_SMP_EPOCH = re.compile(rb"(?m)^Epoch: (\d+)[ \t]*\r?$")


def _epoch_at(epochs: list[tuple[int, int]], pos: int, default: int | None) -> int | None:
    i = -1
    for j, (at, _) in enumerate(epochs):
        if at < pos:
            i = j
        else:
            break
    return epochs[i][1] if i >= 0 else default


def parse_gluonts(text: bytes, first_line: int, st: StepState, out: Collector,
                  steps: StepMarks, used: Used) -> None:
    """GluonTS epoch metrics at the epoch (``epoch_loss`` the loss, ``validation_epoch_loss`` the eval loss)."""
    if not has(text, b"Evaluation metric '") and not has(text, b"Learning rate is "):
        return
    lines = Lines(text, first_line)
    for m in _GLUONTS.finditer(text):
        step = int(m[1])
        name = m[2].decode() if m[2] else "learning_rate"
        out.add(step, name, float(m[3]), lines.at(m.start()))
        out.metric_override[name] = {"epoch_loss": "loss", "validation_epoch_loss": "eval_loss"}.get(name, name)
        _mark(st, steps, used, m.start(), step, "gluonts")


def parse_monai(text: bytes, first_line: int, st: StepState, out: Collector,
                steps: StepMarks, used: Used) -> None:
    """MONAI rows at ``epoch_local_step`` under their ``epoch e/E`` header; the epoch average as ``epoch_avg_loss``."""
    if not has(text, b", train_loss: "):
        return
    lines = Lines(text, first_line)
    epochs = [(m.start(), int(m[1])) for m in _MONAI_EPOCH.finditer(text)]
    last = getattr(st, "monai_epoch", None)
    for m in _in_order(_MONAI_ROW, _MONAI_AVG, text):
        if m.re is _MONAI_AVG:  # at the step of the epoch's last row
            if "monai" in st.frameworks and st.last_step is not None:
                out.add(st.last_step, "epoch_avg_loss", float(m[2]), lines.at(m.start()))
                used.add(line_start(text, m.start()))
            continue
        epoch = _epoch_at(epochs, m.start(), last)
        if epoch is None:
            continue
        step = epoch_local_step(st, "monai", epoch, int(m[1]), int(m[2]))
        out.add(step, "train_loss", float(m[3]), lines.at(m.start()))
        out.metric_override["train_loss"] = "loss"
        _mark(st, steps, used, m.start(), step, "monai")
    if epochs:
        st.monai_epoch = epochs[-1][1]  # type: ignore[attr-defined]


#: SpeechBrain's FileTrainLogger (speechbrain/utils/train_logger.py), a line an epoch in train_log.txt and on the console:
#: the epoch's meta stats, then each split's stats with the split's name before every key: "epoch: 3, lr: 1.50e-04 -
#: train si-snr: -4.05e-01 - valid si-snr: -5.13e+00", "epoch: 2, lr: 1.00e+00 - train loss: 1.23 - valid loss: 1.11,
#: valid CER: 4.35" (the first TrainLogger joined every item with " - "; speaker recipes print "Epoch: 6"; the console
#: line carries the logger's name, "speechbrain.utils.train_logger - epoch: 1, ...")
_SB_LINE = re.compile(rb"(?m)^(?:[^\n]{0,200}? - )?[ \t]*[Ee]poch: (\d+)(?:,| -) [^\n]{0,2000}? - train [^\n]{0,2000}$")
#: what every such line holds, searched first: the epoch with its count and the separator after it
_SB_START = re.compile(rb"poch: \d+(?:,| -) ")
_SB_ITEM = re.compile(rb"(?:(train|valid|test) )?([A-Za-z][\w.@/-]{0,40}(?: [A-Za-z][\w.@/-]{0,40})?): (" + NUM
                      + rb")[ \t\r]*")


def parse_speechbrain(text: bytes, first_line: int, st: StepState, out: Collector,
                      steps: StepMarks, used: Used) -> None:
    """SpeechBrain epoch lines at the epoch. A recipe hands its stage loss first (``stage_stats = {"loss": ...}``; the
    separation recipes' ``{"si-snr": ...}``, the negated SI-SNR they minimise), so each split's first key is its loss:
    the train split's the run's loss, the valid split's the eval loss."""
    if _SB_START.search(text) is None or text.find(b" - train ") < 0:  # ~1.4 ms a 4 MB chunk (has(): ~6 ms here)
        return
    lines = Lines(text, first_line)
    for m in _SB_LINE.finditer(text):
        step = int(m[1])
        first: dict[bytes, bytes] = {}
        pairs: list[tuple[bytes | None, bytes, bytes]] = []
        for part in m[0].split(b" - "):
            for item in part.split(b", "):
                it = _SB_ITEM.fullmatch(item.strip())
                if it is None:
                    continue
                split, key = it[1], it[2]
                if split is not None:
                    first.setdefault(split, key)
                pairs.append((split, key, it[3]))
        if b"train" not in first:
            continue
        line = lines.at(m.start())
        for split, key, raw in pairs:
            value = _num(raw)
            if value is None or split is None and key.lower() in (b"epoch", b"steps", b"step"):
                continue
            name = (split + b" " + key if split is not None else key).decode("utf-8", "replace")
            out.add(step, name, value, line)
            if split == b"train" and key == first[b"train"]:
                out.metric_override[name] = "loss"
            elif split == b"valid" and key == first[b"valid"] and key == first[b"train"]:
                out.metric_override[name] = "eval_loss"
            elif split is None and key == b"lr":
                out.metric_override[name] = "learning_rate"
        _mark(st, steps, used, m.start(), step, "speechbrain")


def parse_fasttext(text: bytes, first_line: int, st: StepState, out: Collector,
                   steps: StepMarks, used: Used) -> None:
    """fastText's progress lines: the progress in per mille as the step, ``avg.loss`` the loss."""
    if not has(text, b"avg.loss:"):
        return
    lines = Lines(text, first_line)
    for m in _FASTTEXT.finditer(text):
        step = round(float(m[1]) * 10)
        out.add(step, "avg.loss", float(m[3]), lines.at(m.start()))
        out.add(step, "lr", float(m[2]), lines.at(m.start()))
        out.metric_override["avg.loss"] = "loss"
        out.metric_override["lr"] = "learning_rate"
        _mark(st, steps, used, m.start(), step, "fasttext")


def parse_smp(text: bytes, first_line: int, st: StepState, out: Collector,
              steps: StepMarks, used: Used) -> None:
    """segmentation_models_pytorch bars at epoch * batches + n; a validation bar at its epoch's last training step."""
    if not (has(text, b"train: ") or has(text, b"valid: ")) or not has(text, b"%|"):
        return
    lines = Lines(text, first_line)
    epochs = [(m.start(), int(m[1])) for m in _SMP_EPOCH.finditer(text)]
    best: dict[tuple[bytes, int, int], tuple[int, int, list]] = {}
    for m in _SMP_BAR.finditer(text):
        pairs = _SMP_PAIR.findall(m[4])
        if not pairs or not any(is_loss_like(k.decode()) for k, _ in pairs):
            continue
        epoch = _epoch_at(epochs, m.start(), getattr(st, "smp_epoch", 0)) or 0
        best[(m[1], epoch, int(m[2]))] = (m.start(), int(m[3]), pairs)  # the last redraw of a counter wins
    train_end: dict[int, int] = {}
    for (stage, epoch, n), (pos, total, pairs) in sorted(best.items(), key=lambda kv: kv[1][0]):
        if stage == b"valid":  # the validation of an epoch: at the last training step of that epoch
            step = train_end.get(epoch, epoch * total + n)
            pairs = [(b"eval_" + k, v) for k, v in pairs]
        else:
            step = epoch * total + n
            train_end[epoch] = max(train_end.get(epoch, step), step)
        _add_pairs(out, step, lines.at(pos), pairs)
        _mark(st, steps, used, pos, step, "smp")
    if epochs:
        st.smp_epoch = epochs[-1][1]  # type: ignore[attr-defined]


# -- nnU-Net v2 ----------------------------------------------------------------------------------------------

#: nnU-Net v2 (nnunetv2/training/nnUNetTrainer/nnUNetTrainer.py): ``print_to_log_file`` prefixes the datetime and a
#: colon; ``on_epoch_start`` prints ``Epoch {current_epoch}`` and ``Current learning rate: {lr:.5f}``, ``on_epoch_end``
#: ``train_loss {x}``, ``val_loss {x}``, ``Pseudo dice [...]`` (per class; NaN for a class absent from the
#: validation batches, by design) and ``Epoch time: {s} s``. Its loss is Dice + CE, negative once Dice dominates
_NNU_PREFIX = rb"(?m)^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?: )?"
_NNU_EPOCH = re.compile(_NNU_PREFIX + rb"Epoch (\d+)[ \t]*\r?$")
_NNU_VALUE = re.compile(_NNU_PREFIX + rb"(train_loss|val_loss|Current learning rate:) (" + NUM + rb")[ \t]*\r?$")
_NNU_CANON = {b"train_loss": ("train_loss", "loss"), b"val_loss": ("val_loss", "eval_loss"),
              b"Current learning rate:": ("lr", "learning_rate")}


def parse_nnunet(text: bytes, first_line: int, st: StepState, out: Collector,
                 steps: StepMarks, used: Used) -> None:
    """Each value at the epoch printed before it (the epoch is the step)."""
    if not has(text, b"train_loss ") or not (has(text, b"Epoch ") or has(text, b"val_loss ")):
        return
    lines = Lines(text, first_line)
    epochs = [(m.start(), int(m[1])) for m in _NNU_EPOCH.finditer(text)]
    last = getattr(st, "nnunet_epoch", None)
    for m in _NNU_VALUE.finditer(text):
        epoch = _epoch_at(epochs, m.start(), last)
        if epoch is None:
            continue
        name, canon = _NNU_CANON[m[1]]
        value = _num(m[2])
        if value is None:
            continue
        out.add(epoch, name, value, lines.at(m.start()))
        out.metric_override[name] = canon
        _mark(st, steps, used, m.start(), epoch, "nnunet")
    if epochs:
        st.nnunet_epoch = epochs[-1][1]  # type: ignore[attr-defined]


# -- evaluation records of TF Estimator and OpenNMT-tf ----------------------------------------------------------

#: TF Estimator (estimator.py ``_write_dict_to_summary``): ``Saving dict for global step %d: %s`` with
#: ``', '.join('%s = %s' % (k, v) for k, v in sorted(dictionary.items()))``; OpenNMT-tf (evaluation.py):
#: ``Evaluation result for step %d: %s`` with ``" ; ".join("%s = %f" % (k, v))``. Both are held-out results: their
#: ``loss`` is the evaluation loss, not a training log at that step
_EVAL_RECORD = re.compile(rb"(?:Saving dict for global step|Evaluation result for step) (\d+): ([^\r\n]{1,2000})")
_EVAL_PAIR = re.compile(rb"(?:^|, | ; )([A-Za-z_][\w/.-]{0,80}) = (" + NUM + rb")(?=,| ;|\s*$)")


#: XLNet's and ALBERT's classifier scripts (run_classifier.py, run_race.py) log the same Estimator result dict as
#: ``"{} {} | ".format(key, val)`` cells: ``Eval result | eval_accuracy 0.255 | eval_loss 1.386 | global_step 4000 |
#: loss 1.386 | path ... | step 4000 |`` (also pasted without the head); the record is the line holding
#: ``global_step N`` as one of its cells
_CELL_STEP = re.compile(rb"(?:^|\| )global_step (\d+)(?= \||\s*$)", re.M)
_CELL = re.compile(rb"^\s*([A-Za-z_][\w/.-]{0,80}) (" + NUM + rb")\s*$")
_RESULT_HEAD = re.compile(rb"(?:Eval|Best|Test|Dev)(?: results?)? \| |Result(?: of step \d+)? \| ")


def _cell_records(text: bytes, lines: Lines, out: Collector, used: Used) -> None:
    for m in _CELL_STEP.finditer(text):
        ls, le = line_start(text, m.start()), line_end(text, m.start())
        pairs = [c for c in (_CELL.match(cell) for cell in text[ls:le].split(b"|")) if c is not None]
        if len(pairs) < 3:  # the step and at least two results
            continue
        step, line = int(m[1]), lines.at(ls)
        keys = {c[1] for c in pairs}
        # an evaluation's result (its eval_* keys, or its head: "Eval result |", "Best result |"); a training loop
        # printing the same cells keeps its names
        held = any(k.startswith(b"eval_") for k in keys) or _RESULT_HEAD.search(text, ls, le) is not None
        for c in pairs:
            k, value = c[1].decode(), _num(c[2])
            if k in ("global_step", "step") or value is None or (held and k == "loss" and b"eval_loss" in keys):
                continue  # (the Estimator's ``loss`` beside its ``eval_loss``: the same evaluation twice)
            name = k if k.startswith("eval_") or not held else "eval_" + k
            out.add(step, name, value, line)
            if held and k == "loss":
                out.metric_override[name] = "eval_loss"
        used.add(ls)


def parse_eval_records(text: bytes, first_line: int, st: StepState, out: Collector,
                       steps: StepMarks, used: Used) -> None:
    """Each key as ``eval_<key>`` at the record's step; ``loss`` is ``eval_loss``, ``global_step`` is the step."""
    lines = Lines(text, first_line)
    if has(text, b"global_step ") and has(text, b" | "):
        _cell_records(text, lines, out, used)
    if not (has(text, b"Saving dict for global step ") or has(text, b"Evaluation result for step ")):
        return
    for m in _EVAL_RECORD.finditer(text):
        pairs = [(k.decode(), v) for k, v in _EVAL_PAIR.findall(m[2].rstrip())]
        if not pairs:
            continue
        step = int(m[1])
        line = lines.at(m.start())
        for k, raw in pairs:
            value = _num(raw)
            if k == "global_step" or value is None:
                continue
            name = "eval_" + k
            out.add(step, name, value, line)
            if k == "loss":
                out.metric_override[name] = "eval_loss"
        used.add(line_start(text, m.start()))


# -- wandb's console summary ---------------------------------------------------------------------------------------

#: wandb's run footer (sdk/wandb_run.py ``_footer_history_summary_info``): ``wandb: Run summary:`` then one
#: ``wandb: <key, right-aligned> <value>`` line per summary key (the run's last logged values), until a bare ``wandb:``;
#: behind a launcher's prefix too (verl under Ray: ``(TaskRunner pid=132393) wandb: ...``). The ``Run history:``
#: sparklines above it carry no numbers
_WANDB_SUMMARY = re.compile(rb"(?m)^([^\r\n]{0,80}?)wandb: Run summary:[ \t]*\r?$")
_WANDB_ROW = re.compile(rb"[ \t]*(\S[^\r\n]{0,200}?)[ \t]+(" + NUM + rb")[ \t]*\r?$")
#: the summary keys that give the step its values were logged at
WANDB_STEP_KEYS = ("train/global_step", "trainer/global_step", "global_step", "train/step", "_step", "step")


def parse_wandb_summary(text: bytes, first_line: int, st: StepState, out: Collector,
                        steps: StepMarks, used: Used) -> None:
    """The summary's numbers at the run's last step, its own step key when it has one (HF's ``train/global_step``), else
    step 1; read only where the log has no records of its own before it (a pasted footer: the summary repeats the
    records' last values, rounded, and its step may not be the one the records were numbered with). wandb's own
    bookkeeping (``_runtime``, ``_timestamp``) is skipped."""
    if not has(text, b"Run summary:"):
        return
    lines = Lines(text, first_line)
    for h in _WANDB_SUMMARY.finditer(text):
        lead = h[1] + b"wandb:"
        pos = line_end(text, h.start()) + 1
        rows: list[tuple[str, float, int]] = []
        while pos < len(text):
            le = line_end(text, pos)
            if not text.startswith(lead, pos):
                break
            body = text[pos + len(lead):le]
            if not body.strip():
                break
            m = _WANDB_ROW.fullmatch(body)
            if m is not None:
                key = m[1].decode("utf-8", "replace").strip().replace("\\_", "_")
                value = _num(m[2])
                if value is not None and not key.startswith("_runtime") and not key.startswith("_timestamp"):
                    rows.append((key, value, pos))
            used.add(pos)
            pos = le + 1
        if not rows or st.last_step is not None:
            continue  # (the log's own records hold these last values already, rounded here, maybe at other steps)
        own = next((int(v) for k, v, _ in rows if k in WANDB_STEP_KEYS and v == v and 0 <= v < 2 ** 62), None)
        step = own if own is not None else 1
        for key, value, at in rows:
            if key not in WANDB_STEP_KEYS:
                out.add(step, key, value, lines.at(at))
        if own is not None:
            _mark(st, steps, used, h.start(), step)
        else:
            st.inferred = True  # step 1 of a paste with nothing else: no step was printed
            used.add(line_start(text, h.start()))


# -- Ray Tune / RLlib console results -----------------------------------------------------------------------------

#: Ray Tune's console reporter (tune/progress_reporter.py ``_print_result`` / ray.tune.logger ``pretty_print``, a
#: ``yaml.safe_dump`` of the result): ``Result for PPO_CartPole-v0_0339b_00000:`` then the result as indented YAML
#: (``  episode_reward_mean: 47.06``, RLlib's learner stats nested under ``info: learner: <policy>: [learner_stats:]``),
#: NaN written as YAML's ``.nan``; the block ends at the first line that is not indented
_TUNE_HEAD = re.compile(rb"(?m)^(?:\(\w+(?:, [^)\r\n]{0,80})?\) )?Result for [^\r\n:]{1,200}:[ \t]*\r?$")
_TUNE_ROW = re.compile(rb"( {2,40})([^\s:'\"][^:\r\n]{0,120}?|'[^'\r\n]{1,120}'):(?:[ \t]+([^\r\n]{0,200}?))?[ \t]*\r?$")
_YAML_FLOATS = {b".nan": math.nan, b".NaN": math.nan, b".NAN": math.nan, b".inf": math.inf, b".Inf": math.inf,
                b"-.inf": -math.inf, b"-.Inf": -math.inf, b"+.inf": math.inf}
#: RLlib's counters and timers beside Tune's own (agent_timesteps_total, num_env_steps_sampled, episodes_this_iter)
_TUNE_COUNTER = re.compile(r"^(?:num_|agent_timesteps|timesteps|episodes_)|_(?:total|ms|s)$")
#: RLlib's learner stats -> canonical
TUNE_KEYS = {"cur_lr": "learning_rate", "grad_gnorm": "grad_norm", "episode_reward_mean": "reward"}


def _yaml_num(raw: bytes | None) -> float | None:
    if raw is None:
        return None
    return _YAML_FLOATS[raw] if raw in _YAML_FLOATS else _num(raw)


def parse_tune_results(text: bytes, first_line: int, st: StepState, out: Collector,
                       steps: StepMarks, used: Used) -> None:
    """Each result block at its ``training_iteration``: the top level's numbers (Tune's own bookkeeping aside, as for
    result.json) and RLlib's learner stats by their last name (``total_loss``, ``policy_loss``, ``vf_loss``, ``kl``,
    ``entropy``, ``cur_lr``), prefixed by the policy when several policies train."""
    if not has(text, b"Result for "):
        return
    from autopsy.ingest.raytune import AUTO_FILLED

    lines = Lines(text, first_line)
    for h in _TUNE_HEAD.finditer(text):
        pos = line_end(text, h.start()) + 1
        path: list[tuple[int, str]] = []
        top: list[tuple[str, float, int]] = []
        stats: list[tuple[str, str, float, int]] = []
        step = None
        rows: list[int] = []
        while pos < len(text):
            le = line_end(text, pos)
            m = _TUNE_ROW.match(text, pos, le)
            if m is None:
                break
            rows.append(pos)
            depth, key = len(m[1]), m[2].strip(b"'").decode("utf-8", "replace")
            while path and path[-1][0] >= depth:
                path.pop()
            value = _yaml_num(m[3])
            if m[3] in (None, b""):
                path.append((depth, key))
            elif value is not None:
                names = [k for _, k in path]
                if not names:
                    if key == "training_iteration":
                        step = int(value) if value == value else None
                    elif key not in AUTO_FILLED and not _TUNE_COUNTER.search(key):
                        top.append((key, value, pos))
                elif names[:2] == ["info", "learner"] and len(names) >= 3:
                    stats.append((names[2], key, value, pos))
            pos = le + 1
        if step is None or not (top or stats):
            continue
        policies = {p for p, _, _, _ in stats}
        for key, value, at in top:
            out.add(step, key, value, lines.at(at))
            if key in TUNE_KEYS:
                out.metric_override[key] = TUNE_KEYS[key]
        for policy, key, value, at in stats:
            name = key if len(policies) == 1 else f"{policy}/{key}"
            out.add(step, name, value, lines.at(at))
            if len(policies) == 1 and key in TUNE_KEYS:
                out.metric_override[name] = TUNE_KEYS[key]
        _mark(st, steps, used, h.start(), step, "ray_tune")
        for at in rows:
            used.add(at)


# -- TensorFlow 1's tf.Print ---------------------------------------------------------------------------------

#: ``tf.Print(x, [t], message="Loss XY \t")`` (TF 1.x PrintOp, logged through glog): ``I tensorflow/core/kernels/
#: logging_ops.cc:79] Loss XY \t[0.188059166]``, the message then each printed tensor in brackets; one line per
#: tf.Print op each run of the graph, so a repeated message is the next step
_TF_PRINT = re.compile(rb"(?m)^[^\r\n]{0,120}logging_ops\.cc:\d+\] ([^\r\n\[\]]{1,100}?)[ \t]*\[(" + NUM
                       + rb")\](?:\[[^\r\n]{0,200})?[ \t]*\r?$")


def parse_tf_print(text: bytes, first_line: int, st: StepState, out: Collector,
                   steps: StepMarks, used: Used) -> None:
    """Each scalar tf.Print as a metric named by its message, numbered on: a message seen again starts the next step.
    Only messages naming a loss make a record (tf.Print also dumps shapes and debug values)."""
    if not has(text, b"logging_ops.cc:"):
        return
    lines = Lines(text, first_line)
    rows = [(m[1].decode("utf-8", "replace").strip(), _num(m[2]), m.start()) for m in _TF_PRINT.finditer(text)]
    if not any("loss" in k.lower() for k, _, _ in rows):
        return
    step = st.last_step if st.last_step is not None else 0
    seen: set[str] = set()
    for key, value, at in rows:
        if value is None or not key:
            continue
        if not seen or key in seen:
            step += 1
            seen = set()
            _mark(st, steps, used, at, step, "tf_print")
            st.inferred = True
        seen.add(key)
        out.add(step, key, value, lines.at(at))
        if key.lower() in ("loss", "total loss", "total_loss"):
            out.metric_override[key] = "loss"
        used.add(line_start(text, at))


# -- tensorpack ----------------------------------------------------------------------------------------------

#: tensorpack's ``ScalarPrinter`` (callbacks/monitor.py): ``logger.info('{}: {:.5g}'.format(k, v))`` for every scalar,
#: sorted by name, after ``Epoch {} (global_step {}) finished, time:...`` (train/base.py); the logger's prefix is
#: ``[%m%d %H:%M:%S @file.py:line]`` (green on a terminal)
_TP_PREFIX = rb"(?:\x1b\[[\d;]*m)?\[\d{4} \d\d:\d\d:\d\d @"
_TP_STAT = re.compile(rb"(?m)^" + _TP_PREFIX + rb"monitor\.py:\d+\](?:\x1b\[[\d;]*m)? ([^\r\n]{1,160}?): (" + NUM
                      + rb")[ \t]*\r?$")
_TP_EPOCH = re.compile(rb"(?m)^" + _TP_PREFIX + rb"[\w.]+:\d+\](?:\x1b\[[\d;]*m)? Epoch (\d+) \(global_step (\d+)\) "
                       rb"finished")
#: tensorpack's summed objective (examples: ``total_cost``; single-loss models: ``cost``)
_TP_LOSS = ("total_cost", "cost", "total_loss", "loss")


def parse_tensorpack(text: bytes, first_line: int, st: StepState, out: Collector,
                     steps: StepMarks, used: Used) -> None:
    """ScalarPrinter's stat lines at the global step of the epoch that ended before them (numbered on from the last
    step when the paste starts with the stats); ``total_cost`` (else ``cost``) is the loss."""
    if not has(text, b"@monitor.py:"):
        return
    lines = Lines(text, first_line)
    ends = [(m.start(), int(m[2])) for m in _TP_EPOCH.finditer(text)]
    block: list[tuple[str, float, int]] = []
    block_step: int | None = None

    def flush() -> None:
        if not block:
            return
        names = {k for k, _, _ in block}
        loss = next((k for k in _TP_LOSS if k in names), None)
        step = block_step
        if step is None:
            step = (st.last_step or 0) + 1
            st.inferred = True
        for k, v, at in block:
            out.add(step, k, v, lines.at(at))
            if k == loss:
                out.metric_override[k] = "loss"
            elif k == "learning_rate":
                out.metric_override[k] = "learning_rate"
            used.add(at)
        _mark(st, steps, used, block[0][2], step, "tensorpack")
        block.clear()

    prev_end = -1
    e = 0
    for m in _TP_STAT.finditer(text):
        while e < len(ends) and ends[e][0] < m.start():
            e += 1
        at_step = ends[e - 1][1] if e else None
        # a new block: another epoch ended since the last stat line, or a gap of other lines (not sorted on)
        if block and (at_step != block_step or text.count(b"\n", prev_end, m.start()) > 1):
            flush()
        if not block:
            block_step = at_step
        value = _num(m[2])
        if value is not None:
            block.append((m[1].decode("utf-8", "replace").strip(), value, m.start()))
        prev_end = m.end()
    flush()


#: (parser, letters a chunk needs first) in the order they run, before the generic parser
FORMAT_PARSERS = (
    (parse_json_lines, (b"",)),
    (parse_detectron2, (b"iter", b"lossdict")),
    (parse_timm, (b"Train",)),
    (parse_swin, (b"Train",)),
    (parse_fairseq, (b"epoch",)),
    (parse_verl, (b"step",)),
    (parse_megatron, (b"iteration",)),
    (parse_caffe, (b"Iteration",)),
    (parse_opennmt, (b"accppl", b"Validationperplexity", b"Validationaccuracy", b"Trainperplexity",
                     b"IterationLearningrate")),
    (parse_darknet, (b"ratesecondsimages",)),
    (parse_darknet_regions, (b"RegionAvg",)),
    (parse_openseg, (b"TrainIteration",)),
    (parse_vits, (b"TrainEpoch",)),
    (parse_cleanrl, (b"globalstepepisodicreturn",)),
    (parse_insightface, (b"GlobalStep",)),
    (parse_yolact, (b"TETA",)),
    (parse_nndet, (b"lossreached",)),
    (parse_kaldi, (b"objectivefunctionfor", b"ObjlogPzx")),
    (parse_marian, (b"EpUpSenCost", b"EpUpnewbest", b"EpUpstalled")),
    (parse_mindspore, (b"steplossis", b"Invalidloss")),
    (parse_gan_rows, (b"Loss", b"epochiterstime")),
    (parse_clu, (b"",)),
    (parse_header_blocks, (b"step", b"batch", b"ba", b"epoch")),
    (parse_gluonts, (b"Evaluationmetric", b"Learningrateis")),
    (parse_monai, (b"trainloss",)),
    (parse_speechbrain, (b"epoch",)),
    (parse_fasttext, (b"avgloss",)),
    (parse_smp, (b"trainits", b"validits")),
    (parse_tensorpack, (b"monitorpy",)),
    (parse_tf_print, (b"loggingopscc",)),
    (parse_nnunet, (b"trainloss",)),
    (parse_tune_results, (b"Resultfor",)),
    (parse_wandb_summary, (b"Runsummary",)),
    (parse_eval_records, (b"Savingdictforglobalstep", b"Evaluationresultforstep", b"globalstep")),
    (parse_mxnet, (b"samplessec", b"EpochValidation", b"EpochTrain")),
    (parse_espnet, (b"epochtrain", b"epochvalid", b"epochresults")),
    (parse_wenet, (b"TRAINBatch", b"CVBatch", b"CVinfo")),
    (parse_coqui_tts, (b"GLOBALSTEP", b"EVALPERFORMANCE")),
    (parse_icefall, (b"totloss", b"Epochvalidation")),
    (parse_epoch_batch, (b"atch",)),
    (parse_torchtune, (b"Loss",)),
    (parse_keras, (b"step", b"ETA", b"sample", b"loss")),
    (parse_tqdm_postfix, (b"",)),
    (parse_yolo, (b"GPUmem", b"gpumem")),
    (parse_paren_steps, (b"Step", b"step")),
    (parse_llama_recipes, (b"TrainingEpoch", b"evalppl", b"Keyavg", b"trainepochloss")),
    (parse_kv_table, (b"",)),
    (parse_model_card, (b"TrainingLossEpochStep",)),
    (parse_pipe_table, (b"",)),
    (parse_counter_csv, (b"epoch", b"step", b"iter", b"batch", b"Epoch", b"Step", b"Iter", b"Batch")),
    (parse_columns, (b"",)),
    (parse_step_value_rows, (b"tep", b"ter", b"poch", b"TEP", b"TER", b"POCH")),
)

