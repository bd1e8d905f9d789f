"""LoRA task type that does not match a reward/classification model.

What it detects:
    A sequence-classification model (``*ForSequenceClassification``, ``num_labels``, or the
    reward trainer's ``accuracy``/``margin``/``*_reward`` metrics) trained with a LoRA adapter
    whose ``task_type`` is not ``SEQ_CLS``, so the ``score`` head is neither in
    ``modules_to_save`` nor in the saved adapter tensors; PEFT's crash when ``CAUSAL_LM`` wraps a
    classification model ("'LlamaForSequenceClassification' object has no attribute
    'prepare_inputs_for_generation'"); TRL's script warning "You are using a `task_type` that is
    different than `SEQ_CLS` for PEFT. This will lead to silent bugs".

Why it matters:
    With ``task_type="SEQ_CLS"`` PEFT adds ``classifier``/``score`` to ``modules_to_save``: the
    freshly initialised reward head is trained and saved. With any other task type the head
    stays frozen at its random init and is missing from the adapter, so the reward model scores
    noise, and reloading the adapter gives yet another random head.

Evidence used:
    Config ``lora.task_type``, ``lora.modules_to_save``, ``architectures``/``num_labels`` when
    recorded; PEFT ``adapter_config.json`` and adapter tensor names in checkpoints; reward-trainer
    series; ``traceback``/``warning`` events.

Remedies:
    ``LoraConfig(task_type="SEQ_CLS", ...)`` (TRL scripts: ``--lora_task_type SEQ_CLS``), or add the
    head to ``modules_to_save=["score"]``; retrain, since the saved adapter has no trained head.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from autopsy.model import Evidence, Finding, Run
from detectors._facts import event_evidence, fact_evidence, fact_number, matching_events

CODE = "LORA001"
SLUG = "lora-task-type-mismatch"
ROOT_CAUSE = "lora_task_type_mismatch"
NEEDS = ("config", "events", "checkpoints", "scalars")
NEEDS_ANY = True

#: PEFT: PeftModelForCausalLM.__init__ reads base_model.prepare_inputs_for_generation (REAL, peft 0.21.2)
CAUSAL_ON_CLS_RE = re.compile(r"ForSequenceClassification'? object has no attribute '?prepare_inputs_for_generation")
#: TRL example scripts (reward_modeling.py) before 1.x
TASK_TYPE_WARNING_RE = re.compile(r"task_type`? that is different than `?SEQ_CLS", re.IGNORECASE)
#: classification heads PEFT's SEQ_CLS adds to modules_to_save, and value heads of reward models
HEAD_RE = re.compile(r"(?:^|\.)(?:score|classifier|v_head)(?:\.|$)")
#: TRL 1.x RewardTrainer logs these; SFT/DPO do not
REWARD_METRICS = ("margin", "min_reward", "mean_reward", "max_reward")
REFS = ["https://github.com/huggingface/trl/issues/1379", "https://github.com/huggingface/peft/issues/1070",
        "https://github.com/hiyouga/LlamaFactory/issues/2724"]


def _classification(run: Run) -> list[Evidence]:
    ev: list[Evidence] = []
    for key in ("architectures", "model.architectures"):
        for f in run.config.facts(key):
            if "ForSequenceClassification" in str(f.value):
                ev.append(fact_evidence(f, f"architectures = {f.value}"))
                return ev
    got = fact_number(run, "num_labels")
    if got and got[0] == 1:
        ev.append(fact_evidence(got[1], "num_labels = 1 (a scalar reward head)"))
    seen = [m for m in REWARD_METRICS if run.has_metric(m) or run.has_metric(f"eval_{m}")]
    if seen:
        ev.append(Evidence(run.series_sources.get(seen[0], run.series_sources.get(f"eval_{seen[0]}", "scalars")),
                           f"key {seen[0]}", f"reward-trainer metrics logged: {', '.join(seen)}"))
    return ev


def _adapter(run: Run) -> tuple[str | None, list[str] | None, list[str] | None, str | None]:
    """task_type, modules_to_save, adapter tensor names, where - from config facts or the last PEFT checkpoint."""
    task = run.config.fact("lora.task_type")
    mts = run.config.fact("lora.modules_to_save")
    where = task.source if task else None
    task_type = str(task.value) if task and task.value is not None else None
    modules = list(mts.value) if mts and isinstance(mts.value, (list, tuple)) else None
    names: list[str] | None = None
    for ck in reversed(run.checkpoints):
        if ck.adapter:
            if task_type is None and ck.adapter.get("task_type") is not None:
                task_type, where = str(ck.adapter.get("task_type")), f"{ck.path}/adapter_config.json"
            if modules is None and isinstance(ck.adapter.get("modules_to_save"), (list, tuple)):
                modules = list(ck.adapter["modules_to_save"])
        tensors = [t.name for t in ck.tensors()]
        if ck.adapter is not None or any("lora_" in n for n in tensors):
            names = tensors
            break
    return task_type, modules, names, where


def detect(run: Run) -> Iterable[Finding]:
    crash = matching_events(run, "traceback", CAUSAL_ON_CLS_RE)
    crash = [e for e in crash if CAUSAL_ON_CLS_RE.search(e.message + " " + str(e.data.get("exc_message", "")))]
    warned = matching_events(run, "warning", TASK_TYPE_WARNING_RE)
    warned = [e for e in warned if TASK_TYPE_WARNING_RE.search(e.message)]
    cls_ev = _classification(run)
    task_type, modules, names, where = _adapter(run)
    head_saved = bool(modules and any(HEAD_RE.search("." + m) for m in modules)) or \
        bool(names and any(HEAD_RE.search(n) for n in names if "lora_" not in n))

    evidence: list[Evidence] = []
    if crash:
        evidence.extend(event_evidence(e) for e in crash[:2])
        evidence.extend(cls_ev)
        yield Finding(
            code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.95,
            title="LoRA task_type CAUSAL_LM on a sequence-classification model",
            message="PEFT wrapped a *ForSequenceClassification model as a causal LM and crashed: "
                    f"{crash[0].message.strip().splitlines()[-1][:200]}",
            first_step=crash[0].step, evidence=evidence, remedies=_remedies(), references=list(REFS), basis="direct", symptom="crash",
        )
        return

    mismatch = task_type is not None and task_type.upper() != "SEQ_CLS"
    if not warned and not (cls_ev and (mismatch or (names is not None and not head_saved))):
        return
    if warned:
        evidence.extend(event_evidence(e) for e in warned[:1])
    evidence.extend(cls_ev)
    if task_type is not None:
        evidence.append(Evidence(where or "config", "key task_type", f"adapter task_type = {task_type}"))
    if names is not None:
        evidence.append(Evidence(where or "checkpoint", "adapter tensors",
                                 f"{len(names)} adapter tensors, classification head "
                                 f"{'present' if head_saved else 'absent (no score/classifier tensor)'}"))
    if modules is not None or names is not None:
        evidence.append(Evidence(where or "config", "key modules_to_save", f"modules_to_save = {modules}"))

    if head_saved:
        severity, confidence = "warning", 0.5  # the head is trained and saved; only the task type is off
        msg = (f"Reward/classification model with LoRA task_type {task_type}; the score head is in "
               "modules_to_save, so it is trained, but SEQ_CLS is the supported setting.")
    else:
        # severity is the damage: a saved adapter without the head is a reward model with a random head
        head_missing = names is not None and not head_saved
        severity, confidence = (("error", 0.85 if head_missing else 0.8) if (mismatch or warned or head_missing) and cls_ev
                                else ("warning", 0.55))
        msg = (f"Reward/classification model trained with LoRA task_type {task_type or 'unset'}: the score head is "
               "not in modules_to_save nor in the adapter tensors, so it stayed at its random init and was not saved.")
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity=severity, confidence=confidence,
        title="LoRA task_type is not SEQ_CLS for a reward/classification model",
        message=msg, first_step=None, evidence=evidence, remedies=_remedies(), references=list(REFS),
        basis="direct", symptom="config_defect",
    )


def _remedies() -> list[str]:
    return [("Use LoraConfig(task_type='SEQ_CLS', ...) (TRL scripts: --lora_task_type SEQ_CLS) so PEFT trains and "
            "saves the score head."),
            "Or list the head explicitly: modules_to_save=['score'] (the head's module name in your model).",
            "Retrain: an adapter saved without the head has no trained reward head to recover."]
