"""'Loss is nan, stopping training' followed by the loss dict is torchvision's detection reference engine (and the DETR
family), which trains in float32 unless --amp: it is not the DeiT/MAE AMP hint; the message alone still is."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run

# https://github.com/serend1p1ty/SeqNet/issues/26 (torchvision-style engine, as pasted): only loss_box_reid is NaN in the
# dict; the maintainer pointed at a PyTorch version mismatch
SEQNET_26 = "Epoch: [5]  [1660/2241]  eta: 0:08:56  lr: 0.003000  loss: 2.2882 (2.4257)  loss_proposal_cls: 0.0818 (0.0915)  loss_proposal_reg: 1.2728 (1.4000)  loss_box_cls: 0.1167 (0.1311)  loss_box_reg: 0.1667 (0.1707)  loss_box_reid: 0.4618 (0.5611)  loss_rpn_reg: 0.0283 (0.0344)  loss_rpn_cls: 0.0317 (0.0369)  time: 0.9248  data: 0.0005  max mem: 24005\nLoss is nan, stopping training\n{'loss_proposal_cls': tensor(0.0837, device='cuda:0', grad_fn=<MulBackward0>), 'loss_proposal_reg': tensor(1.3923, device='cuda:0', grad_fn=<MulBackward0>), 'loss_box_cls': tensor(0.1187, device='cuda:0', grad_fn=<MulBackward0>), 'loss_box_reg': tensor(0.1719, device='cuda:0', grad_fn=<MulBackward0>), 'loss_box_reid': tensor(nan, device='cuda:0', grad_fn=<MulBackward0>), 'loss_rpn_reg': tensor(0.0457, device='cuda:0', grad_fn=<MulBackward0>), 'loss_rpn_cls': tensor(0.0226, device='cuda:0', grad_fn=<MulBackward0>)}\n"


def test_stop_message_with_a_loss_dict_is_no_fp16_hint(tmp_path: Path):
    a = _run(tmp_path, SEQNET_26)
    assert not [x for x in a.diagnosis.findings if x.root_cause == "fp16_overflow"]
    assert a.diagnosis.verdict.root_cause != "fp16_overflow"


def test_stop_message_alone_keeps_the_hint(tmp_path: Path):
    lines = SEQNET_26.splitlines(keepends=True)[:2]  # the MetricLogger line and the stop message, no dict
    a = _run(tmp_path, "".join(lines))
    assert [x for x in a.diagnosis.findings if x.root_cause == "fp16_overflow"]
