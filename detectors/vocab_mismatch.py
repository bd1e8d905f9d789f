"""Vocabulary mismatch: token ids beyond the model's embedding table.

What it detects:
    ``IndexError: index out of range in self`` raised from an embedding lookup (CPU), the CUDA
    device-side assert ``srcIndex < srcSelectDimSize`` (the GPU form of the same lookup), a
    tokenizer whose vocabulary is larger than the model's ``vocab_size``, and transformers' CTC heads
    refusing labels (``ValueError: Label values must be <= vocab_size: 29``: the labels were encoded
    with a larger character vocabulary than the head was built with), and a class label beyond a classifier's outputs
    (``IndexError: Target 5 is out of bounds.``, the CUDA ``Assertion `t >= 0 && t < n_classes` failed``): the
    classification form of the same mismatch.

Why it matters:
    Tokens added to the tokenizer (pad, chat-template or special tokens) without
    ``model.resize_token_embeddings(len(tokenizer))``, or a tokenizer from another model, produce
    ids the embedding cannot index. On GPU the failure surfaces as an opaque "device-side assert
    triggered" that later CUDA calls repeat, far from the cause.

Evidence used:
    Events ``index_out_of_range``, ``traceback``, ``error``; config ``vocab_size``,
    ``tokenizer.vocab_size``.

Remedies:
    Call ``model.resize_token_embeddings(len(tokenizer))`` after adding tokens (and save the
    resized model); load the tokenizer that belongs to the checkpoint; check ``max(input_ids) <
    vocab_size`` on the data. If the index is a position (sequence longer than
    ``max_position_embeddings``), truncate to the model's context length instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from autopsy.model import Evidence, Finding, Run
from detectors._common import CLASS_LABEL_RE, TF_GATHER_RE
from detectors._facts import event_evidence, fact_evidence, fact_number, matching_events

CODE = "VOCAB001"
SLUG = "vocab-mismatch"
ROOT_CAUSE = "vocab_mismatch"
NEEDS = ("events", "config")
NEEDS_ANY = True

#: transformers' CTC heads (Wav2Vec2/HuBERT/WavLM/Data2VecAudio/SEW/UniSpeech/Wav2Vec2-BERT ...ForCTC.forward) check the
#: labels first: ``raise ValueError(f"Label values must be <= vocab_size: {self.config.vocab_size}")``
CTC_LABELS_RE = re.compile(r"Label values must be <= vocab_size: (\d+)")
INDEX_RE = re.compile(r"index out of range in self|srcIndex < srcSelectDimSize|" + TF_GATHER_RE.pattern + "|"
                      + CTC_LABELS_RE.pattern + "|"
                      + CLASS_LABEL_RE.pattern, re.IGNORECASE)
EMBEDDING_RE = re.compile(r"embedding|embed_tokens|wte\b|word_embeddings|srcIndex < srcSelectDimSize", re.IGNORECASE)
POSITION_RE = re.compile(r"position|wpe\b|max_position_embeddings", re.IGNORECASE)
REFS = ["https://github.com/huggingface/transformers/issues/11102", "https://github.com/huggingface/transformers/issues/12763",
        "https://github.com/huggingface/transformers/issues/30211"]
REMEDIES = [
    "After adding tokens call model.resize_token_embeddings(len(tokenizer)) and save the resized model with the tokenizer.",
    "Load the tokenizer that belongs to the checkpoint; assert max(input_ids) < model.config.vocab_size on the data.",
    "On GPU, rerun one step with CUDA_LAUNCH_BLOCKING=1 (or on CPU) to get the exact failing lookup.",
]


def detect(run: Run) -> Iterable[Finding]:
    crashes = []
    for e in matching_events(run, "index_out_of_range", INDEX_RE):
        text = e.message + " " + " ".join(str(v) for v in e.data.values())
        if INDEX_RE.search(text):  # a bare "device-side assert triggered" can be any CUDA assert
            crashes.append((e, text))
    model_v = fact_number(run, "vocab_size")
    tok_v = fact_number(run, "tokenizer.vocab_size")
    too_big = bool(model_v and tok_v and tok_v[0] > model_v[0])

    evidence: list[Evidence] = []
    if too_big:
        assert model_v and tok_v
        evidence.append(fact_evidence(tok_v[1], f"tokenizer vocabulary = {int(tok_v[0])}"))
        evidence.append(fact_evidence(model_v[1], f"model vocab_size = {int(model_v[0])}: ids "
                                                  f"{int(model_v[0])}..{int(tok_v[0]) - 1} have no embedding row"))
    ctc = next(((e, m) for e, text in crashes if (m := CTC_LABELS_RE.search(text))), None)
    if ctc is not None:
        e, m = ctc
        yield Finding(
            code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.85,
            title="Label ids exceed the CTC head's vocabulary",
            message=(f"The CTC model refused a batch whose label ids reach its vocab_size {m[1]}: the labels were encoded "
                     "with a larger vocabulary (the tokenizer's vocab.json) than the head was built with: "
                     f"{e.message.strip().splitlines()[-1][:160]}."),
            first_step=e.step, evidence=[event_evidence(e)] + evidence, basis="direct", symptom="crash",
            remedies=["Build the CTC head from the processor that encodes the labels: from_pretrained(..., "
                      "vocab_size=len(processor.tokenizer), pad_token_id=processor.tokenizer.pad_token_id); a script "
                      "made for another language keeps that language's vocab_size.",
                      "Rebuild vocab.json from this dataset's own transcripts (every character of the training text) and "
                      "encode the labels again; check max(label ids) < vocab_size on the data before training."],
            references=["https://huggingface.co/blog/fine-tune-w2v2-bert"],
        )
        return
    cls = next(((e, m) for e, text in crashes if (m := CLASS_LABEL_RE.search(text))), None)
    if cls is not None:
        e, m = cls
        label = f"label {m[1]}" if m[1] else "a label"
        yield Finding(
            code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.85,
            title=f"A class {label.replace('a label', 'label')} outside the classifier's range",
            message=(f"The loss refused {label}: cross-entropy/NLL takes class indices 0..C-1 for a head with C outputs, "
                     + ("and a negative label is never one (an unmapped class, or -1 for 'none' where the loss's "
                        "ignore_index is -100)" if m[1] and m[1].startswith("-") else
                        "and the data holds one the head does not have (the head built with fewer classes than the "
                        "labels, 1-based labels, or segmentation masks read as pixel values such as 255)")
                     + f": {e.message.strip().splitlines()[-1][:160]}."),
            first_step=e.step, evidence=[event_evidence(e)] + evidence, basis="direct", symptom="crash",
            remedies=["Check the labels against the head: min(label) >= 0 and max(label) < num_classes (num_labels for a "
                      "transformers classifier); build the head with the dataset's number of classes, map 1-based labels "
                      "to 0-based, or set ignore_index to the value that marks 'no label'.",
                      "Segmentation masks: load them as class indices (nearest-neighbour resize, no normalisation), "
                      "e.g. mask // 255 for a 0/255 binary mask, not as greyscale pixel values.",
                      "On GPU, rerun one step with CUDA_LAUNCH_BLOCKING=1 (or on CPU) to see the offending label."],
        )
        return
    long_seq = _too_long_sequences(run, crashes)
    if long_seq is not None and not too_big:
        yield long_seq
        return
    if crashes:
        e, text = crashes[0]
        in_embedding = bool(EMBEDDING_RE.search(text))
        positional = bool(POSITION_RE.search(text)) and not too_big
        evidence.insert(0, event_evidence(e))
        n = sum(max(1, x.count) for x, _ in crashes)
        if positional:
            confidence, what = 0.5, "a position id beyond max_position_embeddings or a token id beyond the vocabulary"
        elif in_embedding or too_big:
            confidence, what = 0.9, "a token id beyond the model's embedding table"
        else:
            confidence, what = 0.65, "an index beyond a lookup table, most often a token id beyond the embedding"
        yield Finding(
            code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=confidence,
            title="Token ids exceed the model's vocabulary" if not positional else "Index out of range in an embedding",
            message=f"The run crashed on {what} ({n} report(s)): {e.message.strip().splitlines()[-1][:160]}"
                    + (f"; the tokenizer has {int(tok_v[0])} tokens but the model {int(model_v[0])}" if too_big and tok_v and model_v else "")
                    + ".",
            first_step=e.step, evidence=evidence, remedies=list(REMEDIES) + (
                ["Truncate inputs to max_position_embeddings (max_length/cutoff_len)."] if positional else []),
            references=list(REFS), basis="direct" if (in_embedding or too_big) else "inferred", symptom="crash",
        )
        return
    if too_big:
        assert model_v and tok_v
        yield Finding(
            code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="warning", confidence=0.6,
            title="Tokenizer vocabulary larger than the model's embedding",
            message=f"The tokenizer has {int(tok_v[0])} tokens but the model's vocab_size is {int(model_v[0])}: any of the "
                    f"{int(tok_v[0] - model_v[0])} extra ids in the data will crash the embedding lookup.",
            first_step=None, evidence=evidence, remedies=list(REMEDIES), references=list(REFS), basis="direct", symptom="config_defect",
        )


#: torch's broadcast error when a sequence is longer than the absolute position embeddings it is added to ("The size of
#: tensor a (944055) must match the size of tensor b (512) at non-singleton dimension 1")
SIZE_MATCH_RE = re.compile(r"The size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)")


def _too_long_sequences(run: Run, crashes: list) -> Finding | None:
    """The tokenizer warned that a text is longer than model_max_length, and the run then died on an index out of range
    in a lookup (the position embedding) or on a tensor-size mismatch against that length: the sequences were not
    truncated, so position ids run past max_position_embeddings. Not a vocabulary mismatch."""
    warned = run.events_of("sequence_too_long")
    if not warned:
        return None
    longest = max(warned, key=lambda w: w.data.get("length") or 0)
    limit = longest.data.get("max")
    died = crashes[0][0] if crashes else None
    if died is None:
        for ev in run.events_of("traceback"):
            m = SIZE_MATCH_RE.search(f"{ev.message} {ev.data.get('exc_message', '')}")
            if m is not None and limit is not None and int(m[2]) == limit:
                died = ev
                break
    if died is None:
        return None
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.8,
        title=f"Sequences longer than the model's maximum ({longest.data.get('length')} > {limit} tokens) ran past its "
              "position embeddings",
        message=(f"The tokenizer warned that a text encodes to {longest.data.get('length')} tokens, more than the model's "
                 f"maximum of {limit}, and the run then died on an index or size the positions exceed: "
                 f"{died.message.strip().splitlines()[-1][:160]}. The inputs were not truncated, so position ids past "
                 f"{limit} have no row in the position embeddings (not a token id beyond the vocabulary)."),
        first_step=died.step, evidence=[event_evidence(longest), event_evidence(died)], basis="direct", symptom="crash",
        remedies=[f"Truncate when tokenizing: tokenizer(text, truncation=True, max_length={limit}) (or the trainer's "
                  "max_length / max_seq_length / cutoff_len set to it).",
                  "For long documents, split them into windows of at most that length (a stride/overlap for QA) "
                  "instead of feeding them whole; do not raise model_max_length beyond the model's "
                  "max_position_embeddings."],
        references=list(REFS),
    )
