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

import re
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


#: weights of a model's body (embeddings, attention, MLP, numbered layers or blocks): newly initialized, the backbone was
#: not loaded; a head (classifier, score, lm_head, pooler, qa_outputs) newly initialized is what fine-tuning expects
_BACKBONE = re.compile(r"(?:^|\.)(?:embeddings?|embed_tokens|wte|wpe|word_embeddings|encoder|self_attn|attention|attn|mlp|"
                       r"(?:layers?|h|block|blocks)\.\d+)(?:\.|$)")
_HEAD = re.compile(r"(?:^|\.)(?:classifier|pre_classifier|score|lm_head|qa_outputs|pooler|cls|classification_head|"
                   r"heads?|out_proj|logits?)(?:\.|$)")
#: buffers a checkpoint need not hold, computed at build time (rotary frequencies, position ids, GPT-2's causal mask):
#: transformers lists them as newly initialized on some versions, and nothing is lost (PaddleNLP#5720: Llama's inv_freq)
_BUFFER = re.compile(r"inv_freq|rotary_emb|position_ids|masked_bias|\.attn\.bias$|_cached$|num_batches_tracked")
#: modules a model adds on top of the checkpoint it starts from, new by design: cross-attention when an encoder becomes a
#: decoder (EncoderDecoderModel from bert-base: 'bert.encoder.layer.0.crossattention.self.query.weight',
#: transformers#10831, #5988), a Q-Former's query branch ('output_query', 'intermediate_query': OpenMOSS/AnyGPT#19),
#: adapters
_ADDED = re.compile(r"crossattention|cross_attn|crossattn|encoder_attn|_query\.|adapter|lora_")
#: backbone weights newly initialized before the body counts as not loaded
MIN_BACKBONE = 2


def _backbone_not_loaded(run: Run) -> Finding | None:
    """transformers says weights of the model's body (not only a new head) were newly initialized: the checkpoint's names
    did not match the model's (a checkpoint saved from another class or wrapper, a prefix such as ``model.`` or
    ``module.``, another architecture), so the body trains from random weights."""
    for ev in run.events_of("weights_newly_initialized"):
        names = [str(n) for n in ev.data.get("names") or []]
        body = [n for n in names if _BACKBONE.search(n) and not _HEAD.search(n) and not _BUFFER.search(n)
                and not _ADDED.search(n)]
        if len(body) < MIN_BACKBONE:
            continue
        n = int(ev.data.get("n") or len(names))
        return Finding(
            code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.7,
            title=(f"The pretrained body was not loaded: {n} weights of {ev.data.get('model')} newly initialized, "
                   f"{body[0]} among them"),
            message=(f"transformers found no weights in {ev.data.get('path')} for {n} of {ev.data.get('model')}'s "
                     f"parameters, and these include the model's body ({', '.join(body[:3])}{' ...' if len(body) > 3 else ''}),"
                     " not just a new head: the checkpoint's names do not match the model's (saved from another class or "
                     "wrapper, with a prefix such as 'module.' or 'model.', or for another architecture), so those layers "
                     "start from random values and the fine-tune trains from scratch."),
            first_step=ev.step, evidence=[event_evidence(ev, f"{n} weights newly initialized, {len(body)} of them the "
                                                             f"model's body: {', '.join(body[:4])}")],
            basis="direct", symptom="config_defect",
            remedies=["Load the checkpoint with the class it was saved from (AutoModel... of the same architecture), or "
                      "strip the wrapper's prefix from its state dict keys ('module.', 'model.') before loading.",
                      "Check the load report: only the new head (classifier, score) should be newly initialized; "
                      "from_pretrained(..., output_loading_info=True) lists missing and unexpected keys."],
        )
    return None


def detect(run: Run) -> Iterable[Finding]:
    mismatch = _shape_mismatch(run)
    if mismatch is not None:
        yield mismatch
    body = _backbone_not_loaded(run)
    if body is not None:
        yield body
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
