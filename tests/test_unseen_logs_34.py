"""Round 34 (2026-11-29): failures found unexplained in the round-33 held-out sets and the threads around them, each
fixed for its family; every log is quoted from its thread, with guards for the cousins."""

from __future__ import annotations

from pathlib import Path

from autopsy.ingest.events import classify
from autopsy.ingest.text_stream import unpad_nonfinite
from tests.test_unseen_logs import _series, _verdict
from tests.test_unseen_logs_33 import _run_in


def _num(a):
    return next(f for f in a.diagnosis.findings if f.code == "NUM001")


# -- PaddleOCR's '{:x<6f}' stats: a NaN is printed 'nanxxx' -----------------------------------------------------------

# https://github.com/PaddlePaddle/PaddleOCR/issues/10406 (as pasted): finite for three epochs, then 'loss: nanxxx'
PPOCR_10406 = """[2023/07/17 10:22:20] ppocr INFO: epoch: [3/1000], global_step: 145, lr: 0.000010, acc: 0.723047, norm_edit_dis: 0.920848, loss: 2.762494, avg_reader_cost: 11.60619 s, avg_batch_cost: 16.00878 s, avg_samples: 1280.0, ips: 79.95610 samples/s, eta: 5 days, 8:19:05
[2023/07/17 10:22:21] ppocr INFO: epoch: [3/1000], global_step: 146, lr: 0.000010, acc: 0.721094, norm_edit_dis: 0.920848, loss: 2.762494, avg_reader_cost: 0.00896 s, avg_batch_cost: 0.71592 s, avg_samples: 1280.0, ips: 1787.90814 samples/s, eta: 5 days, 7:31:22
[2023/07/17 10:22:38] ppocr INFO: epoch: [3/1000], global_step: 147, lr: 0.000010, acc: 0.721094, norm_edit_dis: 0.920848, loss: 2.762494, avg_reader_cost: 11.49227 s, avg_batch_cost: 16.65319 s, avg_samples: 1280.0, ips: 76.86217 samples/s, eta: 5 days, 8:37:52
[2023/07/17 10:22:38] ppocr INFO: epoch: [3/1000], global_step: 148, lr: 0.000010, acc: 0.720312, norm_edit_dis: 0.919637, loss: nanxxx, avg_reader_cost: 0.01214 s, avg_batch_cost: 0.69777 s, avg_samples: 1280.0, ips: 1834.40564 samples/s, eta: 5 days, 7:50:32
"""

# https://github.com/PaddlePaddle/PaddleOCR/issues/3011 (as pasted; PaddleOCR 2.1's 'root INFO' logger and 'iter:'):
# the end-to-end PGNet losses NaN from the first log, some heads still finite
PPOCR_3011 = """[2021/06/03 00:17:25] root INFO: train from scratch
[2021/06/03 00:17:25] root INFO: train dataloader has 1000 iters
[2021/06/03 00:17:35] root INFO: epoch: [1/600], iter: 10, lr: 0.000100, loss: nanxxx, score_loss: 0.989663, border_loss: 0.410378, direction_loss: nanxxx, ctc_loss: nanxxx, reader_cost: 0.05210 s, batch_cost: 0.84410 s, samples: 55, ips: 6.51583
[2021/06/03 00:17:43] root INFO: epoch: [1/600], iter: 20, lr: 0.000100, loss: nanxxx, score_loss: 0.989537, border_loss: nanxxx, direction_loss: nanxxx, ctc_loss: nanxxx, reader_cost: 0.00080 s, batch_cost: 0.62698 s, samples: 50, ips: 7.97467
"""

# https://github.com/PaddlePaddle/PaddleOCR/issues/11031 (as pasted): every loss 'nanxxx' from the first logged step
PPOCR_11031 = """[2023/10/06 13:29:52] ppocr INFO: epoch: [1/500], global_step: 740, lr: 0.000195, acc: 0.000000, norm_edit_dis: 0.000000, CTCLoss: nanxxx, SARLoss: nanxxx, loss: nanxxx, avg_reader_cost: 0.00015 s, avg_batch_cost: 0.54336 s, avg_samples: 128.0, ips: 235.57141 samples/s, eta: 3 days, 0:24:37
[2023/10/06 13:29:57] ppocr INFO: epoch: [1/500], global_step: 749, lr: 0.000197, acc: 0.000000, norm_edit_dis: 0.000000, CTCLoss: nanxxx, SARLoss: nanxxx, loss: nanxxx, avg_reader_cost: 0.00024 s, avg_batch_cost: 0.48613 s, avg_samples: 115.2, ips: 236.97573 samples/s, eta: 3 days, 0:12:45
[2023/10/06 13:29:57] ppocr INFO: save model in ./output/v3_arabic_mobile/latest
"""


def test_paddle_x_padded_nan_is_read_as_nan(tmp_path: Path):
    a = _run_in(tmp_path, 0, PPOCR_10406)
    loss = _series(a, "loss")
    assert loss[:3] == [2.762494] * 3 and loss[3] != loss[3]  # the fourth is NaN
    f = _num(a)
    assert f.first_step == 148 and f.severity == "error"
    assert "line 4" in " ".join(e.where for e in f.evidence)
    assert _verdict(a)[0] != "healthy"

    b = _run_in(tmp_path, 1, PPOCR_3011)
    assert _num(b).first_step == 10  # the first log: never finite
    assert _series(b, "score_loss") == [0.989663, 0.989537]  # the heads still finite are read beside it
    c = _run_in(tmp_path, 2, PPOCR_11031)
    assert _num(c).first_step == 740
    assert _verdict(c)[0] != "healthy"


def test_the_x_padding_is_blanked_in_place_and_only_after_a_nonfinite_value():
    line = b"CTCLoss: nanxxx, SARLoss: -infxx, loss: infxxx, acc: 0.000000, pad: 0.5xxxxx, nanxxxy: 1, infxx.x"
    out = unpad_nonfinite(line)
    assert len(out) == len(line)  # offsets and line numbers hold
    assert out == (b"CTCLoss: nan   , SARLoss: -inf  , loss: inf   , acc: 0.000000, pad: 0.5xxxxx, nanxxxy: 1, "
                   b"infxx.x")
    text = b"{'loss': 0.5, 'epoch': 0.01}\n" * 10
    assert unpad_nonfinite(text) is text  # no x: not copied


# -- a loop's own words: "Loss is NaN" ----------------------------------------------------------------------------------

# https://github.com/NVIDIA-NeMo/Speech/issues/282 (NeMo 0.x Tacotron 2 under apex O1, as pasted): the only word of the
# NaN is the loop's warning, which then repeats; the reporter's fix was training in O0
NEMO_282 = """2020-01-17 05:41:46,084 - INFO - Step: 13550
2020-01-17 05:41:46,088 - INFO - Step time: 3.824190855026245 seconds
2020-01-17 05:41:57,074 - INFO - Finished epoch 250 in 198.93912196159363
2020-01-17 05:41:57,077 - INFO - Starting epoch 251
2020-01-17 05:43:17,592 - WARNING - WARNING: Loss is NaN
"""


def test_a_loop_saying_the_loss_is_nan_is_never_healthy(tmp_path: Path):
    a = _run_in(tmp_path, 0, NEMO_282)
    assert _verdict(a)[0] != "healthy"
    f = _num(a)
    assert f.severity == "error"
    ev = f.evidence[0]
    assert ev.where == "line 5" and "reported a non-finite loss" in ev.detail and "Loss is NaN" in ev.detail


def test_loss_is_nan_in_words_of_other_loops():
    # hand-written loops' prints and raises, as their sources word them (a print before break, NeMo's warning)
    for line in ("loss is nan", "Loss became NaN at step 5", "WARNING: Loss is NaN", "Epoch 3: loss went inf!",
                 "[12:00:01] Loss is infinite"):
        kind, data = classify(line)
        assert kind == "nan_stop" and data.get("warned") is True, line
    # the stop message keeps its own reading; an exception line is a stop, not a warning
    assert classify("Loss is nan, stopping training") == ("nan_stop", {"value": "nan"})
    assert classify("RuntimeError: loss is nan on rank 1 at step 5")[1].get("warned") is None


def test_advice_and_source_lines_about_a_nan_loss_are_no_event(tmp_path: Path):
    # a traceback's source line, a condition in a README-like print, a logger call in a quoted snippet
    for line in ('    raise RuntimeError("loss is nan on rank 1 at step 5")', "if the loss is nan, lower the lr",
                 '        logging.warning("Loss is NaN")', "Check whether the loss is NaN before stepping",
                 "the loss is 0.5123"):
        got = classify(line)
        assert got is None or got[0] != "nan_stop", line
    healthy = "".join(f"step {i} | loss {2.0 - i * 0.01:.4f}\n" for i in range(1, 40))
    a = _run_in(tmp_path, 0, "Tip: if the loss is nan, lower the learning rate\n" + healthy)
    assert _verdict(a) == ("healthy", "healthy")


# -- an evaluation over no batch: NaN at every evaluation after NumPy's 0/0 warning ----------------------------------

# https://github.com/instructlab/instructlab/issues/785 (as pasted; the MLX LoRA trainer copied from mlx-examples, whose
# batching loop yields no batch for a validation set smaller than the batch size)
ILAB_785 = """Training
/Users/akekane/instructlab/venv/lib/python3.12/site-packages/instructlab/train/lora_mlx/lora.py:130: RuntimeWarning: invalid value encountered in scalar divide
return np.sum(all_losses) / ntokens
Epoch 1: Iter 1: Val loss nan, Val took 0.002s

Epoch 50: Iter 50: Val loss nan, Val took 0.000s
"""

#: a loop in the shape of mlx-examples' lora.py (iterate_batches drops the last partial batch), run for real so NumPy
#: prints its own warning: 3 validation examples, batch size 4
_EMPTY_EVAL_LOOP = r'''
import numpy as np
train, val, bs = list(range(64)), [0.5, 0.7, 0.9], 4
def batches(data):
    for i in range(0, len(data) - bs + 1, bs):
        yield data[i:i + bs]
def evaluate():
    all_losses, ntokens = [], 0
    for b in batches(val):
        all_losses.append(sum(b)); ntokens += len(b)
    return np.sum(all_losses) / ntokens
for it in range(1, 41):
    if it % 10 == 0:
        print(f"Iter {it}: Train loss {2.5 - it * 0.02:.3f}, It/sec 1.000", flush=True)
    if it % 20 == 0 or it == 1:
        print(f"Iter {it}: Val loss {evaluate():.3f}, Val took 0.000s", flush=True)
'''


def _real_loop_log(tmp_path: Path, script: str) -> str:
    import subprocess
    import sys

    p = tmp_path / "loop.py"
    p.write_text(script)
    out = subprocess.run([sys.executable, str(p)], capture_output=False, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, check=True, cwd=tmp_path)
    return out.stdout


def _data3(a):
    return [f for f in a.diagnosis.findings if f.code == "DATA003"]


def test_an_evaluation_over_no_batch_is_named(tmp_path: Path):
    a = _run_in(tmp_path, 0, ILAB_785)
    assert _verdict(a) == ("failed", "data_exhausted")
    f = _data3(a)[0]
    assert f.evidence[0].where == "line 2" and "0 divided by 0" in f.evidence[0].detail
    assert "at all 2" in f.evidence[1].detail

    log = _real_loop_log(tmp_path, _EMPTY_EVAL_LOOP)
    assert "RuntimeWarning: invalid value encountered in" in log and "Val loss nan" in log
    b = _run_in(tmp_path, 1, log)
    assert _verdict(b) == ("failed", "data_exhausted")
    assert "training loss is finite at all 4 logs" in _data3(b)[0].evidence[-1].detail


def test_the_empty_reduction_warning_alone_names_no_empty_evaluation(tmp_path: Path):
    warn = "/x/metrics.py:12: RuntimeWarning: invalid value encountered in scalar divide\n"
    # a finite evaluation: the warning was about something else (a precision with no positives)
    fine = _real_loop_log(tmp_path, _EMPTY_EVAL_LOOP.replace("[0.5, 0.7, 0.9]", "[0.5, 0.7, 0.9, 0.4, 0.6]"))
    assert "Val loss nan" not in fine
    assert not _data3(_run_in(tmp_path, 0, warn + fine))
    # the training went NaN as well: not the evaluation's emptiness
    both = warn + "".join(f"Iter {i}: Train loss {'nan' if i > 20 else '2.0'}, It/sec 1.0\nIter {i}: Val loss nan, "
                          "Val took 0.1s\n" for i in range(10, 50, 10))
    assert not _data3(_run_in(tmp_path, 1, both))
    # finite evaluations first, NaN later: the evaluation had batches
    later = warn + "".join(f"Iter {i}: Train loss 2.0, It/sec 1.0\nIter {i}: Val loss {'nan' if i > 20 else '2.1'}, "
                           "Val took 0.1s\n" for i in range(10, 50, 10))
    assert not _data3(_run_in(tmp_path, 2, later))
    # the warning printed only after the NaN evaluations
    after = ILAB_785.splitlines(True)
    assert not _data3(_run_in(tmp_path, 3, "".join(after[:1] + after[3:] + after[1:3])))


# -- crashes pasted as their exception alone: what each means, and the two that name a cause --------------------------

# (source thread, the paste as quoted there (the header and frames trimmed where noted), words the finding must carry)
KNOWN_CRASHES = [
    # https://github.com/DachengLi1/LongChat/issues/31
    ("ValueError: Asking to pad but the tokenizer does not have a padding token. Please select a token to use as "
     "`pad_token` `(tokenizer.pad_token = tokenizer.eos_token e.g.)` or add a new pad token via "
     "`tokenizer.add_special_tokens({'pad_token': '[PAD]'})`.\n", "no padding token", "tokenizer.pad_token"),
    # https://github.com/microsoft/FocalNet/issues/4 (the message's first line)
    ("RuntimeError: Expected to mark a variable ready only once. This error is caused by one of the following reasons: "
     "1) Use of a module parameter outside the `forward` function. Please make sure model parameters are not shared "
     "across multiple concurrent forward-backward passes. or try to use _set_static_graph() as a workaround if this "
     "module graph does not change during training loop.2) Reused parameters in multiple reentrant backward passes.\n",
     "reentrant gradient checkpointing", "use_reentrant"),
    # https://github.com/nomic-ai/gpt4all/issues/427 (title) and https://github.com/zjunlp/KnowLM/issues/82 (title)
    ("RuntimeError: \"addmm_impl_cpu_\" not implemented for 'Half'\n", "float16 model running on the CPU", "float32"),
    ("RuntimeError: \"addmm_impl_cpu\" not implemented for 'Half'\n", "float16 model running on the CPU", "float32"),
    # https://github.com/hiyouga/LlamaFactory/issues/181, /issues/3597, https://github.com/wp931120/baichuan_sft_lora/issues/1
    ("ValueError: Target modules ['q_proj', 'v_proj'] not found in the base model. Please check the target modules "
     "and try again.\n", "LoRA target modules", "named_modules"),
    ("ValueError: Target modules {'c_attn'} not found in the base model. Please check the target modules and try "
     "again.\n", "LoRA target modules", "all-linear"),
    ("""Traceback (most recent call last):
  File "sft_lora.py", line 68, in <module>
    model = get_peft_model(model, config)
  File "/usr/lib/python3.8/site-packages/peft-0.4.0.dev0-py3.8.egg/peft/tuners/lora.py", line 333, in _find_and_replace
ValueError: Target modules [] not found in the base model. Please check the target modules and try again.
""", "empty list", "named_modules"),
    # https://github.com/leftthomas/SRGAN/issues/118 (title); https://github.com/VainF/DeepLabV3Plus-Pytorch/issues/114
    # (a worker's traceback re-raised, frames trimmed)
    ("RuntimeError: stack expects each tensor to be equal size, but got [1, 22, 22] at entry 0 and [3, 22, 22] at "
     "entry 5\n", "different shapes", "convert('RGB')"),
    ("""RuntimeError: Caught RuntimeError in DataLoader worker process 0.
Original Traceback (most recent call last):
  File "C:*\\torch\\utils\\data\\_utils\\worker.py", line 308, in _worker_loop
    data = fetcher.fetch(index)
RuntimeError: stack expects each tensor to be equal size, but got [768, 768] at entry 0 and [768, 768, 3] at entry 1
""", "different shapes", "pad sequences"),
    # https://github.com/NVIDIA/Megatron-LM/issues/71
    ("""    work = group.allreduce([tensor], opts)
RuntimeError: NCCL error in: ../torch/lib/c10d/ProcessGroupNCCL.cpp:839, unhandled system error, NCCL version 2.8.3
ncclSystemError: System call (socket, malloc, munmap, etc) failed.
""", "NCCL communication error", "NCCL_DEBUG=INFO"),
]


def test_common_crashes_are_explained(tmp_path: Path):
    for i, (log, label, remedy) in enumerate(KNOWN_CRASHES):
        a = _run_in(tmp_path, i, log)
        f = next(f for f in a.diagnosis.findings if f.code == "CRASH001")
        assert label in f.title + f.message, (i, f.title)
        assert remedy in " ".join(f.remedies), (i, f.remedies)
        assert _verdict(a) == ("failed", "crash")


def test_unrelated_crashes_stay_unexplained(tmp_path: Path):
    # near misses of the new entries: another error about padding, a 'not implemented' for a CUDA kernel in float32
    for i, msg in enumerate(("ValueError: padding_side should be left or right\n",
                             "NotImplementedError: Could not run 'aten::_foo' with arguments from the 'CUDA' backend.\n")):
        f = next(f for f in _run_in(tmp_path, i, msg).diagnosis.findings if f.code == "CRASH001")
        assert ":" not in f.title.split("with", 1)[1], f.title  # "Crashed with X" and nothing after


# https://github.com/opendatalab/MinerU/issues/1508 (a Tesla M40, as pasted) and
# https://github.com/deepspeedai/DeepSpeed/issues/6723 (the GPU not named)
MINERU_1508 = ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmStridedBatchedEx(handle, "
               "opa, opb, (int)m, (int)n, (int)k, (void*)&falpha, a, CUDA_R_16BF, (int)lda, stridea, b, CUDA_R_16BF, "
               "(int)ldb, strideb, (void*)&fbeta, c, CUDA_R_16BF, (int)ldc, stridec, (int)num_batches, compute_type, "
               "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`\n")
# https://github.com/buaacyw/GaussianEditor/issues/46: the same refusal for float16 operands, whose cause is not bf16
GAUSSIAN_46 = ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx( handle, opa, opb, m, n, "
               "k, &falpha, a, CUDA_R_16F, lda, b, CUDA_R_16F, ldb, &fbeta, c, CUDA_R_16F, ldc, CUDA_R_32F, "
               "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`\n")


def test_cublas_refusing_a_bf16_matmul_is_the_hardware(tmp_path: Path):
    a = _run_in(tmp_path, 0, MINERU_1508)
    assert _verdict(a) == ("failed", "bf16_unsupported_hardware")
    f = next(f for f in a.diagnosis.findings if f.code == "HW001")
    assert f.confidence == 0.7 and "CUDA_R_16BF" in f.evidence[0].detail
    b = _run_in(tmp_path, 1, "GPU: Tesla M40 24GB\n" + MINERU_1508)
    assert next(f for f in b.diagnosis.findings if f.code == "HW001").confidence == 0.9
    # an Ampere card has bf16: the refusal there is not the hardware's
    c = _run_in(tmp_path, 2, "GPU: NVIDIA A100-SXM4-80GB\n" + MINERU_1508)
    assert _verdict(c)[1] != "bf16_unsupported_hardware"
    assert _verdict(_run_in(tmp_path, 3, GAUSSIAN_46))[1] == "crash"


# https://github.com/Lightning-AI/lit-llama/issues/467 (a fine-tuned Llama 7B run in 16-true, as pasted, frames trimmed)
LITLLAMA_467 = """python generate/lora.py
16-true
Loading model ...
Traceback (most recent call last):
  File "/home/azureuser/lit-llama/generate.py", line 74, in generate
    idx_next = torch.multinomial(probs, num_samples=1).to(dtype=dtype)
RuntimeError: probability tensor contains either `inf`, `nan` or element < 0
"""


def test_sampling_from_nonfinite_probabilities_is_a_nonfinite_forward(tmp_path: Path):
    a = _run_in(tmp_path, 0, LITLLAMA_467)
    assert _verdict(a)[0] != "healthy"
    f = _num(a)
    assert "torch.multinomial refused to sample" in f.evidence[0].detail and f.evidence[0].where == "line 7"
    # the wording without backticks (https://github.com/Lightning-AI/litgpt/issues/200, title)
    kind, data = classify("RuntimeError: probability tensor contains either inf, nan or element < 0")
    assert kind == "nan_stop" and data["what"] == "sampling"


# -- mlx-lm's two-word keys ---------------------------------------------------------------------------------------------

# https://github.com/ml-explore/mlx-lm/pull/330 (as pasted: LoRA on an A100 through the CUDA backend, healthy)
MLXLM_330 = """Starting training..., iters: 100
Iter 1: Val loss 2.936, Val took 5.265s
Iter 10: Train loss 2.662, Learning Rate 1.000e-05, It/sec 0.490, Tokens/sec 161.374, Trained Tokens 3290, Peak mem 9.707 GB
Iter 20: Train loss 2.101, Learning Rate 1.000e-05, It/sec 13.913, Tokens/sec 4560.749, Trained Tokens 6568, Peak mem 10.588 GB
Iter 30: Train loss 1.781, Learning Rate 1.000e-05, It/sec 24.234, Tokens/sec 7514.985, Trained Tokens 9669, Peak mem 10.588 GB
Iter 40: Train loss 1.505, Learning Rate 1.000e-05, It/sec 25.674, Tokens/sec 8056.378, Trained Tokens 12807, Peak mem 10.588 GB
Iter 50: Train loss 1.585, Learning Rate 1.000e-05, It/sec 23.600, Tokens/sec 7889.451, Trained Tokens 16150, Peak mem 10.588 GB
"""


def test_mlx_lm_learning_rate_is_read_as_the_learning_rate(tmp_path: Path):
    a = _run_in(tmp_path, 0, MLXLM_330)
    assert _series(a, "learning_rate") == [1e-05] * 5
    assert _series(a, "loss") == [2.662, 2.101, 1.781, 1.505, 1.585]
    assert _series(a, "eval_loss") == [2.936]
    assert "Rate" not in set(a.run.scalars["metric"])  # not the last word of the key alone
    assert _verdict(a) == ("healthy", "healthy")
    # a two-word key of another kind with a space stays out (one word is taken, as before)
    b = _run_in(tmp_path, 1, "".join(f"Iter {i}: Train loss {3 - i * 0.1:.3f}, Peak mem {5 + i:.3f} GB\n" for i in range(1, 6)))
    assert "learning_rate" not in set(b.run.scalars["metric"])


# -- loading: a GPU too small for the quantized model, weights files that are not weights, shapes of another model ----

# https://github.com/hustvl/Senna/issues/17 (as pasted; the reporter: "I resolved this issue by replacing a 40G RAM GPU")
SENNA_17 = ("ValueError: Some modules are dispatched on the CPU or the disk. Make sure you have enough GPU RAM to fit the "
            "quantized model. If you want to dispatch the model on the CPU or the disk while keeping these modules in "
            "32-bit, you need to set 'load_in_8bit_fp32_cpu_offload=True' and pass a custom 'device_map' to "
            "'from_pretrained'.\n")

# https://github.com/Rose-STL-Lab/LIMO/issues/3 (as pasted; the answer: vae.pt is a Git LFS file not downloaded fully)
LIMO_3 = """Traceback (most recent call last):
  File "/home/pharmapp/DD-2022/LIMO/generate_molecules.py", line 15, in <module>
    vae.load_state_dict(torch.load('vae.pt'))
  File "/home/pharmapp/anaconda3/envs/env0/lib/python3.10/site-packages/torch/serialization.py", line 713, in load
    return _legacy_load(opened_file, map_location, pickle_module, **pickle_load_args)
  File "/home/pharmapp/anaconda3/envs/env0/lib/python3.10/site-packages/torch/serialization.py", line 920, in _legacy_load
    magic_number = pickle_module.load(f, **pickle_load_args)
_pickle.UnpicklingError: invalid load key, 'v'.
"""

# https://github.com/Jiuzhouh/PiVe/issues/4 (as pasted: the two mismatch lines alone, a T5 vocabulary of 32101 tokens
# saved, a model of 32128 built)
PIVE_4 = """RuntimeError: Error(s) in loading state_dict for T5ForConditionalGeneration:
	size mismatch for shared.weight: copying a param with shape torch.Size([32101, 768]) from checkpoint, the shape in current model is torch.Size([32128, 768]).
	size mismatch for lm_head.weight: copying a param with shape torch.Size([32101, 768]) from checkpoint, the shape in current model is torch.Size([32128, 768]).
"""


def test_loading_failures_are_explained(tmp_path: Path):
    a = _run_in(tmp_path, 0, SENNA_17)
    assert _verdict(a) == ("failed", "out_of_memory")
    f = next(f for f in a.diagnosis.findings if f.code == "CRASH001")
    assert f.confidence == 0.7 and "does not fit in the GPU" in f.title
    assert any("torch.cuda.is_available()" in r for r in f.remedies)  # the other reading: no GPU visible at all

    b = _run_in(tmp_path, 1, LIMO_3)
    f = next(f for f in b.diagnosis.findings if f.code == "CRASH001")
    assert "not a complete checkpoint" in f.title and "git lfs pull" in " ".join(f.remedies)

    c = _run_in(tmp_path, 2, PIVE_4)
    f = next(f for f in c.diagnosis.findings if f.code == "CRASH001")
    assert "tensor shapes differ" in f.title and "resize_token_embeddings" in " ".join(f.remedies)


def test_a_pickle_error_elsewhere_is_not_a_damaged_checkpoint(tmp_path: Path):
    # "Ran out of input" from a DataLoader worker's pickling (Windows spawn), not from loading weights
    log = """Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "C:\\Python38\\lib\\multiprocessing\\spawn.py", line 116, in spawn_main
    exitcode = _main(fd, parent_sentinel)
EOFError: Ran out of input
"""
    f = next(f for f in _run_in(tmp_path, 0, log).diagnosis.findings if f.code == "CRASH001")
    assert "checkpoint" not in f.title


# -- SpeechBrain's FileTrainLogger --------------------------------------------------------------------------------------

# https://github.com/speechbrain/speechbrain/issues/2584 (as pasted, the first five epochs: speaker ID, healthy training)
SB_2584 = """Epoch: 1, lr: 1.00e-03 - train loss: 8.84e-01 - valid loss: 1.76e-01, valid error: 5.25e-02
Epoch: 2, lr: 9.95e-04 - train loss: 2.20e-01 - valid loss: 1.21e-01, valid error: 3.72e-02
Epoch: 3, lr: 9.91e-04 - train loss: 1.65e-01 - valid loss: 8.99e-02, valid error: 3.00e-02
Epoch: 4, lr: 9.86e-04 - train loss: 1.30e-01 - valid loss: 8.33e-02, valid error: 3.00e-02
Epoch: 5, lr: 9.82e-04 - train loss: 1.21e-01 - valid loss: 6.92e-02, valid error: 2.53e-02
"""

# https://github.com/speechbrain/speechbrain/issues/1170 (as pasted: a SepFormer recipe, whose stage loss is the negated
# SI-SNR, logged as "si-snr"; negative and falling is learning)
SB_1170 = """epoch: 1, lr: 1.50e-04 - train si-snr: 2.23 - valid si-snr: -3.86e+00
epoch: 2, lr: 1.50e-04 - train si-snr: 1.66 - valid si-snr: -3.51e+00
epoch: 3, lr: 1.50e-04 - train si-snr: -4.05e-01 - valid si-snr: -5.13e+00
epoch: 4, lr: 1.50e-04 - train si-snr: -6.35e-01 - valid si-snr: -5.74e+00
epoch: 5, lr: 1.50e-04 - train si-snr: -4.63e-01 - valid si-snr: -5.42e+00
"""

# https://github.com/speechbrain/speechbrain/pull/2216 (the console, lines behind the logger's name, a bar between)
SB_2216 = """speechbrain.utils.epoch_loop - Going into epoch 1
speechbrain.utils.train_logger - epoch: 1, lr: 1.00e+00 - train loss: 9.45e-01 - valid loss: 1.23, valid CER: 35.42, valid WER: 39.14
speechbrain.utils.checkpoints - Saved an end-of-epoch checkpoint in results/CRDNN_BPE_960h_LM/2602/save/CKPT+2023-10-21+12-02-55+00
speechbrain.utils.epoch_loop - Going into epoch 2
speechbrain.nnet.schedulers - Changing lr from 1 to 0.8
speechbrain.utils.train_logger - epoch: 2, lr: 1.00e+00 - train loss: 7.26e-01 - valid loss: 1.27, valid CER: 1.54e+02, valid WER: 1.54e+02
"""


def test_speechbrain_epoch_lines(tmp_path: Path):
    a = _run_in(tmp_path, 0, SB_2584)
    assert _series(a, "loss") == [0.884, 0.22, 0.165, 0.13, 0.121]
    assert _series(a, "eval_loss") == [0.176, 0.121, 0.0899, 0.0833, 0.0692]  # "valid loss" is the eval loss
    assert _series(a, "learning_rate")[0] == 1e-03
    assert _verdict(a) == ("healthy", "healthy")

    b = _run_in(tmp_path, 1, SB_1170)
    assert _series(b, "loss") == [2.23, 1.66, -0.405, -0.635, -0.463]  # the stage loss, first of the train stats
    assert _series(b, "eval_loss")[0] == -3.86
    assert _verdict(b)[0] != "failed"

    c = _run_in(tmp_path, 2, SB_2216)
    assert _series(c, "loss") == [0.945, 0.726] and _series(c, "eval_loss") == [1.23, 1.27]
    assert _series(c, "valid WER") == [39.14, 154.0]
    assert "steps" not in set(c.run.scalars["metric"])


# -- numeric tables: a headerless one's columns, one row under a header ----------------------------------------------

# https://github.com/yitu-opensource/T2T-ViT/issues/26 (timm's summary.csv pasted without its header line: epoch,
# train_loss, eval_loss, top1, top5; apex AMP, the loss NaN from epoch 209)
T2T_26 = """206,4.359750032424927,4.154387146377563,7.619999943542481,24.040000201416017
207,4.37085485458374,4.158743778991699,7.820000009155273,24.019999743652345
208,4.367704391479492,4.161868629837036,7.62000002746582,23.86000018310547
209,nan,4.160795520019532,7.7200000274658205,24.01999976196289
210,nan,nan,1.0,5.0
211,nan,nan,1.0,5.0
"""

# https://github.com/fastai/fastai/issues/941 (fastai's results table as rendered in the post: a blank line under the
# header, NaN at epoch 0)
FASTAI_941 = """epoch train loss valid loss accuracy_thresh f2_opt

0 nan nan 0.997788 0.000000

71.39% [6930/9707 3:56:27<1:34:45 nan]
"""


def test_a_headerless_table_that_goes_nan_is_read_without_naming_a_term(tmp_path: Path):
    a = _run_in(tmp_path, 0, T2T_26)
    col2 = _series(a, "column 2")
    assert col2[:3] == [4.359750032424927, 4.37085485458374, 4.367704391479492] and col2[3] != col2[3]
    assert _num(a).first_step == 209
    assert not [f for f in a.diagnosis.findings if f.code == "DATA001"]  # columns are not known loss terms
    # the same shape, finite throughout: read, and nothing wrong with it
    fine = "".join(f"{i},{4.4 - i * 0.01:.4f},{4.2 - i * 0.01:.4f},{7 + i * 0.1:.2f}\n" for i in range(1, 9))
    b = _run_in(tmp_path, 1, fine)
    assert len(_series(b, "column 3")) == 8
    # ... and unnamed numbers alone are no evidence of health
    assert _verdict(b) == ("inconclusive", "unknown") and "only unnamed columns" in b.diagnosis.verdict.headline


def test_one_row_under_a_header_naming_a_loss_is_read(tmp_path: Path):
    a = _run_in(tmp_path, 0, FASTAI_941)
    assert _num(a).first_step == 0
    assert _verdict(a)[0] != "healthy"
    assert _series(a, "accuracy_thresh") == [0.997788]  # the row's other columns under their names


# https://github.com/eriklindernoren/PyTorch-YOLOv3/issues/13 (as pasted: the old train.py's line, every coordinate term
# and the total NaN, conf still finite)
PYYOLOV3_13 = """[Epoch 0/30, Batch 323/1313] [Losses: x nan, y nan, w nan, h nan, conf 0.755184, cls nan, total nan]
[Epoch 0/30, Batch 324/1313] [Losses: x nan, y nan, w nan, h nan, conf 0.760500, cls nan, total nan]
[Epoch 0/30, Batch 325/1313] [Losses: x nan, y nan, w nan, h nan, conf 0.755139, cls nan, total nan]
"""


def test_a_bracketed_group_of_losses_names_its_terms(tmp_path: Path):
    a = _run_in(tmp_path, 0, PYYOLOV3_13)
    assert _series(a, "conf_loss") == [0.755184, 0.7605, 0.755139]
    loss = _series(a, "loss")  # "total", the group's total, is the run's loss
    assert len(loss) == 3 and all(v != v for v in loss)
    assert _num(a).first_step == 323
    # the same repository's later form keeps recall and precision as scores, not loss terms
    b = _run_in(tmp_path, 1, "".join(
        f"[Epoch 1/30, Batch {i}/1313] [Losses: x 0.1, y 0.1, w 0.2, h 0.2, conf 1.5, cls 0.9, total {3.0 - i / 100:.2f}, "
        f"recall: 0.5, precision: 0.4]\n" for i in range(10, 14)))
    assert "recall_loss" not in set(b.run.scalars["metric"]) and len(_series(b, "loss")) == 4


# https://github.com/brucefan1983/GPUMD/pull/1098 (NEP's loss.out as pasted, trailing blanks dropped: the second column,
# the total loss, NaN at every row while the RMSE columns beside it are finite)
GPUMD_1098 = """500     nan        0.01976    0.02418    0.00430      0.10101      0.00000      0.00000      0.00000      0.00000
600     nan        0.02036    0.02497    0.00337      0.10742      0.00000      0.00000      0.00000      0.00000
700     nan        0.02061    0.02536    0.00290      0.12042      0.00000      0.00000      0.00000      0.00000
"""


def test_a_headerless_column_nan_at_every_row_is_never_healthy(tmp_path: Path):
    a = _run_in(tmp_path, 0, GPUMD_1098)
    assert _verdict(a)[0] != "healthy"
    assert _num(a).first_step == 500
    # NaN in every column
    b = _run_in(tmp_path, 1, "".join(f"{i}00 nan nan nan\n" for i in range(1, 5)))
    assert _verdict(b)[0] != "healthy" and _num(b).first_step == 100


def test_a_counter_led_line_giving_a_nonfinite_loss_in_words_is_read(tmp_path: Path):
    # https://github.com/deepspeedai/DeepSpeedExamples/issues/423 (DeepSpeed-Chat step 2's epoch line, as pasted)
    a = _run_in(tmp_path, 0, "Epoch 1/1 with loss inf\n")
    assert _series(a, "loss") == [float("inf")] and _num(a).first_step == 1
    # a finite value alone in words stays prose (one line proves no format), as before
    assert _run_in(tmp_path, 1, "Epoch 1/1 with loss 0.69\n").run.scalars.empty
    # and a held-out word keeps a best-so-far or an evaluation line out
    assert _run_in(tmp_path, 2, "Epoch 1/1 with best validation loss inf\n").run.scalars.empty


def test_a_guard_skipping_a_nan_batch_is_not_a_nan_onset_in_words():
    got = classify("WARNING: Loss is NaN, skipping this batch")
    assert got is None or got[0] != "nan_stop"


# -- a start-up banner that plans no training ---------------------------------------------------------------------------

# https://github.com/bmaltais/kohya_ss/issues/2305 (sd-scripts' banner as pasted: the GUI's 12 epochs arrived as 0)
KOHYA_2305 = """override steps. steps for 0 epochs is / 指定エポックまでのステップ数: 0
running training / 学習開始
num train images * repeats / 学習画像の数×繰り返し回数: 390
num reg images / 正則化画像の数: 0
num batches per epoch / 1epochのバッチ数: 195
num epochs / epoch数: 0
batch size per device / バッチサイズ: 2
gradient accumulation steps / 勾配を合計するステップ数 = 1
total optimization steps / 学習ステップ数: 0
steps: 0it [00:00, ?it/s]
"""

#: the HF Trainer's banner, worded as transformers' Trainer._inner_training_loop logs it, over an empty training set
HF_EMPTY_BANNER = """***** Running training *****
  Num examples = 0
  Num Epochs = 3
  Instantaneous batch size per device = 8
  Total train batch size (w. parallel, distributed & accumulation) = 8
  Gradient Accumulation steps = 1
  Total optimization steps = 3
"""


def test_a_banner_planning_no_training_is_named(tmp_path: Path):
    a = _run_in(tmp_path, 0, KOHYA_2305)
    f = next(f for f in a.diagnosis.findings if f.code == "CRASH001")
    assert "planned zero optimization steps" in f.title and f.evidence[0].where == "line 6"
    assert _verdict(a)[0] != "healthy"
    b = _run_in(tmp_path, 1, HF_EMPTY_BANNER)
    assert _verdict(b) == ("failed", "data_exhausted")
    # a banner planning steps, then losses: nothing to say about the plan
    c = _run_in(tmp_path, 2, HF_EMPTY_BANNER.replace("Num examples = 0", "Num examples = 24")
                + "".join(f"{{'loss': {2.0 - i / 10:.4f}, 'learning_rate': 5e-05, 'epoch': {i / 3:.2f}}}\n" for i in range(1, 4)))
    assert not [f for f in c.diagnosis.findings if f.code == "CRASH001"]
    # losses logged beside a zero in the banner (another phase's banner): trained after all
    d = _run_in(tmp_path, 3, HF_EMPTY_BANNER + "".join(
        f"{{'loss': {2.0 - i / 10:.4f}, 'learning_rate': 5e-05, 'epoch': {i / 3:.2f}}}\n" for i in range(1, 4)))
    assert not [f for f in d.diagnosis.findings if f.code == "CRASH001" and "No training" in f.title]


def test_columns_under_a_header_that_does_not_fit_are_not_guessed(tmp_path: Path):
    # https://github.com/espnet/espnet/issues/4092 (ESPnet1's PrintReport as pasted: nine header words over rows whose
    # validation cells are blank, the spacing partly lost): not read as a headerless table with the epoch as its step
    log = """epoch       iteration   main/loss   validation/main/loss  main/loss_trans  validation/main/loss_trans  elapsed_time  validation/main/cer  validation/main/wer
0           100         0.0183482                         0.0183482                                    123.279
0           200         -0.00548435                        -0.00548435                                  236.267
0           300         -0.0430187                        -0.0430187                                   348.067
0           400         -0.0175609                        -0.0175609                                   461.525
0           500         -0.000233693                        -0.000233693                                 573.349
0           600         -0.000440226                        -0.000440226                                 688.064
0           700         -0.0196359                        -0.0196359                                   801.601
0           800         0.00623489                        0.00623489                                   915.241
0           900         0.0471449                         0.0471449                                    1030.21
"""
    a = _run_in(tmp_path, 0, log)
    assert not any(m.startswith("column ") for m in set(a.run.scalars["metric"]))
    # without a header, a first column that repeats (an epoch over its rows) is no step either
    b = _run_in(tmp_path, 1, "".join(f"0 {i}00 {2 - i / 10:.3f} {i * 1.5:.1f}\n" for i in range(1, 5)))
    assert not any(m.startswith("column ") for m in set(b.run.scalars["metric"]))


# -- labels in another form than the loss takes (Keras, TensorFlow, PyTorch), TF's range checks, JAX's debug_nans -----

LABEL_FORMS = [
    # https://github.com/nachi-hebbar/Transfer-Learning-ResNet-Keras/issues/1 (title): integer labels, categorical loss
    ("ValueError: Shapes (None, 1) and (None, 5) are incompatible\n", "sparse_categorical_crossentropy"),
    # https://github.com/sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning/issues/195 (scores [32, 16, 9490] against
    # targets [32, 51], as pasted, frames trimmed)
    ("""  File "D:\\anaconda3\\envs\\pytorch\\lib\\site-packages\\torch\\nn\\functional.py", line 3014, in cross_entropy
    return torch._C._nn.cross_entropy_loss(input, target, weight, _Reduction.get_enum(reduction), ignore_index, label_smoothing)
RuntimeError: Expected target size [32, 9490], got [32, 51]
""", "permute(0, 2, 1)"),
    # https://github.com/zergtant/pytorch-handbook/issues/37 ([N, 1] labels into CrossEntropyLoss, torch < 1.0 wording)
    ("RuntimeError: multi-target not supported at /pytorch/aten/src/THNN/generic/ClassNLLCriterion.c:21\n", "squeeze(1)"),
]


def test_labels_in_another_form_than_the_loss_takes(tmp_path: Path):
    for i, (log, remedy) in enumerate(LABEL_FORMS):
        a = _run_in(tmp_path, i, log)
        assert _verdict(a) == ("failed", "loss_shape_mismatch"), i
        f = next(f for f in a.diagnosis.findings if f.code == "SHP001")
        assert remedy in " ".join(f.remedies), (i, f.remedies)
    # two widths of which neither is 1: not this mistake (a Dense layer fed another width, say)
    b = _run_in(tmp_path, 9, "ValueError: Shapes (None, 30) and (None, 9) are incompatible\n")
    assert _verdict(b)[1] != "loss_shape_mismatch"


def test_tensorflow_range_checks_name_the_label_or_the_token(tmp_path: Path):
    # https://github.com/vrenkens/nabu/issues/9 (as pasted; the answer: the output dimension set to 40 for more symbols)
    a = _run_in(tmp_path, 0, "InvalidArgumentError (see above for traceback): Received a label value of 48 which is "
                             "outside the valid range of [0, 40).  Label values: 1 23 24 47 11 39 5 1 1 39 19 31 47\n")
    assert _verdict(a) == ("failed", "vocab_mismatch")
    assert "label 48" in next(f for f in a.diagnosis.findings if f.code == "VOCAB001").title
    # TensorFlow's gather, the embedding lookup's form of the same check
    b = _run_in(tmp_path, 1, "tensorflow.python.framework.errors_impl.InvalidArgumentError:  indices[5,3] = 30522 is "
                             "not in [0, 30522)\n\t [[node model/embedding/embedding_lookup]]\n")
    assert _verdict(b)[1] == "vocab_mismatch"


def test_jax_debug_nans_is_a_nonfinite_onset(tmp_path: Path):
    # https://github.com/jax-ml/jax/issues/22291 (title, as written there)
    a = _run_in(tmp_path, 0, "Exception has occurred: FloatingPointError invalid value (nan) encountered in "
                             "jit(convert_element_type). Because jax_config.debug_nans.value and/or config.jax_debug_infs "
                             "is set, the de-optimized function\n")
    assert _verdict(a)[0] != "healthy"
    assert "debug_nans check: the jitted convert_element_type" in _num(a).evidence[0].detail
    # NumPy raising under np.seterr(all='raise') says no "(nan)": not JAX's check
    got = classify("FloatingPointError: invalid value encountered in divide")
    assert got is None or got[1].get("what") != "jax_debug"


def test_tensorflow_1_see_above_form_is_an_exception_line(tmp_path: Path):
    # https://github.com/MaybeShewill-CV/CRNN_Tensorflow/issues/205 (as pasted, the op line cut): TF 1.x repeats the
    # exception after the op trace; an empty label in the CTC batch
    log = ("InvalidArgumentError (see above for traceback): Labels length is zero in batch 27\n"
           "         [[Node: CTCLoss = CTCLoss[ctc_merge_repeated=true, ignore_longer_outputs_than_inputs=false]]\n")
    a = _run_in(tmp_path, 0, log)
    f = next(f for f in a.diagnosis.findings if f.code == "CRASH001")
    assert "empty label sequence" in f.title and f.evidence[0].where == "line 1"
    # a prose line with the words is no exception line
    b = _run_in(tmp_path, 1, "The InvalidArgumentError (see above for traceback) happens only on GPU.\n")
    assert not [f for f in b.diagnosis.findings if f.code == "CRASH001"]


# https://github.com/Lilac-Lee/PointNetLK_Revisited/issues/8 (the logger's rows as pasted, a few of them: epoch, then
# running loss, running info, val loss, val info, unnamed)
POINTNETLK_8 = """INFO:PointNetLK-Revisited, 2022-03-11 09:41:33,921, epoch, 0091, 0.018989, 0.060334, 0.002259, 0.000702
INFO:PointNetLK-Revisited, 2022-03-11 09:43:58,482, epoch, 0092, 0.139491, 0.036031, 0.001820, 0.001375
INFO:PointNetLK-Revisited, 2022-03-11 14:18:54,833, epoch, 0198, nan, nan, nan, nan
INFO:PointNetLK-Revisited, 2022-03-11 14:21:24,647, epoch, 0199, nan, nan, nan, nan
"""


def test_a_counter_named_in_a_csv_row_carries_unnamed_values(tmp_path: Path):
    a = _run_in(tmp_path, 0, POINTNETLK_8)
    assert _series(a, "column 2")[:2] == [0.018989, 0.139491]
    assert _num(a).first_step == 198
    # two rows are no table (prose can hold one or two such lists)
    b = _run_in(tmp_path, 1, "".join(POINTNETLK_8.splitlines(True)[:2]))
    assert not any(m.startswith("column ") for m in set(b.run.scalars["metric"]))


def test_counter_rows_with_a_colon_and_spaces(tmp_path: Path):
    # https://github.com/shenweichen/DeepCTR/issues/261 (the example loop's rows as pasted: batch, then the loss terms
    # unnamed; the first goes NaN at batch 387)
    log = """batch: 385 0.6214759 0.6280476 0.72826767
batch: 386 0.6920916 0.62821305 0.72858125
batch: 387 nan 0.6595617 0.72703314
batch: 388 nan 0.69080186 0.72551566
"""
    a = _run_in(tmp_path, 0, log)
    assert _num(a).first_step == 387 and _series(a, "column 3")[0] == 0.6280476


def test_a_line_that_is_only_a_nan_loss_statement(tmp_path: Path):
    # https://github.com/isl-org/ZoeDepth/issues/56 (as pasted: the SILog loss's own print when torch.isnan(loss), shared
    # by AdaBins, ZoeDepth and their copies, then its diagnostics)
    log = """Nan SILog loss
input: torch.Size([651751])
target: torch.Size([651751])
G tensor(2284, device='cuda:0')
Input min max tensor(nan, device='cuda:0', grad_fn=<MinBackward1>) tensor(nan, device='cuda:0', grad_fn=<MaxBackward1>)
"""
    a = _run_in(tmp_path, 0, log)
    assert _verdict(a)[0] != "healthy"
    assert "Nan SILog loss" in _num(a).evidence[0].detail
    # prose about a NaN loss is not the statement
    for line in ("Nan values in the loss were replaced", "the NaN loss problem again"):
        got = classify(line)
        assert got is None or got[0] != "nan_stop", line


def test_sd_scripts_finding_no_data_is_an_empty_training_set(tmp_path: Path):
    # https://github.com/bmaltais/kohya_ss/issues/216 (as pasted, the last line cut: train_data_dir pointed into the
    # image folder instead of its parent; the bucket statistics of no image are NaN)
    log = """D:\\kohya_ss\\venv\\lib\\site-packages\\numpy\\core\\fromnumeric.py:3464: RuntimeWarning: Mean of empty slice.
  return _methods._mean(a, axis=axis, dtype=dtype,
mean ar error (without repeats): nan
No data found. Please verify arguments (train_data_dir must be the parent of folders with images)
"""
    a = _run_in(tmp_path, 0, log)
    assert _verdict(a) == ("failed", "data_exhausted")
    f = next(f for f in a.diagnosis.findings if f.code == "CRASH001")
    assert "train_data_dir must be the parent" in f.message and f.evidence[0].where == "line 4"


def test_distributed_and_rollout_engine_start_up_failures(tmp_path: Path):
    # https://github.com/vllm-project/vllm/issues/2418 (title, the message whole): the engine's KV cache is smaller
    # than one sequence of max_model_len
    a = _run_in(tmp_path, 0, "ValueError: The model's max seq len (4096) is larger than the maximum number of tokens "
                             "that can be stored in KV cache (3664). Try increasing `gpu_memory_utilization` or "
                             "decreasing `max_model_len` when initializing the engine.\n")
    assert _verdict(a) == ("failed", "out_of_memory")
    f = next(f for f in a.diagnosis.findings if f.code == "CRASH001")
    assert f.confidence == 0.65 and "max_model_len" in " ".join(f.remedies)
    # https://github.com/sahil280114/codealpaca/issues/14 (title): DeepSpeed's batch arithmetic
    b = _run_in(tmp_path, 1, "AssertionError: Check batch related parameters. train_batch_size is not equal to "
                             "micro_batch_per_gpu * gradient_acc_step * world_size 256 != 8 * 1 * 8\n")
    f = next(f for f in b.diagnosis.findings if f.code == "CRASH001")
    assert "batch sizes do not multiply up" in f.title and '"auto"' in " ".join(f.remedies)
    assert _verdict(b) == ("failed", "crash")
