"""Environment facts: library versions, Python, CUDA/cuDNN, GPU names and counts.

Framework bugs are keyed on versions (a ZeRO-2 ``overlap_comm`` NaN on some DeepSpeed releases,
the gradient-accumulation loss bug of transformers 4.46), and users paste their environment in
many shapes. This module turns each shape into the same facts:

``version.<name>``
    the package name lower-cased, ``-``/``.``/spaces -> ``_`` (``version.flash_attn``,
    ``version.ms_swift``); ``pytorch`` is ``torch``. Values are strings as printed
    (``2.5.0+cu124``) so that ``packaging.version`` can compare them.
``python.version``, ``cuda.version`` (the CUDA torch was built with / runs on),
``cuda.driver_version`` (the highest CUDA the driver supports: ``nvidia-smi``'s "CUDA Version"),
``cuda.nvcc_version``, ``cudnn.version``, ``nvidia.driver_version``, ``gpu.name``, ``gpu.count``,
``platform``.

Shapes read (formats checked against the printing code: transformers ``cli/system.py``
(``- `transformers` version: ...``), accelerate ``commands/env.py``, DeepSpeed ``env_report.py``
(``torch version .... 2.1.1+cu121``), torch ``collect_env`` (``PyTorch version:``, ``GPU 0: ...``,
``[pip3] torch==...``), ``nvidia-smi`` tables and ``-L``, ``pip list`` / ``pip freeze`` /
``conda list``, sglang/vllm env dumps (``transformers: 5.3.0``), ``torch.__version__`` prints and
REPL echoes, LLaMA-Factory ``- GPU number: 8``). A bare ``name value`` or ``name: value`` line is
read only for a known ML package or inside a ``pip list``/``conda list`` table, so metric lines
(``loss: 0.5``) never become versions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Emit = Callable[[str, Any, int, str], None]

#: lines after the last GPU row before a GPU table counts as ended (nvidia-smi prints 3 more
#: lines per GPU plus a separator between rows)
GPU_TABLE_GAP = 6

#: packages whose versions are recorded from listings (pip list/freeze, conda list, requirements pins,
#: ``name: 1.2.3`` dumps): the ML stack where framework bugs live. A full ``pip list`` of 300 packages
#: would otherwise bury them; an explicit ``<name> version: x`` line is recorded for any name.
KNOWN_PACKAGES = frozenset({
    "torch", "pytorch", "transformers", "trl", "peft", "deepspeed", "accelerate", "flash_attn", "flash_attention",
    "vllm", "ms_swift", "llamafactory", "llama_factory", "bitsandbytes", "xformers", "triton", "datasets",
    "tokenizers", "safetensors", "huggingface_hub", "numpy", "liger_kernel", "unsloth", "unsloth_zoo", "axolotl",
    "verl", "openrlhf", "megatron_core", "nemo_toolkit", "apex", "torchvision", "torchaudio", "lightning",
    "pytorch_lightning", "mmengine", "mmcv", "mmdet", "sglang", "flashinfer", "flashinfer_python", "jax",
    "jaxlib", "tensorflow", "keras", "diffusers", "optimum", "auto_gptq", "autoawq", "torchtune", "torchao",
    "fairseq", "detectron2", "ultralytics", "timm", "modelscope", "nccl", "wandb", "mlflow", "tensorboard",
    "sentencepiece", "einops", "ray", "swift", "cudatoolkit", "nvidia_nccl_cu11", "nvidia_nccl_cu12",
    "megatron_lm", "nemo", "torchtitan", "colossalai", "fsdp", "opencompass", "evaluate", "scipy", "pandas",
    "onnxruntime", "tensorrt", "tensorrt_llm", "liger-kernel", "mamba_ssm", "causal_conv1d",
})
#: names (normalised) whose version is not a ``version.<name>`` fact
SPECIAL: dict[str, str] = {
    "python": "python.version", "cpython": "python.version",
    "cuda": "cuda.version", "cuda_runtime": "cuda.version", "torch_cuda": "cuda.version",
    "cuda_used_to_build_pytorch": "cuda.version", "pytorch_cuda": "cuda.version",
    "nvcc": "cuda.nvcc_version", "cudnn": "cudnn.version", "nvidia_driver": "nvidia.driver_version",
    "driver": "nvidia.driver_version", "cuda_driver": "nvidia.driver_version",
    "deepspeed_info": "version.deepspeed", "cudatoolkit": "cuda.version",
}
#: pip distributions that carry the CUDA/cuDNN runtime (``nvidia-cudnn-cu12 9.1.0.70``)
_NV_WHEELS = (re.compile(r"nvidia_cudnn_cu\d+$"), "cudnn.version"), (re.compile(r"nvidia_cuda_runtime_cu\d+$"), "cuda.version")
_ALIASES = {"pytorch": "torch", "flash_attention": "flash_attn", "llama_factory": "llamafactory", "swift": "ms_swift"}

_VER = r"v?(\d+(?:\.\d+)+(?:[.+\-]?[A-Za-z0-9]+)*)"
_VERSION_ONLY = re.compile(r"^v?\d+(?:\.\d+)+(?:[.+\-]?[A-Za-z0-9]+)*$")
_NAME = r"[A-Za-z][A-Za-z0-9._\-]*"
#: ``name==1.2.3`` (pip freeze, requirements pins, ``[pip3] torch==2.1.0``, ``pip install x==1.2``)
_PIN = re.compile(r"(?:^|[\s\"'`(\[\]])(" + _NAME + r")(?:\[[\w,\-]+\])?\s*===?\s*" + _VER)
#: ``- `transformers` version: 4.46.0``, ``PyTorch version (GPU?): 2.5.0+cu124 (True)``, ``Python version: 3.10``
_NAMED_VERSION = re.compile(
    r"^[-*\s]*`?([A-Za-z][\w.\- ]{0,40}?)`?\s+version\b(?:\s*\([^)]*\))?\s*[:=]\s*" + _VER)
#: ``transformers version 4.46.0``, ``torch==`` spelled in prose by known packages only
_PROSE_VERSION = re.compile(r"(?i)\b(" + _NAME + r")`?\s+version\s*(?:\([^)]*\))?\s*[:=]?\s*" + _VER)
#: ``transformers: 5.3.0``, ``PyTorch: 2.9.1+cu129`` (sglang/vllm env dumps)
_COLON = re.compile(r"^[-*\s]*`?(" + _NAME + r")`?\s*:\s*" + _VER + r"(?:\s|$|,|\()")
#: table row ``torch   2.1.0+cu121   [build  channel | path]`` (pip list, conda list)
_ROW = re.compile(r"^(" + _NAME + r")\s{2,}" + _VER + r"(?:\s+(\S+))?")
_PIP_HEADER = re.compile(r"^Package\s+Version\b")
_CONDA_HEADER = re.compile(r"^#\s*Name\s+Version\s+Build")
#: ds_report ``torch cuda version ............... 12.1`` (also ``['12.1']`` in newer reports)
_DOTS = re.compile(r"^([a-z][\w ./()]*?)\s\.{3,}\s+\[?'?" + _VER)
#: ``torch.__version__`` with its value on the same line, ``torch.version.cuda``, ``cudnn.version()``
_DUNDER = re.compile(r"\b([A-Za-z_]\w*)\.__version__\)?\s*(?:[:=,]|->|is)?\s*['\"]?" + _VER)
_DUNDER_ASKED = re.compile(r"\b([A-Za-z_]\w*)\.__version__\)?\s*$")
_CUDA_ASKED = re.compile(r"torch\.version\.cuda\)?\s*$")
_CUDNN_ASKED = re.compile(r"cudnn\.version\(\)\)?\s*$")
_TORCH_CUDA = re.compile(r"torch\.version\.cuda\)?\s*(?:[:=,]|->)?\s*['\"]?(\d+\.\d+)")
_CUDNN_CALL = re.compile(r"cudnn\.version\(\)\)?\s*(?:[:=,]|->)?\s*['\"]?(\d{3,6})")
_BARE_VALUE = re.compile(r"^['\"]?(v?\d+(?:\.\d+)*(?:[.+\-]?[A-Za-z0-9]+)*)['\"]?$")
#: ``| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2 |``
_SMI_HEAD = re.compile(r"NVIDIA-SMI\s+([\d.]+)\s+Driver Version:\s*([\d.]+)(?:\s+CUDA Version:\s*([\d.]+))?")
#: ``|   0  NVIDIA A100-SXM4-80GB          On  | 00000000:07:00.0 Off |``
_SMI_ROW = re.compile(r"^\|\s+(\d+)\s+(.+?)\s+(?:On|Off)\s+\|\s*[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:")
#: ``GPU 0: NVIDIA A100-SXM4-80GB (UUID: ...)`` (``nvidia-smi -L``, collect_env), ``GPU 0,1,2: NVIDIA H800``
_GPU_LIST = re.compile(r"^(?:GPU models and configuration:\s*)?GPU ([\d,]+):\s*(.+?)(?:\s*\(UUID:.*)?$")
_GPU_CONFIG_ONE = re.compile(r"^GPU models and configuration:\s*(?!GPU \d)(\S.+)$")
#: ``- GPU type: NVIDIA A100`` (transformers/accelerate/LLaMA-Factory env), ``CUDA device(s): A, B``
_GPU_TYPE = re.compile(r"^[-*\s]*(?:GPU type|CUDA device\(s\)|GPU name)\s*:\s*(\S.*\d.*)$", re.IGNORECASE)
_GPU_NUMBER = re.compile(r"^[-*\s]*(?:GPU number|GPU count|Number of GPUs|num_gpus|gpu_count)\s*:\s*(\d{1,4})\s*$",
                         re.IGNORECASE)
_PLATFORM = re.compile(r"^[-*\s]*(?:Platform|Python platform)\s*:\s*(\S.*)$")
#: ``2.1.0+cu121`` -> CUDA 12.1
_TORCH_LOCAL_CUDA = re.compile(r"\+cu(\d{2,3})$")
#: conda build string ``py3.10_cuda12.1_cudnn8.9.2_0``
_CONDA_BUILD = re.compile(r"cuda(\d+\.\d+)_cudnn(\d+(?:\.\d+)*)")
_NOT_VALUES = ("not installed", "n/a", "na", "none", "could not collect", "<fill in>")
#: a markdown quote or list marker before the text (issue bodies)
_LEAD = re.compile(r"^(?:>\s?)+")


def norm_name(name: str) -> str:
    """Package name as used in ``version.<name>``: lower-case, ``-``/``.``/space -> ``_``."""
    n = re.sub(r"[\s.\-]+", "_", name.strip().strip("`'\"").lower()).strip("_")
    return _ALIASES.get(n, n)


def key_for(name: str) -> str | None:
    """The fact key for a printed name, or None when it names no package."""
    n = norm_name(name)
    if not n or not re.match(r"^[a-z][a-z0-9_]*$", n):
        return None
    if n in SPECIAL:
        return SPECIAL[n]
    for rx, key in _NV_WHEELS:
        if rx.match(n):
            return key
    return "version." + n


def cuda_from_torch(version: str) -> str | None:
    """CUDA version from a torch local version label (``2.1.0+cu121`` -> ``12.1``)."""
    m = _TORCH_LOCAL_CUDA.search(version)
    if not m:
        return None
    d = m[1]
    return f"{d[:-1]}.{d[-1]}"


class EnvScanner:
    """Feed lines in order; ``emit(key, value, line, original)`` is called for each fact.

    State is kept across lines for tables (pip/conda list, the nvidia-smi GPU rows, a ``GPU i:``
    list) and for a REPL ``>>> torch.__version__`` whose answer is on the next line; call
    :meth:`finish` at the end to emit the GPU count of the last table.
    """

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.table: str | None = None  # "pip" | "conda" while inside such a listing
        self.asked: tuple[str, int] | None = None  # (fact key, line) of a REPL ``x.__version__`` awaiting its value
        self.gpus: dict[str, str] = {}  # index -> name, for the GPU table/list being read
        self.gpu_line: int | None = None
        self.gpu_origin = ""
        self.gpu_gap = 0

    # -- helpers ---------------------------------------------------------------------------
    def _version(self, name: str, value: str, no: int, original: str, anywhere: bool = True) -> bool:
        key = key_for(name)
        if key is None or (not anywhere and key.startswith("version.") and norm_name(name) not in KNOWN_PACKAGES):
            return False
        self.emit(key, value, no, original)
        if key == "version.torch":
            cuda = cuda_from_torch(value)
            if cuda:
                self.emit("cuda.version", cuda, no, f"{original} (+cu local version)")
        return True

    def _gpu_rows_done(self) -> None:
        if self.gpus and self.gpu_line is not None:
            self.emit("gpu.count", len(self.gpus), self.gpu_line, self.gpu_origin)
        self.gpus, self.gpu_line, self.gpu_gap = {}, None, 0

    def _gpu(self, index: str, name: str, no: int, origin: str) -> None:
        name = name.strip().strip("|").strip()
        if not name:
            return
        if self.gpu_line is None:
            self.gpu_line, self.gpu_origin = no, origin
        self.gpu_gap = 0
        if index not in self.gpus:
            new_name = name not in self.gpus.values()
            self.gpus[index] = name
            if new_name:
                self.emit("gpu.name", name, no, origin)

    # -- per line --------------------------------------------------------------------------
    def line(self, no: int, text: str) -> bool:
        """Scan one line; True when it held an environment fact about the GPU (the caller's
        free-text GPU-name search can then skip it)."""
        s = _LEAD.sub("", text.strip()).rstrip()
        if self.gpus:
            self.gpu_gap += 1
            if self.gpu_gap > GPU_TABLE_GAP:  # the table/list ended some lines ago
                self._gpu_rows_done()
        if self.asked is not None:
            key, asked_at = self.asked
            m = _BARE_VALUE.match(s)
            if m and ("." in m[1] or key == "cudnn.version"):
                if key.startswith("version."):
                    self._version(key[len("version."):], m[1], no, f"{key[len('version.'):]}.__version__")
                else:
                    self.emit(key, m[1], no, "echoed value")
                self.asked = None
                return False
            if s and not s.startswith((">>>", "...", "In [")) or no - asked_at > 2:
                self.asked = None
        if not s:
            self.table = None
            return False
        if _PIP_HEADER.match(s):
            self.table = "pip"
            return False
        if _CONDA_HEADER.match(s):
            self.table = "conda"
            return False
        if self.table and re.match(r"^-{3,}(\s+-{3,})*$", s):
            return False
        return self._facts(no, s)

    def filler(self, count: int = 1) -> None:
        """What :meth:`line` does with ``count`` lines no pattern here can match that are not blank, not a
        value and not a prompt (bare tqdm redraws, see ``text_facts.FILLER_LINE``): a GPU table gets further
        from its end (its count is emitted once it ended), a REPL question goes unanswered, a pip/conda
        listing ends. Nothing else is emitted."""
        if count <= 0:
            return
        for _ in range(count if self.gpus else 0):
            self.gpu_gap += 1
            if self.gpu_gap > GPU_TABLE_GAP:
                self._gpu_rows_done()  # no table left: the further lines change nothing
                break
        self.asked = None
        self.table = None

    def _facts(self, no: int, s: str) -> bool:
        m = _SMI_HEAD.search(s)
        if m:
            self._gpu_rows_done()
            self.emit("nvidia.driver_version", m[2], no, "nvidia-smi Driver Version")
            if m[3]:
                self.emit("cuda.driver_version", m[3], no, "nvidia-smi CUDA Version")
            return True
        m = _SMI_ROW.match(s)
        if m:
            self._gpu(m[1], m[2], no, "nvidia-smi")
            return True
        m = _GPU_LIST.match(s)
        if m:
            indices = [i for i in m[1].split(",") if i]
            for i in indices:
                self._gpu(i, m[2], no, f"GPU {m[1]}")
            return True
        m = _GPU_CONFIG_ONE.match(s)
        if m:
            self.emit("gpu.name", m[1].strip(), no, "GPU models and configuration")
            return True
        m = _GPU_NUMBER.match(s)
        if m:
            self.emit("gpu.count", int(m[1]), no, s.split(":")[0].strip(" -*"))
            return True
        m = _GPU_TYPE.match(s)
        if m and m[1].strip().lower() not in _NOT_VALUES and not re.match(r"^[\d.]+\s*(%|MiB|GiB|GB|W)?$", m[1].strip()):
            names = [n.strip() for n in m[1].split(",") if n.strip()]
            self.emit("gpu.name", names[0], no, s.split(":")[0].strip(" -*"))
            if len(names) > 1 and "device" in s.lower():
                self.emit("gpu.count", len(names), no, "CUDA device(s)")
            return True
        m = _PLATFORM.match(s)
        if m:
            self.emit("platform", m[1].strip(), no, "Platform")
            return False
        if self.table:
            m = _ROW.match(s)
            if m:
                self._version(m[1], m[2], no, f"{self.table} list: {m[1]}", anywhere=False)
                if self.table == "conda" and m[3]:
                    b = _CONDA_BUILD.search(m[3])
                    if b:
                        self.emit("cuda.version", b[1], no, f"conda build {m[3]}")
                        self.emit("cudnn.version", b[2], no, f"conda build {m[3]}")
                return False
            self.table = None
        if self._calls(no, s):
            return False
        found = False
        for m in _PIN.finditer(s):
            found |= self._version(m[1], m[2], no, f"{m[1]}==", anywhere=False)
        if found:
            return False
        m = _DOTS.match(s)
        if m:  # only ``<x> version ....`` and ``deepspeed info ....``: other dotted rows are op/metric tables
            name = m[1].strip()
            if name.endswith(" version") or name == "deepspeed info":
                self._version(name.removesuffix(" version"), m[2], no, name)
                return False
        m = _NAMED_VERSION.match(s)
        if m and len(m[1].split()) <= 5:
            self._version(m[1], m[2], no, f"{m[1].strip()} version")
            return False
        m = _COLON.match(s)
        if m:
            self._version(m[1], m[2], no, m[1], anywhere=False)
            return False
        m = _ROW.match(s)
        if m:  # a listing row pasted without its header: known packages only
            self._version(m[1], m[2], no, m[1], anywhere=False)
            return False
        for m in _PROSE_VERSION.finditer(s):
            self._version(m[1], m[2], no, f"{m[1]} version", anywhere=False)
        return False

    def _calls(self, no: int, s: str) -> bool:
        """``torch.__version__`` prints, ``torch.version.cuda``, ``torch.backends.cudnn.version()``,
        with the value on the same line or (a REPL) on the next; True when the line was one."""
        if "version" not in s:
            return False
        hit = False
        m = _TORCH_CUDA.search(s)
        if m:
            self.emit("cuda.version", m[1], no, "torch.version.cuda")
            hit = True
        m = _CUDNN_CALL.search(s)
        if m:
            self.emit("cudnn.version", m[1], no, "torch.backends.cudnn.version()")
            hit = True
        for m in _DUNDER.finditer(s):
            hit = True
            self._version(m[1], m[2], no, f"{m[1]}.__version__")
        if hit:
            return True
        m = _DUNDER_ASKED.search(s)
        key = key_for(m[1]) if m else ("cuda.version" if _CUDA_ASKED.search(s) else
                                       "cudnn.version" if _CUDNN_ASKED.search(s) else None)
        if key is not None:
            self.asked = (key, no)
            return True
        return False

    def finish(self) -> None:
        self._gpu_rows_done()


def scan_text(text: str, emit: Emit, first_line: int = 1) -> None:
    """Run an :class:`EnvScanner` over a whole text (requirements.txt, a TensorBoard text summary)."""
    sc = EnvScanner(emit)
    for i, ln in enumerate(text.splitlines()):
        sc.line(first_line + i, ln)
    sc.finish()


def metadata_facts(meta: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
    """(key, value, original key) from W&B run metadata (``wandb-metadata.json`` or the
    ``environment`` record of a ``.wandb`` file; both spellings: ``cudaVersion``/``cuda``,
    ``gpu_nvidia``/``gpu_devices``)."""
    out: list[tuple[str, Any, str]] = []
    py = meta.get("python")
    if isinstance(py, str):
        m = re.search(r"(\d+\.\d+(?:\.\d+)?)", py)
        if m:
            out.append(("python.version", m[1], "python"))
    gpu = meta.get("gpu") or meta.get("gpuType") or meta.get("gpu_type")
    devices = meta.get("gpu_nvidia") or meta.get("gpuNvidia") or meta.get("gpu_devices")
    if not gpu and isinstance(devices, list) and devices and isinstance(devices[0], Mapping):
        gpu = devices[0].get("name")
    if isinstance(gpu, str) and gpu:
        out.append(("gpu.name", gpu, "gpu"))
    count = meta.get("gpu_count", meta.get("gpuCount"))
    if isinstance(count, (int, str)) and str(count).isdigit() and int(count) > 0:
        out.append(("gpu.count", int(count), "gpu_count"))
    elif isinstance(devices, list) and devices:
        out.append(("gpu.count", len(devices), "gpu_nvidia"))
    cuda = meta.get("cudaVersion") or meta.get("cuda_version") or meta.get("cuda")
    if isinstance(cuda, (str, int, float)) and str(cuda).strip():
        out.append(("cuda.driver_version", str(cuda), "cudaVersion"))
    os_ = meta.get("os")
    if isinstance(os_, str) and os_:
        out.append(("platform", os_, "os"))
    return out


def is_version(value: str) -> bool:
    return bool(_VERSION_ONLY.match(value.strip()))
