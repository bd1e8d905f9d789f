"""Judging on logs of the seventh unseen round and the coverage probes before it: each test quotes its source."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run

# https://github.com/sconlyshootery/FeatDepth/issues/68 (the traceback as pasted)
FEATDEPTH = """\
Traceback (most recent call last):
  File "./infer.py", line 76, in <module>
    evaluate(cfg_path, model_path, img_path, output_path)
  File "./infer.py", line 27, in transform
    im_tensor = im_tensor.permute(0, 3, 1, 2).contiguous()
RuntimeError: CUDA error: no kernel image is available for execution on the device
"""


def test_crash_evidence_quotes_the_frame_as_a_reader_would(tmp_path: Path):
    a = _run(tmp_path, FEATDEPTH)
    crash = [f for f in a.diagnosis.findings if f.code == "CRASH001"]
    assert crash
    texts = [e.detail for e in crash[0].evidence]
    assert "raised in ./infer.py:27 in transform" in texts, texts


# https://github.com/hiyouga/LlamaFactory/issues/7396 (torch's ProcessGroupNCCL watchdog on every rank, same collective)
NCCL_SAME = """\
{'loss': 0.8123, 'grad_norm': 0.91, 'learning_rate': 1e-05, 'epoch': 0.4}
[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.
[80747] [rank4]:[E321 02:07:08.414640780 ProcessGroupNCCL.cpp:607] [Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600067 milliseconds before timing out.
[80748] [rank0]:[E321 02:07:08.465150152 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 0] Exception (either an error or timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.
"""

# https://github.com/pytorch/pytorch/issues/118369 (a NeMo bar, then watchdog lines whose collective counts differ)
NCCL_BEHIND = """\
Epoch 0:   6%|██   | 32040/500150 [6:28:43<94:39:17,  1.37it/s, loss=2.6, v_num=95nc, reduced_train_loss=2.590, global_step=3.2e+4, consumed_samples=2.56e+7][E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25624887 milliseconds before timing out.
[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96117, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25625613 milliseconds before timing out.
[E ProcessGroupNCCL.cpp:458] [Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=64088, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25625251 milliseconds before timing out.
"""


def test_an_nccl_watchdog_timeout_is_a_failure_not_a_healthy_run(tmp_path: Path):
    a = _run(tmp_path, NCCL_SAME)
    v = a.diagnosis.verdict
    assert v.status == "failed" and v.root_cause == "crash"
    f = [x for x in a.diagnosis.findings if x.code == "CRASH001"][0]
    assert "ALLREDUCE" in f.title and "600 s" in f.title
    assert "0, 4" in f.message and "behind" not in f.message
    assert any("ddp_timeout" in r for r in f.remedies)


def test_the_rank_whose_collective_count_lags_is_named(tmp_path: Path):
    a = _run(tmp_path, NCCL_BEHIND)
    f = [x for x in a.diagnosis.findings if x.code == "CRASH001"][0]
    assert "Rank 7 is behind" in f.message and "#64,088" in f.message and "#96,120" in f.message


# failure-catalog #15; the traceback as transformers#30559 / diffusers#6442 show it (accelerate's clip_grad_norm_)
UNSCALE = """\
Traceback (most recent call last):
  File "train.py", line 88, in <module>
    trainer.train()
  File "/usr/local/lib/python3.10/site-packages/accelerate/accelerator.py", line 2040, in clip_grad_norm_
    self.unscale_gradients()
  File "/usr/local/lib/python3.10/site-packages/torch/cuda/amp/grad_scaler.py", line 260, in _unscale_grads_
    raise ValueError("Attempting to unscale FP16 gradients.")
ValueError: Attempting to unscale FP16 gradients.
"""


def test_a_known_exception_message_gets_its_meaning_and_fix(tmp_path: Path):
    a = _run(tmp_path, UNSCALE)
    f = [x for x in a.diagnosis.findings if x.code == "CRASH001"][0]
    assert f.title.endswith("trainable weights in float16 under fp16 AMP")
    assert "float32" in f.remedies[0] and "Fix the ValueError" not in " ".join(f.remedies)


# pytorch/examples mnist/main.py: 'Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}', then NaN for good; no grad_norm logged
MNIST_NAN = """\
Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.305400
Train Epoch: 1 [640/60000 (1%)]\tLoss: 1.359780
Train Epoch: 1 [59520/60000 (99%)]\tLoss: 0.359780
Train Epoch: 2 [0/60000 (0%)]\tLoss: nan
Train Epoch: 2 [640/60000 (1%)]\tLoss: nan
"""


def test_a_calm_loss_without_grad_norm_is_not_enough_to_blame_the_data(tmp_path: Path):
    a = _run(tmp_path, MNIST_NAN)
    v = a.diagnosis.verdict
    assert v.status == "inconclusive", (v.status, v.root_cause)
    f = [x for x in a.diagnosis.findings if x.code == "DATA001"]
    assert f and f[0].confidence < 0.5
    assert "grad_norm normal" not in f[0].message and "no grad_norm logged" in f[0].message


# https://github.com/tensorflow/tensorflow/issues/12287 ("Loss stays a constant 0.6931 while training"), as pasted
TF_LN2 = "".join(f"= >   step: {i} loss: {v} accuracy:0.{60 + i % 20}\n" for i, v in enumerate(
    ["0.6773", "2.4587", "5.3353", "1.0234", "10.6901", "1.9899", "3.5713", "0.6869"] + ["0.6931"] * 20))


def test_a_loss_stuck_at_chance_level_is_not_healthy(tmp_path: Path):
    a = _run(tmp_path, TF_LN2)
    v = a.diagnosis.verdict
    assert v.status != "healthy"
    f = [x for x in a.diagnosis.findings if x.code == "FLAT001"]
    assert f and "0.6931 = ln(2)" in f[0].title and f[0].first_step == 8
    assert "20 logs from step 8 to step 27" in f[0].title


# ImageNet-1k at chance: ln(1000) = 6.9078 (caffe-mobilenet-v3#1 quotes "Train net output #0: loss = 6.90776")
def test_chance_level_for_imagenet(tmp_path: Path):
    log = "".join(f"Iteration {20 * i}, loss = {6.9077 + (i % 3) * 0.0003:.5f}\n" for i in range(12))
    a = _run(tmp_path, log)
    f = [x for x in a.diagnosis.findings if x.code == "FLAT001"]
    assert f and "ln(1000)" in f[0].title


def test_a_plateau_with_training_noise_or_coarse_printing_is_left_alone(tmp_path: Path):
    noisy = "".join(f"step {i} loss {2.3026 + (0.004 if i % 2 else -0.004):.4f}\n" for i in range(30))
    coarse = "".join(f"step {i} loss {2.30:.2f}\n" for i in range(30))
    for i, log in enumerate((noisy, coarse)):
        d = tmp_path / str(i)
        d.mkdir()
        a = _run(d, log)
        assert not [x for x in a.diagnosis.findings if x.code == "FLAT001"], i
