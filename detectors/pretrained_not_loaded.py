"""Pretrained weights not loaded: the checkpoint the run was to start from was not found, so it trains from scratch.

What it detects:
    A trainer saying the checkpoint it was told to start from is not there, and going on without it: fairseq's
    ``checkpoint_utils.load_checkpoint`` ("| no existing checkpoint found pretrained/roberta.large/model.pt", later
    "No existing checkpoint found ...") and pytorch/examples' ``--resume`` ("=> no checkpoint found at 'x.pth'").
    fairseq prints the same line at the start of every fresh run for its own resume file (``checkpoint_last.pt``
    under ``--save-dir``), which is no failure: only a file of another name, the one ``--restore-file`` pointed to
    (a pretrained model for fine-tuning), is reported.

Why it matters:
    Nothing crashes and the loss falls a little: the model learns what it can from random weights. A RoBERTa or
    BART fine-tune then ends at chance accuracy (FreeLB#12: RTE at 0.525) and the thread blames the hyperparameters.

Evidence used:
    Event ``checkpoint_not_found`` (the path); the ``accuracy``/``eval_accuracy`` and loss series for what followed.

Remedies:
    Point the run at the file that exists (fairseq ``--restore-file`` with an absolute path: older fairseq joins a
    relative one to ``--save-dir``, ``os.path.join(args.save_dir, args.restore_file)``), and check the log says it was
    loaded ("loaded checkpoint ... (epoch 0 @ 0 updates)") before the first update.
"""

from __future__ import annotations

from collections.abc import Iterable

from autopsy.model import Finding, Run
from detectors._common import event_evidence, fmt, points

CODE = "PRE001"
SLUG = "pretrained-not-loaded"
ROOT_CAUSE = "pretrained_weights_not_loaded"
NEEDS = ("events",)

#: resume files a trainer looks for at every fresh start (fairseq's --restore-file default, Lightning's last.ckpt): not
#: finding them means "nothing to resume", not "the pretrained model is missing"
RESUME_FILES = frozenset({"checkpoint_last.pt", "last.ckpt", "last.pt", "latest.pt", "checkpoint_latest.pt",
                          "last.pth", "latest.pth"})


def _name(path: str) -> str:
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def _shape_mismatch(run: Run) -> Finding | None:
    """torch's ``size mismatch for X: copying a param with shape ... from checkpoint, the shape in current model is ...``
    with no exception read around it (a paste of the message's body, or mmcv/mmengine's ``load_state_dict``, which
    prints the same words as a warning and goes on): the checkpoint was made for another architecture than the one
    built (Res2Net-maskrcnn#1: Res2Net-50 weights into a ResNet-50 config, 896 against 512 channels). A traceback
    beside it is CRASH001's to explain."""
    evs = [e for e in run.events_of("error") if e.data.get("variant") == "state_dict_size_mismatch"]
    if not evs or run.events_of("traceback"):
        return None
    ev = evs[0]
    name, ck, mod = ev.data.get("param"), ev.data.get("checkpoint_shape"), ev.data.get("model_shape")
    n = sum(e.count for e in evs)
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.55,
        title=f"The checkpoint does not fit the model built: {name} is {ck} in the checkpoint, {mod} in the model"
              + (f" ({n} tensors)" if n > 1 else ""),
        message=(f"{n} tensor{'s' if n > 1 else ''} of the checkpoint {'have' if n > 1 else 'has'} another shape than the "
                 f"model's (first: {name}, {ck} against {mod}): the weights were made for another architecture (width, "
                 "depth, groups, number of classes) than the config builds. torch's load_state_dict refuses them, "
                 "strict or not, so the run stops there; loaders that only warn (mmcv/mmengine) skip them and those "
                 "layers train from their random initial values."),
        first_step=ev.step, evidence=[event_evidence(e) for e in evs[:3]], basis="direct", symptom="config_defect",
        remedies=["Build the model the checkpoint was made for: use the config that ships with those weights (the same "
                  "backbone variant, width, groups and number of classes), or take the checkpoint made for this config.",
                  "For a new number of classes only, drop the head's tensors from the state dict before loading (or let "
                  "the framework re-initialise the head) and keep the rest."],
    )


def detect(run: Run) -> Iterable[Finding]:
    mismatch = _shape_mismatch(run)
    if mismatch is not None:
        yield mismatch
    evs = [e for e in run.events_of("checkpoint_not_found")
           if e.data.get("path") and _name(str(e.data["path"])) not in RESUME_FILES]
    if not evs:
        return
    ev = evs[0]
    path = str(ev.data["path"])
    fairseq = ev.data.get("form") == "fairseq"
    evidence = [event_evidence(ev, f"\"{' '.join(ev.message.split())[:200]}\": the checkpoint to start from is not there")]
    acc = next((points(run, m).finite_only() for m in ("eval_accuracy", "eval_acc", "accuracy", "acc")
                if len(points(run, m).finite_only())), None)
    if acc is not None:
        best = acc[acc.argmax()]
        evidence.append(best.evidence(f"best accuracy {fmt(best.value)} at step {best.step}, after training without it"))
    what = "the pretrained model named by --restore-file" if fairseq else "the checkpoint named by --resume"
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.75 if fairseq else 0.55,
        title=f"The checkpoint to start from was not found ({_name(path)}): the run trained from initial weights",
        message=(f"the trainer looked for {what}, {path}, found nothing there and went on from the model's "
                 "initial (random) weights: a fine-tune that starts from scratch learns little and ends near chance, "
                 "while every setting looks right."),
        first_step=ev.step, evidence=evidence, basis="direct", symptom="config_defect",
        remedies=[("Give --restore-file the checkpoint's absolute path (older fairseq joins a relative one to --save-dir) "
                   "and check the log says it was loaded before the first update (\"loaded checkpoint ... (epoch 0 @ 0 "
                   "updates)\")." if fairseq else
                   "Give the checkpoint's full path and check the log says it was loaded (\"=> loaded checkpoint ...\") "
                   "before the first update."),
                  "Rerun from the pretrained weights: results from this run are those of a model trained from scratch."],
    )
