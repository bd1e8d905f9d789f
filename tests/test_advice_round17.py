"""Round 17 (2026-11-28): advice and evidence as an engineer reads them. Remedies name the setting in the run's own
framework (``detectors/knobs.py``): an mmdetection, ESPnet or HF run is told which of its own knobs to turn; a run of
unknown origin gets the plain-PyTorch way with the HF name beside it. The evidence chain lists one value of one log line
once, however many findings cite it."""

from __future__ import annotations

from pathlib import Path

from autopsy.model import Run
from detectors.knobs import _FAMILIES, _KNOBS, family, knob
from tests.test_unseen_logs import _run

# https://github.com/open-mmlab/mmdetection/issues/188 (as pasted: the end of the traceback, mmdet 1.x paths)
MMDET_188 = '  File "/root/mmdetection/mmdet/core/bbox/assigners/max_iou_assigner.py", line 72, in assign\n    overlaps = bbox_overlaps(bboxes, gt_bboxes)\n  File "/root/mmdetection/mmdet/core/bbox/geometry.py", line 59, in bbox_overlaps\n    ious = overlap / (area1[:, None] + area2 - overlap)\nRuntimeError: CUDA error: out of memory\n'

# https://github.com/espnet/espnet/issues/2831 (as pasted: the OOM line, then ESPnet1's traceback)
ESPNET_2831 = 'RuntimeError: CUDA out of memory. Tried to allocate 2.77 GiB (GPU 0; 7.79 GiB total capacity; 6.05 GiB already allocated; 462.94 MiB free; 371.28 MiB cached)\nTraceback (most recent call last):\n  File "/home/ubuntu/anaconda3/envs/espnet/lib/python3.6/site-packages/chainer/training/trainer.py", line 316, in run\n    update()\n  File "/home/ubuntu/espnet-master/espnet/asr/pytorch_backend/asr.py", line 245, in update\n    self.update_core()\n  File "/home/ubuntu/espnet-master/espnet/asr/pytorch_backend/asr.py", line 207, in update_core\n    data_parallel(self.model, x, range(self.ngpu)).mean() / self.accum_grad\n  File "/home/ubuntu/anaconda3/envs/espnet/lib/python3.6/site-packages/torch/nn/parallel/data_parallel.py", line 204, in data_parallel\n    return module(*inputs[0], **module_kwargs[0])\n  File "/home/ubuntu/anaconda3/envs/espnet/lib/python3.6/site-packages/torch/nn/modules/module.py", line 541, in __call__\n    result = self.forward(*input, **kwargs)\n  File "/home/ubuntu/espnet-master/espnet/nets/pytorch_backend/e2e_asr_transformer.py", line 175, in forward\n    hs_pad, hs_mask = self.encoder(xs_pad, src_mask)\n  File "/home/ubuntu/anaconda3/envs/espnet/lib/python3.6/site-packages/torch/nn/modules/module.py", line 541, in __call__\n    result = self.forward(*input, **kwargs)\n'

# https://github.com/liucongg/ChatGLM-Finetuning/issues/23 (as pasted: the OOM line alone, no framework named)
CHATGLM_23 = 'torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 144.00 MiB (GPU 0; 31.75 GiB total capacity; 30.26 GiB already allocated; 68.69 MiB free; 30.33 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF\n'

# transformers' Trainer banner (trainer.py: logger.info("***** Running training *****")), then the OOM line of ChatGLM_23
HF_BANNER = "***** Running training *****\n  Num examples = 1000\n  Num Epochs = 3\n"


def _oom_remedies(a) -> list[str]:
    oom = [f for f in a.diagnosis.findings if f.root_cause == "out_of_memory"]
    assert oom, [f.code for f in a.diagnosis.findings]
    return oom[0].remedies


def test_mmdetection_oom_names_mmdetection_settings(tmp_path: Path):
    a = _run(tmp_path, MMDET_188)
    assert "mmengine" in a.run.frameworks  # from the traceback's mmdet/ paths
    text = " ".join(_oom_remedies(a))
    assert "samples_per_gpu" in text and "per_device_train_batch_size" not in text
    assert "cutoff_len" not in text and "image scale" in text


def test_espnet_oom_names_espnet_settings(tmp_path: Path):
    a = _run(tmp_path, ESPNET_2831)
    text = " ".join(_oom_remedies(a))
    assert "accum_grad" in text and "per_device_train_batch_size" not in text
    assert "longest utterances" in text


def test_unknown_framework_gets_plain_pytorch_and_the_hf_name(tmp_path: Path):
    a = _run(tmp_path, CHATGLM_23)
    assert family(a.run) == ""
    text = " ".join(_oom_remedies(a))
    assert "accumulate gradients" in text and "per_device_train_batch_size" in text


def test_hf_run_keeps_trainingarguments_names(tmp_path: Path):
    a = _run(tmp_path, HF_BANNER + CHATGLM_23)
    assert family(a.run) == "hf"
    text = " ".join(_oom_remedies(a))
    assert text.startswith("Lower per_device_train_batch_size and raise gradient_accumulation_steps")


#: the knobs every family names in its own way; the others (a master fp32 copy, the loss scaler's floor) have a plain
#: PyTorch phrase that the torch-based families share, and phrases only where a framework has its own setting
PER_FAMILY = ("clip", "warmup", "batch", "memory", "bf16")


def test_every_family_has_its_own_phrase_for_every_knob():
    for what, table in _KNOBS.items():
        for name, labels in _FAMILIES + (("paddle", ("paddle",)),):
            run = Run(Path("."), frameworks=[labels[0]])
            assert family(run) == name
            if what in PER_FAMILY or name in table:
                assert knob(run, what) == table[name] != table[""], (what, name)
            else:
                assert knob(run, what) == table[""], (what, name)
        assert knob(Run(Path("."), frameworks=["trl", "deepspeed"]), what) == table["hf"]  # HF wins over the engine under it
        # PaddleNLP prints the HF banner, but its knobs are Paddle's
        assert knob(Run(Path("."), frameworks=["hf_trainer", "paddle"]), what) == table["paddle"]
        assert knob(Run(Path(".")), what) == table[""]


# https://github.com/huaifeng1993/DFANet/issues/27 (as pasted): two findings cite the same two log lines
DFANET_27 = ("Epoch 0/1499\nstep: 0/298 | loss: 910.1328 | IoU of batch: 0.0249\n"
             "step: 1/298 | loss: 2907000799232.0000 | IoU of batch: 0.0004\nstep: 2/298 | loss: nan | IoU of batch: 0.0303\n"
             "step: 3/298 | loss: nan | IoU of batch: 0.0233\n")


def test_evidence_chain_lists_one_log_value_once(tmp_path: Path):
    a = _run(tmp_path, DFANET_27)
    cited = [(c.where, c.text) for c in a.diagnosis.chain if c.where.startswith("line ")]
    assert len([w for w, _ in cited if w == "line 4"]) == 1, cited  # was: "loss = NaN at step 2" twice, worded apart
    assert len([w for w, _ in cited if w == "line 3"]) == 1, cited
    # the findings themselves keep their own evidence
    assert sum(1 for f in a.diagnosis.findings for e in f.evidence if e.where == "line 4") >= 2


def test_same_line_other_metric_is_kept():
    from autopsy.diagnosis import _same_fact

    assert _same_fact("log.txt", "line 21", "grad_norm = NaN at step 8") != _same_fact("log.txt", "line 21",
                                                                                     "loss = NaN at step 8")
    assert _same_fact("log.txt", "line 9", "highest loss 2.6e+06 at step 9") == _same_fact(
        "log.txt", "line 9", "last loss 2.6e+06 at step 9")
    assert _same_fact("config.txt", "key lr", "lr 0.1") is None


def test_a_hidden_zero_and_the_zero_it_hides_are_one_line_of_the_chain(tmp_path: Path):
    from tests.test_unseen_logs_17 import ALPACA_LORA_418

    a = _run(tmp_path, ALPACA_LORA_418)
    at16 = [c.text for c in a.diagnosis.chain if c.where == "line 16"]
    # was two rows: "loss logged as exactly 0.0 at step 16, right after a spike ..." and "loss = 0.0 at step 16"
    assert len(at16) == 1 and at16[0].startswith("loss logged as exactly 0.0"), at16


def test_a_run_that_logs_perplexity_charts_it(tmp_path: Path):
    from autopsy.render.markdown import render as render_md
    from autopsy.report import build_report
    from tests.test_unseen_logs_17 import OPENNMT_LUA_122

    a = _run(tmp_path, OPENNMT_LUA_122)
    md = render_md(build_report(a))
    curves = md[md.index("### Curves"):]
    assert "\nppl " in curves and "8.28 .. 14.64" in curves  # was: only the learning rate charted
