"""Gradientless parameters: trainable weights receive no gradient and never move.

What it detects:
    * Messages: "element 0 of tensors does not require grad and does not have a grad_fn",
      "None of the inputs have requires_grad=True. Gradients will be None" (reentrant gradient
      checkpointing over frozen embeddings, the LoRA classic), "parameter has no gradients".
    * Checkpoints: LoRA ``lora_B`` tensors still all zero (their initial value) after training;
      trainable tensors bitwise identical across checkpoints of different steps; optimizer
      parameters without any state (their ``.grad`` was always None).
    * Curves: ``grad_norm`` exactly 0.0 for ``ZERO_GRAD_LOGS`` consecutive logs or more; a
      preference run (DPO, IPO, KTO) whose ``rewards/chosen`` and ``rewards/rejected`` are exactly 0
      at every one of ``MIN_POLICY_LOGS`` logs or more, with the loss at ln 2 and non-zero
      log-probabilities: the policy's log-probs equal the reference model's at every step, so the
      policy never moves away from it (its weights do not train, or the reference is the policy).

Why it matters:
    The run looks like it trains (steps advance, the loss is logged) but nothing is learned, or
    backward crashes at the first step. The adapter saved at the end is its initialisation.

Evidence used:
    Events ``no_grad_inputs``, ``no_grad_fn``, ``traceback``; ``Run.checkpoints`` tensor stats
    and optimizer summaries; ``Run.checkpoint_analysis``; the ``grad_norm`` series.

Remedies:
    With gradient checkpointing on a PEFT model call ``model.enable_input_require_grads()`` (or
    ``gradient_checkpointing_kwargs={"use_reentrant": False}``); build the optimizer after
    wrapping the model; under ZeRO-3 gather parameters when saving; check ``requires_grad`` on
    the parameters you expect to train (``model.print_trainable_parameters()``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from autopsy.model import Evidence, Finding, Run
from detectors._common import (
    LN2,
    LN2_TOL,
    ck_label,
    ck_step,
    config_evidence,
    event_evidence,
    is_policy_gradient_run,
    nonfinite_onset,
    num,
    points,
    tensor_file,
    truthy,
)
from detectors._facts import fact_evidence, fact_number, fmt

CODE = "GRAD001"
SLUG = "gradientless-params"
ROOT_CAUSE = "gradientless_params"
NEEDS = ("scalars", "events", "checkpoints")
NEEDS_ANY = True

#: grad_norm exactly 0 on this many consecutive logs = no gradient reaches the weights
ZERO_GRAD_LOGS = 5
#: share of optimizer params without state above which the run (not a stray module) is affected
NO_STATE_SHARE = 0.5
#: preference logs with rewards exactly 0 needed (a healthy DPO run's first log, before any update, has them too)
MIN_POLICY_LOGS = 3

NO_GRAD_FN = re.compile(r"does not require grad and does not have a grad_fn", re.IGNORECASE)
NO_GRAD_INPUTS = re.compile(r"None of the inputs have requires_grad=True", re.IGNORECASE)
NO_GRADIENTS = re.compile(r"parameter has no gradients?", re.IGNORECASE)


def detect(run: Run) -> Iterable[Finding]:
    direct: list[Evidence] = []
    weak: list[Evidence] = []
    frozen_idle: list[Evidence] = []  # "0 trainable parameters" in a log that shows no training
    #: "None of the inputs have requires_grad=True" alone: torch.utils.checkpoint prints it for any checkpointed
    #: segment whose inputs need no grad - a frozen vision tower or frozen embeddings in front of trainable
    #: layers too (harmless, the maintainers' usual answer). It names the cause only beside a proof that
    #: gradients are missing (the backward error, zero grad_norm, weights that never moved).
    ckpt_warnings: list[Evidence] = []
    first_step: int | None = None
    for ev in run.events:
        text = f"{ev.message} {ev.data.get('exc_message', '')}"
        if ev.kind == "no_grad_fn" or (ev.kind in ("traceback", "error") and NO_GRAD_FN.search(text)):
            direct.append(event_evidence(ev, "backward failed: \"element 0 of tensors does not require grad and does not "
                                             "have a grad_fn\": the loss is not connected to any trainable parameter"))
        elif ev.kind == "no_grad_inputs" or (ev.kind == "warning" and NO_GRAD_INPUTS.search(text)):
            ckpt_warnings.append(event_evidence(ev, "\"None of the inputs have requires_grad=True\": reentrant gradient "
                                                    "checkpointing cut the graph at a segment whose inputs need no grad"))
        elif ev.kind in ("traceback", "error") and NO_GRADIENTS.search(text):
            weak.append(event_evidence(ev, "\"parameter has no gradients\""))
        elif ev.kind == "no_trainable_params" and ev.data.get("variant") == "grad_scaler_no_inf_checks":
            direct.append(event_evidence(ev, "GradScaler.step: \"No inf checks were recorded for this optimizer\": none "
                                             "of the optimizer's parameters received a gradient"))
        elif ev.kind == "no_trainable_params":
            total = ev.data.get("all_params")
            what = f"0 trainable of {total:,} parameters" if isinstance(total, int) and total else "0 trainable parameters"
            frozen_load = _frozen_adapter_load(run)
            (direct if _trains(run) or frozen_load else frozen_idle).append(event_evidence(
                ev, f"{what}: every weight is frozen (an adapter loaded for inference, target modules that matched "
                    "nothing, requires_grad switched off)"))
            if frozen_load:
                direct.append(frozen_load)
        else:
            continue
        if ev.step is not None and first_step is None:
            first_step = ev.step
    direct_events = list(direct)
    direct.extend(_checkpoint_evidence(run))
    curve = _zero_grad(run)
    if curve is not None and not direct and not weak:
        equal = _zero_advantage(run)
        if equal is not None:
            yield equal
            return
    if curve is None and not direct and not weak:
        still = _policy_equals_reference(run)
        if still is not None:
            yield still
            return
    if ckpt_warnings and not direct and not weak and curve is None:
        yield from _checkpoint_warning_only(run, ckpt_warnings)
        return
    if ckpt_warnings:
        direct[len(direct_events):len(direct_events)] = ckpt_warnings[:1]
        direct_events.extend(ckpt_warnings[:1])
    if not direct and not weak and curve is None:
        if frozen_idle:
            yield Finding(
                code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="warning", confidence=0.4,
                title="The model reports 0 trainable parameters", message=frozen_idle[0].detail + ".",
                first_step=None, evidence=frozen_idle[:2], basis="direct", symptom="no_grad",
                remedies=_remedies(run, True))
        return
    evidence = direct + weak + ([curve] if curve else [])
    if direct:
        conf, basis = (0.9 if len(direct) > 1 or curve else 0.85), "direct"
    elif curve is not None:
        conf, basis = 0.7, "inferred"
    else:
        conf, basis = 0.5, "direct"
    onset = nonfinite_onset(run)
    if onset is not None and not direct:
        conf = min(conf, 0.4)  # after NaN weights, "no gradients" is a consequence, not the cause
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=conf,
        title="Trainable parameters receive no gradient",
        message="; ".join(dict.fromkeys(e.detail for e in evidence[:4])) + ".",
        first_step=first_step if first_step is not None else (curve.step if curve else None),
        evidence=evidence, basis=basis, symptom="no_grad" if direct_events else "frozen_weights",
        remedies=_remedies(run, bool(direct_events)),
    )


def _trains(run: Run) -> bool:
    """The run trained (a loss was logged or an optimizer stepped): a model summary saying 0 trainable parameters is
    then the failure; alone (an inference script prints it too) it is only worth a look."""
    return len(points(run, "loss")) > 0 or bool(run.events_of("traceback"))


def _frozen_adapter_load(run: Run) -> Evidence | None:
    """The code loads a saved adapter with PEFT's default ``is_trainable=False``: the adapter is frozen, so a model
    reporting 0 trainable parameters is that load, not an inference script's summary worth only a look."""
    frozen = [f for f in run.config.facts("peft.is_trainable") if f.value is False]
    if not frozen or any(f.value is True for f in run.config.facts("peft.is_trainable")):
        return None
    return config_evidence(run, "peft.is_trainable",
                           f"{frozen[0].original_key or 'PeftModel.from_pretrained()'}: the adapter is loaded frozen, "
                           "for inference")


def _checkpoint_warning_only(run: Run, warnings: list[Evidence]) -> Iterable[Finding]:
    """The checkpointing warning with no proof of missing gradients: a warning, or nothing when gradients flow."""
    gn = points(run, "grad_norm").finite_only()
    moving = gn.select(gn.values > 0.0)
    if len(gn) and len(moving) == len(gn):
        return  # every logged grad_norm is finite and non-zero: the trainable parameters get gradients
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="warning", confidence=0.35,
        title="Gradient checkpointing warned that some segments get no gradient",
        message=(warnings[0].detail + ". Harmless when those segments are frozen (a frozen vision tower or embeddings); "
                 "a failure when they hold the trainable weights (LoRA layers behind frozen embeddings): check that "
                 "grad_norm is non-zero and the adapter weights change between checkpoints."),
        first_step=warnings[0].step, evidence=warnings[:2], basis="direct", symptom="no_grad",
        remedies=_remedies(run, True),
    )


def _optimizer_misses_adapter(run: Run, opt: object) -> Evidence | None:
    """A PEFT checkpoint whose optimizer holds fewer tensors than the adapter has LoRA tensors.

    HF Trainer builds the optimizer from the parameters with requires_grad=True; every LoRA A/B
    tensor of a PEFT model is one of them unless user code froze it. Fewer optimizer parameters
    than LoRA tensors means the LoRA weights were frozen when the optimizer was built.
    """
    if not isinstance(opt, dict):
        return None
    ck = next((c for c in run.checkpoints if c.path == opt.get("checkpoint")), None)
    n = num(opt.get("n_params"))
    if ck is None or ck.adapter is None or not n:
        return None
    lora = [t.name for t in ck.tensors() if ("lora_A" in t.name or "lora_B" in t.name) and t.numel > 0]
    if len(lora) <= n:
        return None
    art = next((f.path for f in ck.files if "optim" in f.path.rsplit("/", 1)[-1]), ck.path)
    return Evidence(art, "optimizer param_groups",
                    f"the optimizer in {ck_label(ck.path)} holds {int(n)} parameter tensor(s) but the adapter has "
                    f"{len(lora)} LoRA tensors: the LoRA weights had requires_grad=False when the optimizer was built "
                    "(a falling loss then comes from the other trained parameters)", ck_step(run, ck.step))


def _remedies(run: Run, from_messages: bool) -> list[str]:
    """Gradient-checkpointing advice first only when the messages or the config point at it."""
    gc = ("With gradient checkpointing on a PEFT/LoRA model, call model.enable_input_require_grads() before "
          "training, or pass gradient_checkpointing_kwargs={'use_reentrant': False}.")
    frozen = ("Load the adapter for training: PeftModel.from_pretrained(model, path, is_trainable=True) (the default "
              "loads it frozen, for inference).")
    grads = ("Check which parameters require grad (model.print_trainable_parameters()): a loop that sets "
             "requires_grad=False over model.base_model / model.parameters() after get_peft_model also freezes the "
             "LoRA weights; build the optimizer after wrapping the model (PEFT/FSDP/DeepSpeed).")
    gc_on = truthy(run.config.get("gradient_checkpointing"))
    out = [gc, grads] if from_messages or gc_on else [grads] + ([gc] if gc_on is not False else [])
    if _frozen_adapter_load(run) is not None:
        out.insert(0, frozen)
    ca = run.checkpoint_analysis or {}
    if num(run.config.get("deepspeed.zero_stage")) == 3 or ca.get("zero3_empty"):
        out.append("Under ZeRO-3, gather parameters when saving (stage3_gather_16bit_weights_on_model_save=true).")
    return out


def _checkpoint_evidence(run: Run) -> list[Evidence]:
    """Checkpoint proof that weights never moved, from ``run.checkpoint_analysis`` (schema in autopsy.checkpoints)."""
    ca = run.checkpoint_analysis or {}
    out: list[Evidence] = []
    trained = (run.last_step or 0) > 0 or any((c.step or 0) > 0 for c in run.checkpoints)
    lb = ca.get("lora_b_all_zero")
    if isinstance(lb, dict) and trained:
        n_b, n_zero = int(num(lb.get("n_lora_b")) or 0), int(num(lb.get("n_all_zero")) or 0)
        step = lb.get("step")
        if n_b and n_zero == n_b and (step is None or step > 0):
            names = [str(x) for x in lb.get("tensors") or []]
            out.append(Evidence(tensor_file(run, lb.get("checkpoint"), names[0] if names else None),
                                f"tensor {names[0] if names else 'lora_B'}",
                                f"{ck_label(lb.get('checkpoint'))}" + (f" (step {step})" if step is not None else "") + ": "
                                f"all {n_b} lora_B tensors are still all zero, their initial value: the adapter "
                                "never received a gradient", ck_step(run, step)))
    un = ca.get("unchanged")
    if isinstance(un, dict):
        n_tr = int(num(un.get("n_trainable_unchanged")) or 0)
        pairs = [p for p in un.get("pairs") or [] if isinstance(p, dict)]
        compared = max((int(num(p.get("compared")) or 0) for p in pairs), default=0)
        if n_tr and compared and n_tr / compared >= NO_STATE_SHARE:
            names = [str(x) for x in un.get("trainable_unchanged") or []]
            first, last = pairs[0], pairs[-1]
            out.append(Evidence(tensor_file(run, last.get("to"), names[0] if names else None),
                                f"tensor {names[0] if names else '?'}",
                                f"{n_tr} of {compared} tensors that should train are bitwise identical in every "
                                f"checkpoint from {ck_label(first.get('from'))} to {ck_label(last.get('to'))} "
                                f"(e.g. {names[0] if names else '?'}): the weights never moved",
                                ck_step(run, last.get("to_step"))))
    opt = ca.get("optimizer")
    short = _optimizer_misses_adapter(run, opt)
    if short is not None:
        out.append(short)
    if isinstance(opt, dict) and not opt.get("stateless"):
        n = num(opt.get("n_params"))
        k = num(opt.get("n_params_without_state"))
        with_state = num(opt.get("n_with_state")) or 0
        # an EMPTY state proves missing gradients only for a stateful optimizer (Adam family) saved after
        # training steps, with no fp16 scaler and no NaN that would have skipped every step instead
        empty_ok = (opt.get("family") == "adam" and (num(opt.get("step")) or 0) > 0 and not ca.get("scaler")
                    and nonfinite_onset(run) is None)
        if n and k and k / n >= NO_STATE_SHARE and (with_state > 0 or empty_ok):
            labels = [x for x in opt.get("params_without_state") or [] if isinstance(x, dict)]
            eg = labels[0] if labels else {}
            eg_txt = f" (e.g. {eg.get('name') or 'param #' + str(eg.get('index'))} in group {eg.get('group')})" if eg else ""
            ck = str(opt.get("checkpoint"))
            out.append(Evidence(f"{ck}/optimizer.pt" if ck != "." else "optimizer.pt", "optimizer state",
                                f"{int(k)} of {int(n)} optimizer parameters have no state in {ck_label(ck)}{eg_txt}"
                                + (f" while {int(with_state)} do" if with_state else "") + ": their .grad was always None",
                                ck_step(run, opt.get("step"))))
    return out


def _policy_equals_reference(run: Run) -> Finding | None:
    """rewards/chosen and rewards/rejected exactly 0 at every log (>= MIN_POLICY_LOGS), the loss at ln 2 and a
    log-prob that is not 0 (all-zero log-probs are empty completions: LEN001's case)."""
    loss = points(run, "loss")
    chosen, rejected = points(run, "rewards/chosen"), points(run, "rewards/rejected")
    if min(len(loss), len(chosen), len(rejected)) < MIN_POLICY_LOGS:
        return None
    if not (bool((chosen.values == 0.0).all()) and bool((rejected.values == 0.0).all())
            and bool((np.abs(loss.values - LN2) <= LN2_TOL).all())):
        return None
    logps = [(m, points(run, m)) for m in ("logps/chosen", "logps/rejected") if run.has_metric(m)]
    moving = [(m, s) for m, s in logps if bool((s.finite & (s.values != 0.0)).any())]
    if not moving:
        return None
    first, last = chosen.point(0), chosen.point(-1)
    ev = [last.evidence(f"rewards/chosen and rewards/rejected exactly 0 at all {len(chosen)} logs "
                        f"(steps {first.step}-{last.step}), the loss {fmt(float(loss.values[-1]))} = ln 2 at every one")]
    name, lp = moving[0]
    p = lp.point(int(np.flatnonzero(lp.finite & (lp.values != 0.0))[-1]))
    ev.append(p.evidence(f"{name} = {fmt(p.value)} at step {p.step}: the log-probs are not 0, so the completions are "
                         "not empty; the policy's equal the reference model's exactly"))
    beta = fact_number(run, "beta")
    beta0 = beta is not None and beta[0] == 0
    if beta0:
        assert beta is not None
        ev.append(fact_evidence(beta[1], "beta = 0: the rewards are beta x the log-ratio, 0 whatever the policy does"))
    remedies = ([] if not beta0 else ["Set beta > 0 (TRL's default is 0.1)."]) + [
        "Check that the policy trains: model.print_trainable_parameters() shows trainable (LoRA) weights, the "
        "optimizer holds them and the learning rate is above 0.",
        "Give the trainer a reference that is a separate, frozen model: with PEFT pass ref_model=None (TRL then uses "
        "the base model with the adapter disabled); never pass the policy itself or a copy that shares its modules "
        "(ref_model=model, copy.deepcopy of a wrapped or PEFT model); load the reference with from_pretrained.",
    ]
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.6 if not beta0 else 0.8,
        title="The policy never moves away from the reference model",
        message=("The preference rewards are exactly 0 at every log and the loss stays at ln 2 = 0.6931, while the "
                 "log-probs themselves are not 0: the policy and the reference model give identical log-probs at every "
                 "step. Either the policy's weights do not train (no trainable parameters, no gradient, learning rate 0) "
                 "or the reference is the policy itself (a shared or deep-copied module)"
                 + ("; here beta = 0 alone explains it" if beta0 else "") + "."),
        first_step=first.step, evidence=ev, basis="inferred", symptom="frozen_weights",
        remedies=remedies)


#: the root cause when every group's completions got the same reward (GRPO/RLOO-style advantages all 0)
ZERO_ADVANTAGE = "zero_advantage_groups"


def _zero_advantage(run: Run) -> Finding | None:
    """A policy-gradient run whose grad_norm is exactly 0 where every group's rewards were equal: TRL's
    ``reward_std`` exactly 0 (or ``frac_reward_zero_std`` 1.0) at >= ZERO_GRAD_LOGS of those logs. The advantages
    (reward minus its group's mean) are then all 0, so the loss and its gradient are 0 by construction: no weight is
    frozen, the reward gives nothing to learn from."""
    if not is_policy_gradient_run(run):
        return None
    gn = points(run, "grad_norm")
    zero_steps = gn.steps[gn.values == 0.0]
    if len(zero_steps) < ZERO_GRAD_LOGS:
        return None
    # (series, its value when every group's rewards are equal, what that says)
    signals = ((points(run, "reward_std"), 0.0, "reward_std = 0: each prompt's completions got the same reward"),
               (points(run, "frac_reward_zero_std"), 1.0, "frac_reward_zero_std = 1.0: every group had zero reward spread"))
    flat = np.zeros(len(zero_steps), dtype=bool)
    for s, equal, _ in signals:
        present, value = s.lookup(zero_steps)
        flat |= present & (value == equal)
    if int(flat.sum()) < ZERO_GRAD_LOGS or flat.sum() < 0.8 * len(zero_steps):
        return None
    first = gn.select(gn.steps == zero_steps[int(np.argmax(flat))])[0]
    ev = [first.evidence(f"grad_norm exactly 0.0 at {len(zero_steps)} logs, with every group's rewards equal at "
                         f"{int(flat.sum())} of them")]
    for s, equal, what in signals:
        hit = s.select(np.isin(s.steps, zero_steps) & (s.values == equal))
        if len(hit):
            ev.append(hit[0].evidence(f"{what} (step {hit[0].step})"))
    reward = points(run, "reward").finite_only()
    same = len(reward) >= ZERO_GRAD_LOGS and float(np.ptp(reward.values)) == 0.0
    if same:
        ev.append(reward[0].evidence(f"reward = {fmt(reward[0].value)} at every one of {len(reward)} logs: the reward "
                                     "function scores every completion alike"))
    return Finding(
        code=CODE, name=SLUG, root_cause=ZERO_ADVANTAGE, severity="error", confidence=0.65,
        title="Every group's completions got the same reward: zero advantages, nothing to learn",
        message=("The gradient is exactly 0 because the policy-gradient signal is: within each group of completions "
                 "of a prompt the rewards are all equal (reward_std 0), so every advantage (reward minus the group's "
                 "mean) is 0 and the loss and its gradient vanish by construction. No weight is frozen; the reward "
                 "gives nothing to learn from" + (f" (the mean reward never moves from {fmt(reward[0].value)})" if same
                                                  else "") + "."),
        first_step=first.step, evidence=ev, basis="inferred", symptom="frozen_weights",
        remedies=["Check the reward functions on a few sampled completions by hand: a format the completions never "
                  "match, an answer extractor that always fails, or a threshold no sample reaches scores every "
                  "completion alike (often 0).",
                  "Give each prompt several completions (num_generations >= 2, larger for hard prompts) with enough "
                  "sampling temperature that they differ, and start from prompts the model solves sometimes (not "
                  "never, not always).",
                  "Add a graded or partial-credit reward so groups are rarely all equal; TRL logs "
                  "frac_reward_zero_std to watch it."])


def _zero_grad(run: Run) -> Evidence | None:
    gn = points(run, "grad_norm")
    zero = np.concatenate(([0], (gn.values == 0.0).astype(np.int8), [0]))
    edges = np.diff(zero)
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    if not starts.size:
        return None
    lengths = ends - starts
    k = int(np.argmax(lengths))  # the first of the longest runs of exact zeros
    best = int(lengths[k])
    if best >= ZERO_GRAD_LOGS:
        best_start = gn[int(starts[k])]
        return best_start.evidence(f"grad_norm is exactly 0.0 for {best} consecutive logs from step {best_start.step}")
    return None
