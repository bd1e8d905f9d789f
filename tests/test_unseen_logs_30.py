"""Round 30 (2026-11-28): formats found unread or misread while working through the new held-out sets, each fixed for its
family; every log is quoted from its thread, with guards for the cousins."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _series, _verdict


def _steps(a, metric: str) -> list[int]:
    return a.run.arrays(metric).steps.tolist()


# https://github.com/zihangdai/mos/issues/12 (as pasted; MoS on AWD-LSTM, whose log lines are pytorch/examples'
# word_language_model's and the PyTorch nn.Transformer tutorial's): "N/ M batches" restarts every epoch, and the
# validation line of each epoch is "| end of epoch N | time: ... | valid loss X | valid ppl Y"
MOS_12 = """| epoch  25 |   800/ 1106 batches | lr 20.00 | ms/batch 107.03 | loss  4.02 | ppl    55.54
| epoch  25 |  1000/ 1106 batches | lr 20.00 | ms/batch 110.10 | loss  4.05 | ppl    57.62
-----------------------------------------------------------------------------------------
| end of epoch  25 | time: 127.27s | valid loss  4.35 | valid ppl    77.44
-----------------------------------------------------------------------------------------
Saving Normal!
| epoch  26 |   200/ 1106 batches | lr 20.00 | ms/batch 109.52 | loss  4.09 | ppl    59.98
| epoch  26 |   400/ 1106 batches | lr 20.00 | ms/batch 107.39 | loss  3.97 | ppl    53.22
| epoch  26 |   600/ 1106 batches | lr 20.00 | ms/batch 107.96 | loss  3.99 | ppl    53.94
| epoch  26 |   800/ 1106 batches | lr 20.00 | ms/batch 109.01 | loss  4.01 | ppl    55.15
| epoch  26 |  1000/ 1106 batches | lr 20.00 | ms/batch 106.62 | loss  4.04 | ppl    56.81
-----------------------------------------------------------------------------------------
| end of epoch  26 | time: 127.08s | valid loss  4.35 | valid ppl    77.75
-----------------------------------------------------------------------------------------
| epoch  27 |   200/ 1106 batches | lr 20.00 | ms/batch 108.88 | loss  4.06 | ppl    58.18
| epoch  27 |   400/ 1106 batches | lr 20.00 | ms/batch 108.70 | loss  3.95 | ppl    51.89
"""


def test_batches_of_total_cells_and_the_end_of_epoch_validation_are_read(tmp_path: Path):
    a = _run(tmp_path, MOS_12)
    assert _verdict(a) == ("healthy", "healthy")
    # one point per log line (the epoch alone gave 9 points on 3 steps); each epoch adds its 1106 batches
    assert _steps(a, "loss") == [800, 1000, 1306, 1506, 1706, 1906, 2106, 2412, 2612]
    assert _series(a, "loss")[:3] == [4.02, 4.05, 4.09]
    # the validation after each epoch's last training log, and its perplexity under its own name
    assert _steps(a, "eval_loss") == [1000, 2106] and _series(a, "eval_loss") == [4.35, 4.35]
    assert _series(a, "eval_ppl") == [77.44, 77.75]


def test_end_of_epoch_lines_need_a_loss_and_counters_need_their_unit(tmp_path: Path):
    # no loss among the values: an accuracy report, not read as a validation loss; "N/M" without "batches" is no counter
    log = ("| end of epoch   1 | time: 12.00s | valid acc  0.51 | valid f1  0.40\n"
           "|   200/ 2983 | lr 20.00 | loss  7.63 | ppl  2063.80\n")
    a = _run(tmp_path, log)
    assert a.run.arrays("eval_loss") is None and a.run.arrays("eval_acc") is None
    assert a.run.arrays("loss") is None or _steps(a, "loss") != [200]


# https://github.com/facebookresearch/fairseq/issues/301 (as pasted, the epoch 5 lines between 4000 and 8000 cut): the
# old fairseq prints the validation as "| valid loss 3.69 | valid ppl 12.94"; the perplexity was read as a second
# eval_loss at the same step
FAIRSEQ_301 = """| epoch 004 | valid on 'valid' subset  1000 / 1311 loss=3.24
| epoch 004 | valid on 'valid' subset | valid loss 3.69 | valid ppl 12.94
| epoch 005  1000 / 8223 loss=2.17 (3.20), wps=959, wpb=897, bsz=32, lr=0.001, clip=100%, gnorm=2.7374
| epoch 005  2000 / 8223 loss=2.20 (3.14), wps=960, wpb=900, bsz=32, lr=0.001, clip=100%, gnorm=2.7204
| epoch 005  3000 / 8223 loss=3.52 (3.08), wps=960, wpb=899, bsz=32, lr=0.001, clip=100%, gnorm=2.6783
| epoch 005 | train loss 2.92 | train ppl 7.59 | s/checkpoint    7748 | words/s    961 | words/batch    906 | bsz    32 | lr 0.001000 | clip 100% | gnorm 2.6727
| epoch 005 | valid on 'valid' subset  1000 / 1311 loss=2.72
| epoch 005 | valid on 'valid' subset | valid loss 3.13 | valid ppl 8.78
"""


def test_a_held_out_perplexity_is_not_the_held_out_loss(tmp_path: Path):
    a = _run(tmp_path, FAIRSEQ_301)
    assert _series(a, "eval_loss") == [3.69, 3.13]
    assert _series(a, "eval_ppl") == [12.94, 8.78]


def test_fairseq_before_num_updates_reads_its_epoch_counter_and_summaries(tmp_path: Path):
    a = _run(tmp_path, FAIRSEQ_301)
    # the per-log loss at the epoch's counter (was numbered 6, 7, 8 after the summary's epoch 5), its own gnorm and lr
    assert _steps(a, "loss") == [1000, 2000, 3000] and _series(a, "loss") == [2.17, 2.20, 3.52]
    assert _series(a, "grad_norm") == [2.7374, 2.7204, 2.6783]
    # the epoch summary is a summary series at the epoch's last log, not a fourth per-log loss
    assert _steps(a, "train_loss") == [3000] and _series(a, "train_loss") == [2.92]
    assert _steps(a, "eval_loss") == [0, 3000]  # epoch 4's validation comes before any log of this paste


def test_new_fairseq_lines_are_not_read_as_the_old_form(tmp_path: Path):
    # https://github.com/facebookresearch/fairseq/issues/514 (two lines as pasted): num_updates is the step, as before
    log = ("| epoch 009:   1000 / 2737 loss=6.220, nll_loss=5.070, ppl=33.60, wps=12800, ups=4.7, wpb=2568, bsz=108, "
           "num_updates=22897, lr=0.000208983, gnorm=1.242, clip=0%, oom=0, wall=4847, train_wall=4501\n"
           "| epoch 009:   2000 / 2737 loss=6.234, nll_loss=5.086, ppl=33.96, wps=12811, ups=4.8, wpb=2571, bsz=108, "
           "num_updates=23897, lr=0.000204564, gnorm=1.242, clip=0%, oom=0, wall=5048, train_wall=4693\n")
    a = _run(tmp_path, log)
    assert _steps(a, "loss") == [22897, 23897]


# https://github.com/NVIDIA/flowtron/issues/42 (the whole paste): Flowtron's get_mask_from_lengths built its mask with
# .byte(); on torch >= 1.2 ~mask is a bitwise NOT (1 -> 254, 0 -> 255) and masks everything; the maintainer's fix was
# .bool(). "10232:  nan" is Flowtron's own "iteration: loss" print, too bare to read as a loss
FLOWTRON_42 = """10232:  nan
WARNING:root:NaN or Inf found in input tensor.
/opt/conda/conda-bld/pytorch_1579040055865/work/aten/src/ATen/native/cuda/LegacyDefinitions.cpp:19: UserWarning: masked_fill_ received a mask with dtype torch.uint8, this behavior is now deprecated,please use a mask with dtype torch.bool instead.
/opt/conda/conda-bld/pytorch_1579040055865/work/aten/src/ATen/native/cuda/LegacyDefinitions.cpp:19: UserWarning: masked_fill_ received a mask with dtype torch.uint8, this behavior is now deprecated,please use a mask with dtype torch.bool instead.
"""


def test_a_uint8_mask_warning_beside_a_nan_names_the_byte_mask_bug(tmp_path: Path):
    a = _run(tmp_path, FLOWTRON_42)
    assert _verdict(a) == ("failed", "framework_bug")  # was healthy: nothing read said NaN
    fw = next(f for f in a.diagnosis.findings if f.code == "FW001")
    assert "KI-TORCH-006" in fw.title and any(".bool()" in r for r in fw.remedies)
    # the tensorboardX warning is the non-finite evidence the entry's shape takes
    assert "NaN or Inf found in input tensor" in " ".join(e.detail for e in fw.evidence)


def test_a_uint8_mask_warning_without_a_nan_names_nothing(tmp_path: Path):
    # the same deprecation warning (flowtron#42's line) in a run whose losses stay finite (lines in Flowtron's
    # "iteration: loss" form would not be read; a plain "step N loss X" form here): no bug to name
    log = FLOWTRON_42.split("\n")[2] + "\n" + "".join(f"step {i} loss {3.0 - 0.2 * i:.3f}\n" for i in range(1, 8))
    a = _run(tmp_path, log)
    assert _verdict(a) == ("healthy", "healthy")
    assert not any(f.code == "FW001" for f in a.diagnosis.findings)


def test_the_tensorboardx_nan_warning_alone_is_no_failure(tmp_path: Path):
    # fp16 loss scaling logs an inf grad norm at every skipped step (LaBraM#4, wenet#1472: healthy, the maintainers
    # said), so tensorboardX's warning alone, or beside those logs, names no failure (CMFNet#3's warning and NaN PSNR
    # lines stay "nothing to judge": the PSNR lines are not read)
    a = _run(tmp_path, CMFNET_3)
    assert not any(f.code == "NUM001" for f in a.diagnosis.findings)
    assert a.run.events_of("nonfinite_logged")


# https://github.com/FanChiMao/CMFNet/issues/3 (the whole paste, the progress bar cut): only tensorboardX's warning and
# NaN PSNR/SSIM validation lines, in a form not read as metrics
CMFNET_3 = """NaN or Inf found in input tensor.
NaN or Inf found in input tensor.
NaN or Inf found in input tensor.
[epoch 8 PSNR: nan --- best_epoch 3 Best_PSNR 23.9811]
[epoch 8 SSIM: nan --- best_epoch 5 Best_SSIM 0.8553]
"""


# https://github.com/phineas-pta/fine-tune-whisper-vi/issues/1 (the Colab traceback as pasted, its link markup kept, the
# blank after "1248" dropped): a
# script made for one language's characters run on another's; transformers' CTC heads check the labels first
W2V2_BERT_CTC = """---------------------------------------------------------------------------
ValueError                                Traceback (most recent call last)
[<ipython-input-11-c697ed9ea325>](https://localhost:8080/#) in <cell line: 1>()
----> 1 TRAINER.train()  # resume_from_checkpoint=True  # only if resume

9 frames
[/usr/local/lib/python3.10/dist-packages/transformers/models/wav2vec2_bert/modeling_wav2vec2_bert.py](https://localhost:8080/#) in forward(self, input_features, attention_mask, output_attentions, output_hidden_states, return_dict, labels)
   1245         if labels is not None:
   1246             if labels.max() >= self.config.vocab_size:
-> 1247                 raise ValueError(f"Label values must be <= vocab_size: {self.config.vocab_size}")
   1248
   1249             # retrieve loss input_lengths from attention_mask

ValueError: Label values must be <= vocab_size: 29
"""


def test_ctc_label_ids_beyond_the_head_are_a_vocabulary_mismatch(tmp_path: Path):
    a = _run(tmp_path, W2V2_BERT_CTC)
    assert _verdict(a) == ("failed", "vocab_mismatch")  # was "crash"
    f = next(f for f in a.diagnosis.findings if f.code == "VOCAB001")
    assert "vocab_size 29" in f.message and any("len(processor.tokenizer)" in r for r in f.remedies)


def test_the_source_line_of_that_check_alone_is_no_event(tmp_path: Path):
    # the raise statement printed in a traceback names no number: not the error itself
    a = _run(tmp_path, 'raise ValueError(f"Label values must be <= vocab_size: {self.config.vocab_size}")\n')
    assert not a.run.events_of("index_out_of_range")


# https://github.com/tsurumeso/vocal-remover/issues/2 (as pasted, the command line and three of the five file pairs cut):
# five pairs of files for a batch of more; the epoch's mean loss divides by the number of batches, 0
VOCALREMOVER_2 = """03_test_mix.wav 03_test_inst.wav
01_test_mix.wav 01_test_inst.wav
100%|████████████████████████████████████████████████████████████████████████████████████████████████████████████████████████████████████| 5/5 [01:52<00:00, 22.41s/it]
0it [00:00, ?it/s]
# epoch 0
  * inner epoch 0
Traceback (most recent call last):
  File "train.py", line 133, in <module>
    train_loss = sum_loss / len(X_train)
ZeroDivisionError: division by zero
"""


def test_a_division_by_zero_before_any_loss_is_an_empty_loader(tmp_path: Path):
    a = _run(tmp_path, VOCALREMOVER_2)
    assert _verdict(a) == ("failed", "data_exhausted")  # was "crash"
    f = next(f for f in a.diagnosis.findings if f.code == "CRASH001")
    assert "yielded no batch" in f.title and any("len(dataloader)" in r for r in f.remedies)


def test_a_division_by_zero_after_logged_losses_stays_a_crash(tmp_path: Path):
    # the same traceback after three logged losses: the loader did yield batches
    log = "".join(f"step {i} loss {3.0 - 0.2 * i:.3f}\n" for i in range(1, 4)) + VOCALREMOVER_2.split("# epoch 0\n")[1]
    a = _run(tmp_path, log)
    assert _verdict(a) == ("failed", "crash")


# https://github.com/open-mmlab/mmdetection/issues/9211 (the first three of the pasted iterations, as read through the
# issue's copy at BinItAI/visdet#800): every annotation of the custom COCO set is iscrowd=1, so no ground-truth box is
# used; both regression heads are exactly 0 from a paste that begins at iteration 15
MMDET_9211 = """2022-11-02 21:25:19,899 - mmdet - INFO - Epoch [1][15/450]	lr: 5.794e-04, eta: 0:41:41, time: 0.327, data_time: 0.137, memory: 3051, loss_rpn_cls: 0.2874, loss_rpn_bbox: 0.0000, loss_cls: 0.0000, acc: 100.0000, loss_bbox: 0.0000, loss_mask: 0.0000, loss: 0.2874
2022-11-02 21:25:20,180 - mmdet - INFO - Epoch [1][16/450]	lr: 6.194e-04, eta: 0:40:39, time: 0.282, data_time: 0.107, memory: 3051, loss_rpn_cls: 0.2382, loss_rpn_bbox: 0.0000, loss_cls: 0.0000, acc: 100.0000, loss_bbox: 0.0000, loss_mask: 0.0000, loss: 0.2383
2022-11-02 21:25:20,486 - mmdet - INFO - Epoch [1][17/450]	lr: 6.594e-04, eta: 0:39:50, time: 0.297, data_time: 0.107, memory: 3051, loss_rpn_cls: 0.2009, loss_rpn_bbox: 0.0000, loss_cls: 0.0000, acc: 100.0000, loss_bbox: 0.0000, loss_mask: 0.0000, loss: 0.2009
"""


def test_two_box_heads_at_zero_at_the_same_logs_mean_no_ground_truth_box(tmp_path: Path):
    a = _run(tmp_path, MMDET_9211)
    assert _verdict(a) == ("failed", "all_labels_masked")  # was healthy
    f = next(f for f in a.diagnosis.findings if f.code == "LBL001")
    assert "loss_bbox" in f.message and "loss_rpn_bbox" in f.message


def test_one_box_head_at_zero_in_a_mid_run_excerpt_is_not_enough(tmp_path: Path):
    # the same lines with the RPN regression term non-zero: one head at 0 from iteration 15 on is no proof of no boxes
    log = MMDET_9211.replace("loss_rpn_bbox: 0.0000", "loss_rpn_bbox: 0.0312")
    a = _run(tmp_path, log)
    assert _verdict(a)[1] != "all_labels_masked"


# https://github.com/TideDra/lmm-r1/issues/43 (two lines of the paste): vLLM's cumem allocator failing to map the
# sleeping engine's memory back at wake-up prints the C++ form of the CUDA error string
def test_the_cuda_error_string_form_of_oom_is_an_oom(tmp_path: Path):
    log = ("(LLMRayActor pid=347862) CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62\n"
           "(ActorModelRayActor pid=348952) \n")
    a = _run(tmp_path, log)
    assert a.run.events_of("oom")
    f = next(f for f in a.diagnosis.findings if f.code == "CRASH001")
    assert f.root_cause == "out_of_memory" and "--vllm_gpu_memory_utilization" in f.remedies[0]


def test_an_oom_outside_vllm_gets_no_vllm_remedy(tmp_path: Path):
    a = _run(tmp_path, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    f = next(f for f in a.diagnosis.findings if f.code == "CRASH001")
    assert f.root_cause == "out_of_memory" and not any("vllm" in r.lower() for r in f.remedies)


# https://github.com/IDSIA/hhmarl_2D/issues/15 (the error as pasted, the tensor's rows cut to three): RLlib PPO's
# action distribution refused the policy's logits; a Real() constraint fails on NaN only
HHMARL_15 = """ValueError: Expected parameter logits (Tensor of shape (280, 13)) of distribution Categorical(logits: torch.Size([280, 13])) to satisfy the constraint IndependentConstraint(Real(), 1), but found invalid values:
tensor([[nan, nan, nan,  ..., nan, nan, nan],
        [nan, nan, nan,  ..., nan, nan, nan],
        [nan, nan, nan,  ..., nan, nan, nan]], grad_fn=<SubBackward0>)
"""


def test_nan_logits_refused_by_a_distribution_are_a_nonfinite_onset(tmp_path: Path):
    a = _run(tmp_path, HHMARL_15)
    assert _verdict(a) == ("inconclusive", "unknown")  # was "crash": the NaN came first, the ValueError is its consequence
    num = next(f for f in a.diagnosis.findings if f.code == "NUM001")
    assert "logits" in num.message and "NaN" in num.message
    assert any("learning rate too high" in r for r in num.remedies)


def test_a_simplex_constraint_failure_is_not_read_as_nan(tmp_path: Path):
    # probs outside the simplex (negative or not summing to 1) are invalid without any NaN
    log = ("ValueError: Expected parameter probs (Tensor of shape (4, 3)) of distribution Categorical(probs: "
           "torch.Size([4, 3])) to satisfy the constraint Simplex(), but found invalid values:\n")
    a = _run(tmp_path, log)
    assert not a.run.events_of("nan_stop")


# https://github.com/autogluon/autogluon/issues/4508 (a commenter's paste of the same failure, lines 7-12 of it): the
# fastai model's callback stops on the NaN, then AutoGluon prints the traceback of that stop
AUTOGLUON_4508 = """        Warning: Exception caused NeuralNetFastAI to fail during training... Skipping this model.
                Exception occured in `EarlyStoppingCallbackWithTimeLimit` when calling event `after_epoch`:
        WARNING: NaN loss encountered in epoch 0!
Detailed Traceback:
Traceback (most recent call last):
  File "/root/miniconda3/lib/python3.10/site-packages/autogluon/core/trainer/abstract_trainer.py", line 1904, in _train_and_save
"""


def test_a_nan_loss_message_above_the_traceback_makes_the_crash_its_consequence(tmp_path: Path):
    a = _run(tmp_path, AUTOGLUON_4508)
    assert a.run.events_of("nan_stop")
    assert _verdict(a) == ("inconclusive", "unknown")  # was "crash": the NaN was reported before the exception
    crash = next(f for f in a.diagnosis.findings if f.code == "CRASH001")
    assert crash.basis == "inferred"


def test_a_guard_that_skips_a_nan_loss_is_no_stop(tmp_path: Path):
    # a loop that skips the batch and trains on says so on the same line: not a stop
    a = _run(tmp_path, "NaN loss detected, skipping batch 12\n" + "".join(f"step {i} loss {3.0 - 0.2 * i:.3f}\n"
                                                                          for i in range(1, 6)))
    assert not a.run.events_of("nan_stop")


def test_a_nan_loss_message_below_the_traceback_leaves_the_crash(tmp_path: Path):
    # the same message printed after the exception (a summary at exit) says nothing about what came first
    log = "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    fit()\nRuntimeError: boom\n"
    a = _run(tmp_path, log + "WARNING: NaN loss encountered in epoch 0!\n")
    assert _verdict(a) == ("failed", "crash")


# https://github.com/hiyouga/LlamaFactory/issues/4278 (the end of the run as pasted, and the "### train" block of the
# YAML config it pasted): Qwen2 LoRA in fp16; the only loss the paste gives is the summary's
LLAMAFACTORY_4278 = """[INFO|tokenization_utils_base.py:2522] 2024-06-14 10:23:35,046 >> Special tokens file saved in saves/qwen2-1.5b/lora/sft/special_tokens_map.json
***** train metrics *****
  epoch                    =     2.9268
  total_flos               =  3778867GF
  train_loss               =        0.0
  train_runtime            = 0:02:59.80
  train_samples_per_second =     16.367
  train_steps_per_second   =      0.501
"""
LLAMAFACTORY_4278_CONFIG = """### train
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
num_train_epochs: 3.0
lr_scheduler_type: cosine
warmup_ratio: 0.1
fp16: true
ddp_timeout: 180000000
"""


def test_a_summary_train_loss_of_exactly_zero_is_not_healthy(tmp_path: Path):
    a = _run(tmp_path, LLAMAFACTORY_4278, config=LLAMAFACTORY_4278_CONFIG, name="train.log")
    # was healthy; inconclusive until round 35, which lets fp16 with no masking warning lead (tests/test_unseen_logs_35.py)
    assert _verdict(a) == ("failed", "fp16_overflow")
    f = next(f for f in a.diagnosis.findings if f.code == "LBL001")
    assert f.title.startswith("The run's average training loss is exactly 0.0") and "bf16" in f.remedies[0]


def test_a_zero_summary_beside_real_per_step_losses_is_left_alone(tmp_path: Path):
    log = "".join(f"{{'loss': {2.0 - 0.1 * i:.4f}, 'learning_rate': 1e-05, 'epoch': {i / 10}}}\n" for i in range(1, 6))
    a = _run(tmp_path, log + LLAMAFACTORY_4278, name="train.log")
    assert not any(f.title.startswith("The run's average training loss is exactly 0.0") for f in a.diagnosis.findings)


# https://github.com/tensorflow/models/issues/8096 (a commenter's failing DeepLab run, from its first printed loss; his
# own data was the cause): DeepLab's tf.Print of the total loss, then TF's summary refusing the NaN, the paste cut there
DEEPLAB_8096 = r"""Total loss is :[0.140642926]
Total loss is :[0.140642881]
INFO:tensorflow:global_step/sec: 1.11037
Total loss is :[0.140642926]
INFO:tensorflow:global_step/sec: 2.71813
Total loss is :[0.140643507]
INFO:tensorflow:global_step/sec: 2.70563
Total loss is :[0.140675873]
INFO:tensorflow:global_step/sec: 2.69324
Total loss is :[nan]
INFO:tensorflow:global_step/sec: 2.70379
Total loss is :[nan]
INFO:tensorflow:global_step/sec: 2.70343
Total loss is :[nan]
INFO:tensorflow:global_step/sec: 2.71518
Total loss is :[nan]
INFO:tensorflow:global_step/sec: 2.72926
Total loss is :[nan]

Traceback (most recent call last):
  File "E:\mypython\lib\site-packages\tensorflow\python\client\session.py", line 1334, in _do_call
    return fn(*args)
  File "E:\mypython\lib\site-packages\tensorflow\python\client\session.py", line 1319, in _run_fn
    options, feed_dict, fetch_list, target_list, run_metadata)
  File "E:\mypython\lib\site-packages\tensorflow\python\client\session.py", line 1407, in _call_tf_sessionrun
    run_metadata)
tensorflow.python.framework.errors_impl.InvalidArgumentError: Nan in summary hist
"""


def test_tf_print_losses_and_a_cut_summary_error_are_read(tmp_path: Path):
    a = _run(tmp_path, DEEPLAB_8096)
    vals = _series(a, "loss")
    assert vals[:2] == [0.140642926, 0.140642881] and vals[-1] != vals[-1]  # the NaN at the end
    assert any(e.data.get("what") == "weights" for e in a.run.events_of("nan_stop"))
    assert _verdict(a) == ("inconclusive", "unknown")  # was "crash" (nothing read but the traceback)
    cands = [f for f in a.diagnosis.findings if f.root_cause == "nan_in_data"]
    assert cands  # the calm curve then NaN: the data is the candidate


def test_two_tf_print_lines_are_not_a_series(tmp_path: Path):
    a = _run(tmp_path, "Total loss is :[0.5]\nTotal loss is :[0.4]\n")
    assert a.run.arrays("loss") is None


# https://github.com/Calamari-OCR/calamari/issues/89 (the first three lines as pasted, the TF deprecation text after the
# third cut): TF's CTC finds no alignment for a line image, and Calamari's own check sees the loss go infinite
CALAMARI_89 = r"""tensorflow/core/util/ctc/ctc_loss_calculator.cc:144] No valid path found.
WARNING: Infinite loss. Skipping batch.
Error: Loss is not finite! Trying to restart from last checkpoint.
"""


def test_loss_is_not_finite_beside_no_valid_path_is_the_ctc_cause(tmp_path: Path):
    a = _run(tmp_path, CALAMARI_89)
    assert _verdict(a) == ("failed", "ctc_output_longer_than_input")  # was healthy (the CTC warning alone)
    f = next(f for f in a.diagnosis.findings if f.code == "DATA001")
    assert f.title.endswith("at line 3 of log.txt")  # a step-less onset is placed by its line, not "step None"
