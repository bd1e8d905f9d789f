"""fp16 overflow and loss scaling: half precision ran out of range, or the loss scale collapsed.

What it detects:
    * The dynamic loss-scale trajectory (DeepSpeed ``OVERFLOW!`` lines, ``loss_scale`` series,
      a GradScaler ``scale`` in a checkpoint): a scale that keeps halving down to its minimum
      (``Current loss scale already at minimum``, or ``COLLAPSE_SCALE`` and below) is a
      collapse (root cause ``loss_scale_collapse``). A few overflows at the start that stop
      while the scale is still large are the scaler calibrating: reported as info only.
    * fp16 compute (``fp16=true``, ``torch_dtype=float16``/``half``, DeepSpeed fp16, "Attempting
      to unscale FP16 gradients", the DeiT/MAE-style "Loss is nan, stopping training" engine that
      runs under fp16 autocast) together with a failure symptom: a non-finite onset, a loss past
      65504, ``grad_norm`` non-finite at most logs (every step skipped), a learning rate pinned
      at 0 because skipped steps never advance the scheduler, or an optimizer step count behind
      the global step. Root cause ``fp16_overflow``.

Why it matters:
    float16 tops out at 65504. Models pretrained in bf16 (Llama-2/3, Qwen2, Gemma, GLM-4, T5)
    produce activations beyond that; pure-half weights have no fp32 master copy to absorb it.
    When every step overflows, the scaler skips every update: the run burns compute and learns
    nothing, or crashes when the scale cannot shrink further.

Evidence used:
    Config facts (fp16, bf16, torch_dtype, deepspeed.fp16.*), events (overflow, loss_scale_min,
    unscale_fp16, nan_stop), ``loss``/``grad_norm``/``learning_rate``/``loss_scale`` series,
    checkpoint scaler and optimizer summaries.

Remedies:
    Switch to bf16 (Ampere or newer: ``bf16=True``, ``torch_dtype=bfloat16``) or fp32; never train
    with ``torch_dtype=float16`` weights (use ``torch_dtype=auto`` plus AMP so master weights stay
    fp32); lower the learning rate and add warmup; on V100/T4 use fp32 or a smaller LR.
    Lowering DeepSpeed's ``min_loss_scale`` only postpones the crash.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from autopsy.model import Checkpoint, Evidence, Finding, Run
from detectors._common import (
    FP16_MAX,
    bf16_or_fp32,
    checkpoint_evidence,
    ck_label,
    ck_step,
    count_of,
    event_evidence,
    fmt,
    fp16_signals,
    is_policy_gradient_run,
    nonfinite_onset,
    num,
    points,
    rounded_lr_zero,
    tensor_file,
)
from detectors.knobs import knob, sentence

CODE = "PREC001"
SLUG = "fp16-overflow"
ROOT_CAUSE = "fp16_overflow"
NEEDS = ("scalars", "events", "config", "checkpoints")
NEEDS_ANY = True

#: a dynamic scale at or below 8 means gradients overflow fp16 even scaled by <= 8 (|g| > 8e3):
#: that is persistent overflow, not calibration (healthy LLM runs settle around 2^10..2^17)
COLLAPSE_SCALE = 8.0
#: the last logs/messages that must all sit at the low scale (or overflow on consecutive steps) to call it a state
PERSIST_LOGS = 3
#: steps between overflow messages that still count as consecutive (accumulation, logging granularity)
PERSIST_GAP = 2
#: one overflow message at a low scale repeated this often: a state
PERSIST_REPEATS = 5
#: overflows that stop while the scale is still >= 2^10 are the scaler searching down from its
#: initial value (DeepSpeed starts at 2^16, some recipes at 2^32): normal
CALIBRATED_SCALE = 1024.0
#: more than this share of grad_norm logs non-finite = the scaler skips (nearly) every step
SKIP_ALL_SHARE = 0.8
#: learning rate exactly 0 on this many logs after the first = the scheduler never advanced
LR_PINNED_LOGS = 3
#: an LR printed as zero in fixed point proves the scheduler pinned only when the print resolves this
PINNED_LR = 1e-8
#: AdamW step count below this share of the checkpoint's global step = steps were skipped
OPT_STEP_BEHIND = 0.9


def detect(run: Run) -> Iterable[Finding]:
    collapse = _collapse(run)
    if collapse is not None:
        yield collapse
        return
    vae = _vae_latents(run)
    if vae is not None:
        yield vae
        return
    signals = fp16_signals(run)
    symptoms = _symptoms(run)
    calib = _calibration(run)
    if not signals:
        if calib is not None:
            yield calib
        return
    if bf16_or_fp32(run) is not None and all(s.strength == "hint" for s in signals):
        return
    if not symptoms:
        if calib is not None:
            yield calib
        pure = [s for s in signals if s.pure_half]
        if pure:
            yield Finding(
                code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="warning", confidence=0.5,
                title="Weights are float16: overflow-prone (max 65504)",
                message="The model is trained with float16 weights; no overflow is visible in the artifacts read, "
                        "but pure-half training has no fp32 master copy and overflows easily.",
                evidence=[pure[0].evidence], remedies=_remedies(run, None), basis="inferred", symptom="skipped_steps")
        return
    strongest = signals[0]
    direct = strongest.pure_half and strongest.strength in ("config", "message")
    conf = {"config": 0.65, "message": 0.7, "hint": 0.55}[strongest.strength] + (0.15 if direct else 0.0)
    if any(s[2] for s in symptoms):  # a value past fp16's range seen
        conf += 0.1
    conf = min(conf, 0.9)
    first_step = min((s[0].step for s in symptoms if s[0].step is not None), default=None)
    evidence = [s.evidence for s in signals[:3]] + [s[0] for s in symptoms]
    ck_ev, resume = checkpoint_evidence(run, first_step)
    evidence.extend(ck_ev)
    what = "; ".join(s[1] for s in symptoms)
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=conf,
        title="fp16 overflow" + (f" from step {first_step}" if first_step is not None else ""),
        message=f"The run computes in float16 ({strongest.evidence.detail.split(':')[0]}) and {what}.",
        first_step=first_step, evidence=evidence, remedies=_remedies(run, resume),
        basis="direct" if direct else "inferred", symptom="nonfinite_loss",
    )


def _vae_latents(run: Run) -> Finding | None:
    """sd-scripts checks the latents its VAE encodes (``cache_batch_latents``) and raises "NaN detected in latents:
    <image>": the VAE's forward pass overflowed. The usual reason is the VAE run in float16 (SDXL's VAE overflows in
    fp16, which is why sd-scripts has --no_half_vae and the fp16-fix VAE exists); a GTX 16xx card gives NaN in fp16
    whatever the model (bmaltais/kohya_ss#1908); rarely the image itself."""
    from detectors._facts import event_evidence, fact_str, total_count
    from detectors.fp16_hardware import FP16_BROKEN_RE

    evs = run.events_of("vae_nan")
    if not evs:
        return None
    e = evs[0]
    path = e.data.get("path")
    card = fact_str(run, "gpu.name")
    gpu = card[0] if card else None
    ev = [event_evidence(e, e.message.strip()[:200] + (f" (x{total_count(evs)})" if total_count(evs) > 1 else ""))]
    gtx16 = gpu is not None and FP16_BROKEN_RE.search(gpu) is not None
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.6,
        title="The VAE encoded an image to NaN" + (f" ({path})" if path else ""),
        message=("The trainer's check of the VAE's latents found NaN: the VAE's forward pass overflowed. The usual "
                 "reason is the VAE run in float16 (SDXL's VAE overflows in fp16); "
                 + (f"this {gpu} gives NaN in fp16 whatever the model; " if gtx16 else
                    "on a GTX 16xx card fp16 gives NaN whatever the model; ")
                 + "rarely the image itself is broken."),
        first_step=e.step, evidence=ev,
        remedies=["Run the VAE in float32: --no_half_vae (sd-scripts), or use the fp16-fix SDXL VAE "
                  "(madebyollin/sdxl-vae-fp16-fix); on a GTX 16xx card train in fp32 (--mixed_precision no).",
                  "If one image keeps failing in fp32, open it: a corrupt or extreme image can overflow too."
                  + (f" The first one named: {path}." if path else "")],
        basis="direct", symptom="nonfinite_aux",
    )


def _remedies(run: Run, resume: str | None) -> list[str]:
    master = knob(run, "master")
    out = [f"Switch to bf16 (Ampere or newer: {knob(run, 'bf16')}) or fp32; on V100/T4 use fp32.",
           *([master] if master else []),
           sentence(f"Lower the learning rate and {knob(run, 'warmup')}; {knob(run, 'clip')}")]
    if resume:
        out.append(resume[0].upper() + resume[1:] + ".")
    return out


#: loss_scale points below the collapse floor that _collapse may cite (it cites at most 4 scales)
CITED_LOW = 4


def _scales(run: Run, floor: float) -> list[tuple[float, Evidence, int | None]]:
    """(scale after the event, evidence, step) from overflow events, loss_scale series, scaler.pt.

    A loss_scale series logged at every step can hold millions of points: only the ones _collapse can
    use are listed (its first maximum, its first CITED_LOW values <= ``floor`` and its lowest), in
    step order, so the max/low/first-step readings are those of the whole series.
    """
    out: list[tuple[float, Evidence, int | None]] = []
    for ev in run.events_of("overflow"):
        new = num(ev.data.get("new"))
        att = num(ev.data.get("attempted"))
        if new is None and att is not None:
            new = att  # hysteresis line: the scale was kept this time
        if new is not None:
            lg = num(ev.data.get("lg_new"))
            # the log2 scale as printed: it falls by 1 a step, which 3 significant digits would hide
            what = (f"non-finite gradients: log2 of the loss scale lowered to {lg:.10g} (scale 2^{lg:.10g} = {fmt(new)})"
                    if lg is not None else f"loss-scale overflow: attempted {fmt(att)}, reduced to {fmt(new)}")
            out.append((new, event_evidence(ev, what + (f" (x{ev.count})" if ev.count > 1 else "")), ev.step))
    ls = points(run, "loss_scale").finite_only()
    if len(ls):
        low = np.flatnonzero(ls.values <= floor)
        keep = {ls.argmax(), *low[:CITED_LOW].tolist()}
        if low.size:
            keep.add(int(low[np.argmin(ls.values[low])]))
        for i in sorted(keep):
            p = ls[i]
            out.append((p.value, p.evidence(f"loss_scale = {fmt(p.value)} at step {p.step}"), p.step))
    for c in run.checkpoints:
        sc = num((c.scaler or {}).get("scale"))
        if sc is not None:
            out.append((sc, Evidence(_scaler_file(c), "key scale",
                                     f"GradScaler scale = {fmt(sc)} in {ck_label(c.path)}", ck_step(run, c.step)), c.step))
        dso = (c.deepspeed or {}).get("optimizer")
        # a static LossScaler (bf16/fp32 runs) keeps cur_scale 1.0: only a dynamic scaler's value says anything
        if isinstance(dso, dict) and (dso.get("dynamic_loss_scale") is True or dso.get("dynamic") is True
                                      or dso.get("loss_scaler") == "DynamicLossScaler"):
            ls = num(dso.get("cur_scale"))
            if ls is not None:
                f = next((x.path for x in c.files if "optim_states" in x.path), c.path)
                out.append((ls, Evidence(f, "key loss_scaler.cur_scale",
                                         f"DeepSpeed dynamic loss scale = {fmt(ls)} in {ck_label(c.path)}", ck_step(run, c.step)), c.step))
    return out


def _scaler_file(c: Checkpoint) -> str:
    return next((f.path for f in c.files if f.path.rsplit("/", 1)[-1].startswith("scaler")), c.path)


def _collapse(run: Run) -> Finding | None:
    mins = run.events_of("loss_scale_min")
    floor = max(COLLAPSE_SCALE, num(run.config.get("deepspeed.fp16.min_loss_scale")) or 0.0)
    scales = _scales(run, floor)
    low = [s for s in scales if s[0] <= floor]
    if not mins and not low:
        return None
    overflow_evs = run.events_of("overflow")
    if not mins and not overflow_evs and scales and len({s[0] for s in scales}) == 1 and (
            len(scales) >= 2 or scales[0][0] == 1.0):
        # a scale that never moved: bf16/fp32 runs log a constant 1.0 (Megatron prints it in bf16 too), even in a paste
        # of one log line; a single saved GradScaler scale of 4 can only have been halved down to (kept)
        return None
    n_over = sum(e.count for e in overflow_evs)
    persistent = bool(mins) or _persistent(run, scales, floor)
    evidence: list[Evidence] = []
    if scales:
        top = max(scales, key=lambda s: s[0])
        evidence.append(top[1])
    # the highest scale is itself low when every overflow is (a scale printed only once it had collapsed): cited once
    evidence.extend(s[1] for s in low[:4] if not evidence or s[1] is not evidence[0])
    evidence.extend(event_evidence(e, f"\"{e.message.strip()[:120]}\": the run aborted") for e in mins[:1])
    lows = min((s[0] for s in low), default=None)
    step = next((e.step for e in mins if e.step is not None), None) or next((s[2] for s in low if s[2] is not None), None)
    loss = points(run, "loss").finite_only()
    if len(loss) >= 2 and loss[-1].value > loss[0].value:
        evidence.append(loss[-1].evidence(f"loss crept up from {fmt(loss[0].value)} (step {loss[0].step}) "
                                          f"to {fmt(loss[-1].value)} (step {loss[-1].step})"))
    ck_ev, resume = checkpoint_evidence(run, step)
    evidence.extend(ck_ev)
    parts = []
    if lows is not None:
        parts.append((count_of(n_over, "overflow message") if n_over else "the logged loss scale")
                     + f" drove the dynamic loss scale down to {fmt(lows)}")
    if mins:
        parts.append(f"the run aborted: \"{mins[0].message.strip()[:120]}\"")
    msg = "; ".join(parts)
    msg = msg[:1].upper() + msg[1:]
    remedies = _remedies(run, resume)
    if not persistent:
        # a low scale reached by a few spaced-out overflows, with nothing saying the updates stopped: the scaler may
        # have settled there (a run with large gradients); say so, but it is not a collapse
        return Finding(
            code=CODE, name=SLUG, root_cause="loss_scale_collapse", severity="warning", confidence=0.4,
            title=f"fp16 loss scale fell to {fmt(lows)}" + (f" at step {step}" if step is not None else ""),
            message=msg + ", but nothing shows the overflows persisting (no run of consecutive skipped steps, no "
                          "minimum-scale abort, no non-finite loss): the scaler may have settled at a low scale. "
                          "Watch for further overflow messages and a loss that stops improving.",
            first_step=step, evidence=evidence, remedies=remedies[:2], basis="inferred", symptom="loss_scale_collapse",
        )
    remedies.insert(1, knob(run, "scale_floor") + ": the gradients overflow fp16 at any scale, so the precision or "
                       "the learning rate must change.")
    return Finding(
        code=CODE, name=SLUG, root_cause="loss_scale_collapse", severity="critical" if mins else "error",
        confidence=0.95 if mins else 0.85,
        title="fp16 loss scale collapsed" + (f" to {fmt(lows)}" if lows is not None else " to its minimum")
              + (f" at step {step}" if step is not None else ""),
        message=msg + ": persistent fp16 overflow, every update is skipped.", first_step=step,
        evidence=evidence, remedies=remedies, basis="direct", symptom="loss_scale_collapse",
    )


def _persistent(run: Run, scales: list[tuple[float, Evidence, int | None]], floor: float) -> bool:
    """Whether a low loss scale is a state of the run (updates skipped for good), not a level the scaler settled at.

    Persistent: a scale below 1 (gradients overflow fp16 unscaled); a logged ``loss_scale`` series that ends
    at or below ``floor`` for its last ``PERSIST_LOGS`` logs; overflow messages on consecutive steps (gaps of at
    most ``PERSIST_GAP``) for the last ``PERSIST_LOGS`` of them, ending at or below ``floor``; or the training
    going non-finite. Overflows without step numbers, spaced out, or followed by a recovered scale are not.
    """
    if nonfinite_onset(run) is not None:
        return True
    ls = points(run, "loss_scale").finite_only()
    if any(s[0] < 1.0 for s in scales) and not _settled_below_one(_logged_scales(run)):
        return True
    if len(ls) >= PERSIST_LOGS and bool((ls.values[-PERSIST_LOGS:] <= floor).all()):
        return True
    evs = [e for e in run.events_of("overflow") if e.step is not None]
    if len(evs) >= PERSIST_LOGS:
        tail = evs[-PERSIST_LOGS:]
        gaps_ok = all(0 <= b.step - a.step <= PERSIST_GAP for a, b in zip(tail, tail[1:]))
        last = num(tail[-1].data.get("new"))
        if gaps_ok and last is not None and last <= floor:
            return True
    # one message repeated on many lines (folded into one event with a count) at a low scale: every step overflows
    return any(e.count >= PERSIST_REPEATS and (num(e.data.get("new")) or floor + 1) <= floor
               for e in run.events_of("overflow"))


def _logged_scales(run: Run) -> np.ndarray:
    """Every logged scale in step order: the progress lines' ``loss_scale`` and fairseq's epoch summaries'
    ``train_loss_scale`` together (clang8#3: 0.5 on a progress line at update 1976 and 0.5 on the epoch-7 summary at
    2000 are two logs of one settled scale)."""
    parts = [points(run, m).finite_only() for m in ("loss_scale", "train_loss_scale")]
    steps = np.concatenate([p.steps for p in parts])
    return np.concatenate([p.values for p in parts])[np.argsort(steps, kind="stable")]


def _settled_below_one(values: np.ndarray) -> bool:
    """A logged scale that fell below 1 and then held there (the same value at >= 2 logs from its first sub-1 one) with
    the loss finite: the scaler halves at every overflow, so a scale that stops falling means the updates go through again
    (fairseq#506: 0.5 for epochs 68-69, the loss still improving). Persistent overflow halves it log after log."""
    low = np.flatnonzero(values < 1.0)
    if not low.size:
        return False
    after = values[int(low[0]):]
    return len(after) >= 2 and bool((after == after[0]).all())


def _calibration(run: Run) -> Finding | None:
    """Early overflows that stop while the scale is still large: healthy, said as info."""
    evs = run.events_of("overflow")
    if not evs:
        return None
    scales = [s for s in (num(e.data.get("new")) for e in evs) if s is not None]
    if not scales or min(scales) < CALIBRATED_SCALE:
        return None
    n = sum(e.count for e in evs)
    return Finding(
        code=CODE, name=SLUG, root_cause=None, severity="info", confidence=0.8,
        title=f"{count_of(n, 'early loss-scale overflow')}: the scaler calibrating (normal)",
        message=f"{count_of(n, 'overflow message')} reduced the loss scale to {fmt(min(scales))}, still far above collapse "
                f"(<= {fmt(COLLAPSE_SCALE)}): the dynamic scaler searching down from its initial value.",
        first_step=evs[0].step, evidence=[event_evidence(evs[0]), event_evidence(evs[-1])],
        remedies=["Nothing to do; if overflows continue through training, lower initial_scale_power or the learning rate."],
        basis="inferred",
    )


def _symptoms(run: Run) -> list[tuple[Evidence, str, bool]]:
    """(evidence, text, past_fp16_range) for each fp16 failure symptom present."""
    out: list[tuple[Evidence, str, bool]] = []
    onset = nonfinite_onset(run)
    if onset is not None:
        out.append((onset.evidence, f"went non-finite at step {onset.step}" if onset.step is not None
                    else "stopped on a non-finite loss", False))
    loss = points(run, "loss")
    big = loss.select(loss.finite & (loss.values > FP16_MAX))
    if len(big):
        out.append((big[0].evidence(f"loss {fmt(big[0].value)} at step {big[0].step} is past fp16's max 65504"),
                    f"the loss reached {fmt(big[0].value)}, beyond fp16's range", True))
    gn = points(run, "grad_norm")
    bad = gn.select(~gn.finite)
    if len(gn) >= 3 and len(bad) / len(gn) > SKIP_ALL_SHARE:
        out.append((bad[0].evidence(f"grad_norm non-finite at {len(bad)} of {len(gn)} logs"),
                    f"grad_norm is non-finite at {len(bad)}/{len(gn)} logs: the scaler skips (nearly) every step", False))
    sk = points(run, "skipped_iterations")  # Megatron-LM: iterations its fp16 grad scaler skipped in each log interval
    if len(sk) >= 3:
        gaps = np.diff(np.concatenate(([0], sk.steps)))
        every = sk.finite & (gaps > 0) & (sk.values >= gaps)
        # intervals skipped while the printed scale falls and is still >= 2^10 are the scaler searching down from its
        # initial value (Megatron starts at 2^32: ~22 skipped iterations before 1024), not an overflow: left out. A
        # scale that stays put while every iteration is skipped (a static --loss-scale) is no search.
        ls = points(run, "loss_scale")
        if len(ls):
            at = np.minimum(np.searchsorted(ls.steps, sk.steps), len(ls) - 1)
            scale = np.where(ls.steps[at] == sk.steps, ls.values[at], np.nan)
            calib = every & (scale >= CALIBRATED_SCALE)
            if calib.sum() >= 2 and np.nanmin(scale[calib]) < np.nanmax(scale[calib]):
                sk, every = sk.select(~calib), every[~calib]
        if len(sk) >= 3 and every.sum() / len(sk) > SKIP_ALL_SHARE:
            out.append((sk[0].evidence(f"skipped iterations = the whole log interval at {int(every.sum())} of {len(sk)} logs "
                                       f"(steps {sk[0].step}..{sk[len(sk) - 1].step})"),
                        f"every iteration of {int(every.sum())}/{len(sk)} log intervals was skipped by the loss scaler",
                        False))
    lr = points(run, "learning_rate")
    zeros = lr[1:].select(lr.values[1:] == 0.0)
    if len(zeros) >= LR_PINNED_LOGS and len(zeros) >= len(lr[1:]) // 2 and rounded_lr_zero(run, lr, PINNED_LR) is None:
        out.append((zeros[0].evidence(f"learning_rate = 0 at {len(zeros)} of {len(lr)} logs"),
                    f"the learning rate stays at 0 for {len(zeros)} logs: skipped steps never advance the scheduler", False))
    if onset is None and is_policy_gradient_run(run):
        # a run that samples completions dies on a CUDA device-side assert: torch.multinomial asserts on the probabilities
        # that non-finite logits give (the fp16 overflow of an MLP feeding the sampler), whatever else the step did
        dev = [e for e in run.events_of("index_out_of_range") if "device-side assert" in e.message]
        if dev:
            out.append((event_evidence(dev[0], "a CUDA device-side assert in a run that samples completions: the sampler's "
                                               "check on its probabilities, which non-finite logits fail"),
                        "died on a device-side assert while sampling (non-finite logits)", False))
    for sk in (run.checkpoint_analysis or {}).get("skipped_steps") or []:
        if not isinstance(sk, dict):
            continue
        skipped, total = num(sk.get("skipped")), num(sk.get("global_steps"))
        if skipped and total and total - skipped < OPT_STEP_BEHIND * total:
            what = (f"the optimizer's step count is {fmt(num(sk.get('optimizer_step')))} at global step {fmt(total)}"
                    if sk.get("source") == "optimizer" else f"DeepSpeed skipped {fmt(skipped)} of {fmt(total)} steps")
            ck = next((c for c in run.checkpoints if c.path == sk.get("checkpoint")), None)
            art = next((f.path for f in ck.files if "optim" in f.path.rsplit("/", 1)[-1]), ck.path) if ck else str(sk.get("checkpoint"))
            out.append((Evidence(art, "optimizer state", f"{what} in {ck_label(sk.get('checkpoint'))}",
                                 ck_step(run, sk.get("step"))),
                        f"{fmt(skipped)} of {fmt(total)} updates were skipped (overflowing steps)", False))
            break
    for nl in (run.checkpoint_analysis or {}).get("fp16_near_limit") or []:
        if isinstance(nl, dict) and (nl.get("posinf") or nl.get("neginf")):
            out.append((Evidence(tensor_file(run, nl.get("checkpoint"), str(nl.get("tensor"))), f"tensor {nl.get('tensor')}",
                                 f"float16 weight {nl.get('tensor')} holds +/-Inf in {ck_label(nl.get('checkpoint'))}",
                                 nl.get("step") if isinstance(nl.get("step"), int) else None),
                        "float16 weights in the checkpoint hold Inf", True))
            break
    return out
