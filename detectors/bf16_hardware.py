"""bf16 requested on a GPU without bf16 support (pre-Ampere: V100, T4, P100, ...).

What it detects:
    transformers' "ValueError: Your setup doesn't support bf16/gpu. You need torch>=1.10, using
    Ampere GPU with cuda>=11.0" (and its newer wording "... bf16/(npu|gpu|xpu)"), and configs with
    ``bf16``/``deepspeed.bf16.enabled``/``torch_dtype bfloat16`` while the GPU named in the
    artifacts is a Volta/Turing/Pascal card.

Why it matters:
    bfloat16 needs Ampere (compute capability 8.0) or newer. Older cards either refuse at start-up
    (the ValueError) or emulate bf16 slowly; switching only the DeepSpeed config while the
    TrainingArguments still ask for bf16 keeps failing, which is why users get stuck on it.

Evidence used:
    Events ``bf16_unsupported`` and tracebacks; config ``bf16``, ``deepspeed.bf16.enabled``,
    ``torch_dtype``, ``gpu.name``.

Remedies:
    On V100/T4/P100 set ``bf16=False`` and ``fp16=True`` both in the TrainingArguments and in the
    DeepSpeed config (``"bf16": {"enabled": false}``, ``"fp16": {"enabled": "auto"}``), or train in
    fp32; or move to an Ampere-or-newer GPU (A100, A10, L4, RTX 30xx/40xx, H100).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from autopsy.model import Event, Evidence, Finding, Run
from detectors._facts import event_evidence, fact_bool, fact_evidence, fact_str, matching_events

CODE = "HW001"
SLUG = "bf16-unsupported-hardware"
ROOT_CAUSE = "bf16_unsupported_hardware"
NEEDS = ("events", "config")
NEEDS_ANY = True

BF16_ERROR_RE = re.compile(r"(?:setup|device) doesn'?t support bf16|bf16.{0,40}requires? (?:an )?Ampere"
                           r"|[Dd]evice does not support bfloat16(?!.{0,80}(?:fall(?:ing)? ?back|disabling|overriding))"
                           r"|Bfloat16 is only supported on GPUs with compute capability"
                           r"|bf16 mixed precision requires PyTorch|bf16 precision was requested but not available",
                           re.IGNORECASE)
#: Ampere-or-newer NVIDIA parts (compute capability >= 8.0): bf16 is native, so a refusal there is the check's fault
AMPERE_PLUS_RE = re.compile(r"\b(?:A100|A800|A10G?|A30|A40|A6000|A5000|A4000|L4|L40S?|H100|H800|H200|GH200|B100|B200|"
                            r"GB200|RTX ?(?:30|40|50)[5-9]0(?: ?Ti)?|RTX ?A\d000)\b", re.IGNORECASE)
#: pre-Ampere NVIDIA parts (compute capability < 8.0): Volta, Turing, Pascal, Maxwell, Kepler
PRE_AMPERE_RE = re.compile(r"\b(?:V100|T4|P100|P40|P4|K80|K40|M60|M40|Titan ?V|Titan ?RTX|Quadro ?RTX ?\d+"
                           r"|RTX ?20[5-8]0(?: ?Ti| ?SUPER)?|GTX ?1[0-6]\d0(?: ?Ti)?|Tesla ?P\d+)\b", re.IGNORECASE)
#: cuBLAS refusing a bfloat16 GEMM (torch's CUDABlas.cpp ``cublasGemmStridedBatchedEx`` / ``cublasGemmEx`` with
#: ``CUDA_R_16BF`` operands): the card has no bf16 matmul (Maxwell M40, Pascal Titan X: MinerU#1508, SeedVR2#543)
CUBLAS_BF16_RE = re.compile(r"CUBLAS_STATUS_NOT_SUPPORTED when calling `?cublas\w*\([^\n]{0,400}?CUDA_R_16BF")
REFS = ["https://github.com/databrickslabs/dolly/issues/11", "https://github.com/huggingface/transformers/pull/14579"]
REMEDIES = [
    ("On V100/T4/P100 turn bf16 off everywhere: bf16=False, fp16=True in the TrainingArguments AND "
    "\"bf16\": {\"enabled\": false}, \"fp16\": {\"enabled\": \"auto\"} in the DeepSpeed config (or train in fp32)."),
    "Or run on an Ampere-or-newer GPU (A100, A10, L4, RTX 30xx/40xx, H100), where bf16 is native.",
]


def _bf16_requested(run: Run) -> Evidence | None:
    for key in ("bf16", "deepspeed.bf16.enabled"):
        got = fact_bool(run, key)
        if got and got[0]:
            return fact_evidence(got[1], f"{key} = true")
    dtype = fact_str(run, "torch_dtype")
    if dtype and dtype[0].lower().replace("torch.", "") in ("bfloat16", "bf16"):
        return fact_evidence(dtype[1], f"torch_dtype = {dtype[0]}")
    return None


def detect(run: Run) -> Iterable[Finding]:
    errors = [e for e in matching_events(run, "bf16_unsupported", BF16_ERROR_RE)
              if e.kind == "bf16_unsupported" or BF16_ERROR_RE.search(e.message + " " + str(e.data.get("exc_message", "")))]
    gpu = fact_str(run, "gpu.name")
    old_gpu = gpu if gpu and PRE_AMPERE_RE.search(gpu[0]) else None
    requested = _bf16_requested(run)

    new_gpu = gpu if gpu and not old_gpu and AMPERE_PLUS_RE.search(gpu[0]) else None
    if errors and new_gpu:
        # the card has native bf16: the library's own availability check refused it (torchtune also wanted NCCL
        # >= 2.10; accelerate a torch build it could not see bf16 in) - a setup or library fault, not the hardware
        yield Finding(
            code=CODE, name=SLUG, root_cause="framework_bug", severity="error", confidence=0.6,
            title=f"bf16 refused on a GPU that supports it ({new_gpu[0]})",
            message="The run stopped at start-up: " + errors[0].message.strip().splitlines()[-1][:200]
                    + f", but {new_gpu[0]} is Ampere or newer: the library's availability check failed, not the card.",
            first_step=errors[0].step,
            evidence=[event_evidence(errors[0]), fact_evidence(new_gpu[1], f"GPU: {new_gpu[0]} (native bf16)")],
            remedies=["Check what the library's bf16 check needs besides the card: torch.cuda.is_bf16_supported(), "
                      "torch.distributed.is_nccl_available() and torch.cuda.nccl.version() >= (2, 10) (torchtune), a "
                      "CUDA build of torch; upgrade the library if its check is known to be too strict."],
            basis="direct", symptom="config_defect",
        )
        return
    if not errors:
        cublas = [e for e in matching_events(run, "bf16_unsupported", CUBLAS_BF16_RE) if e.kind != "bf16_unsupported"]
        yield from _cublas_bf16(cublas, old_gpu, new_gpu, requested)
        if requested and old_gpu and not cublas:
            yield from _requested_on_old(requested, old_gpu)
        return
    if errors:
        evidence = [event_evidence(e) for e in errors[:2]]
        if requested:
            evidence.append(requested)
        if old_gpu:
            evidence.append(fact_evidence(old_gpu[1], f"GPU: {old_gpu[0]} (pre-Ampere, no bf16)"))
        yield Finding(
            code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.95,
            title="bf16 requested on a GPU that does not support it",
            message="The run stopped at start-up: " + errors[0].message.strip().splitlines()[-1][:200]
                    + (f" (GPU: {old_gpu[0]})" if old_gpu else "") + ".",
            first_step=errors[0].step, evidence=evidence, remedies=list(REMEDIES), references=list(REFS),
            basis="direct", symptom="config_defect",
        )
        return


def _requested_on_old(requested: Evidence, old_gpu: tuple) -> Iterable[Finding]:
    """bf16 asked for on a pre-Ampere card, with no error (yet): a warning."""
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="warning", confidence=0.6,
        title=f"bf16 on a pre-Ampere GPU ({old_gpu[0]})",
        message=f"bf16 is enabled ({requested.detail}) on {old_gpu[0]}, which has no native bf16: expect a "
                "start-up error or slow emulated bf16.",
        first_step=None, evidence=[requested, fact_evidence(old_gpu[1], f"GPU: {old_gpu[0]}")],
        remedies=list(REMEDIES), references=list(REFS), basis="direct", symptom="config_defect",
    )


def _cublas_bf16(hits: list[Event], old_gpu: tuple | None, new_gpu: tuple | None,
                 requested: Evidence | None) -> Iterable[Finding]:
    """A bf16 matmul refused by cuBLAS mid-run (``hits``): no bf16 on the card, unless the card is Ampere or newer."""
    if not hits or new_gpu:
        return  # on an Ampere-or-newer card the refusal is cuBLAS's or the build's: CRASH001 keeps it
    e = hits[0]
    evidence = [event_evidence(e, "cuBLAS: CUBLAS_STATUS_NOT_SUPPORTED for a GEMM on CUDA_R_16BF (bfloat16) operands")]
    if requested:
        evidence.append(requested)
    if old_gpu:
        evidence.append(fact_evidence(old_gpu[1], f"GPU: {old_gpu[0]} (pre-Ampere, no bf16)"))
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.9 if old_gpu else 0.7,
        title="cuBLAS refused a bfloat16 matmul: the GPU has no bf16 support",
        message=("The run died in a bfloat16 matrix multiply that cuBLAS does not support on this GPU"
                 + (f" ({old_gpu[0]})" if old_gpu else "") + ": bf16 GEMMs need an Ampere-or-newer card (compute "
                 "capability 8.0). The model or the autocast ran in bf16 (torch_dtype=bfloat16, bf16=True, or a "
                 "library that picked bf16 itself)."),
        first_step=e.step, evidence=evidence,
        remedies=["Load the model in float16 or float32 (torch_dtype=torch.float16 / float32) and turn bf16 off "
                  "(bf16=False; fp16=True where supported), including in the DeepSpeed config and any library "
                  "option that picks bf16 when torch.cuda.is_bf16_supported() answers loosely.",
                  REMEDIES[1]],
        references=["https://github.com/opendatalab/MinerU/issues/1508"], basis="direct", symptom="config_defect",
    )
