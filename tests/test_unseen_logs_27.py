"""Round 27 (2026-11-28): logs the held-out sets showed unread or misread, each fixed by a rule that holds for its
family. Every log is quoted from its thread; the guards beside each rule keep the cousins where they were."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _series, _verdict


def _blank_ended(text: str) -> str:
    """``text`` with the blank its paste left at the end of every non-empty line (kept out of the source file)."""
    return "".join(line + (" \n" if line else "\n") for line in text.split("\n"))

# https://github.com/FranxYao/Long-Context-Data-Engineering/issues/13 (the author's reference run, as pasted; the per-length
# bucket lines after loss@4 and loss@2 cut here): a metrics dict printed one "key value" per line under a "step N" line
# every non-empty line of the paste ends with a blank, put back below
LONGCONTEXT_13 = "".join(line + (" \n" if line else "\n") for line in """step 1 token 5m
train/loss 5.5021
train/grad_norm 249.4825
train/learning_rate 0.0000
train/epoch 0.0000
train/per_length_loss/loss@2 4.8841
train/per_length_loss/loss@4 4.2377

step 50 token 250m
train/loss 2.2328
train/grad_norm 12.5982
train/learning_rate 0.0000
train/epoch 0.0300
train/per_length_loss/loss@2 5.6365""".split("\n"))


def test_namespaced_key_value_lines_under_a_step_line_are_read(tmp_path: Path):
    a = _run(tmp_path, LONGCONTEXT_13)
    assert _verdict(a)[0] == "healthy"  # was "nothing to judge"
    arr = a.run.arrays("loss")
    assert arr.steps.tolist() == [1, 50] and arr.values.tolist() == [5.5021, 2.2328]
    assert _series(a, "grad_norm") == [249.4825, 12.5982]


def test_key_value_lines_need_a_namespace_and_a_step_line(tmp_path: Path):
    # without the "/" the lines are prose or headers ("Epoch 5"); without the step line there is no step to give them
    a = _run(tmp_path, "step 1 token 5m\nloss 5.5021\ngrad_norm 249.4825\n\ntrain/loss 2.2328\ntrain/grad_norm 12.5982\n")
    assert a.run.arrays("loss") is None
    assert _verdict(a)[1] == "unknown"


# https://github.com/chuckcho/video-caffe/issues/11 (the two test passes as pasted, the "......." separators dropped): C3D on
# UCF101; by the 19000 test the net has collapsed to chance and the test loss is Caffe's ceiling -ln(FLT_MIN)
VIDEOCAFFE_11 = """Iteration 18000, Testing net (#0)
Test net output #0: accuracy/top-1 = 0.24
Test net output #1: accuracy/top-5 = 0.486
Test net output #2: loss = 3.30735 (* 1 = 3.30735 loss)
Iteration 19000, Testing net (#0)
Test net output #0: accuracy/top-1 = 0.008
Test net output #1: accuracy/top-5 = 0.037
Test net output #2: loss = 87.3366 (* 1 = 87.3366 loss)
"""


def test_caffe_test_net_outputs_are_read_and_a_test_loss_at_the_softmax_ceiling_is_divergence(tmp_path: Path):
    a = _run(tmp_path, VIDEOCAFFE_11)
    assert _verdict(a) == ("failed", "lr_too_high")  # was "nothing to judge"
    assert a.run.arrays("eval_loss").steps.tolist() == [18000, 19000]
    assert _series(a, "eval_accuracy/top-1") == [0.24, 0.008]
    (f,) = [f for f in a.diagnosis.findings if f.code == "DIV001"]
    assert "87.3365" in f.title and f.first_step == 19000


def test_a_test_loss_jump_below_the_ceiling_is_not_the_softmax_floor(tmp_path: Path):
    a = _run(tmp_path, VIDEOCAFFE_11.replace("87.3366", "7.3366"))
    assert not [f for f in a.diagnosis.findings if "87.3365" in f.title]


# https://github.com/rbgirshick/py-faster-rcnn/issues/280 (as pasted): Caffe's solver.cpp prints each train-net output
# blob under the iteration line (faster-rcnn's four loss terms); the smoothed "Iteration N, loss" stays the loss
CAFFE_TRAIN_OUTPUTS = """I0801 19:06:38.232373 45998 solver.cpp:228] Iteration 2080, loss = 0.596326
I0801 19:06:38.232439 45998 solver.cpp:244]     Train net output #0: loss_bbox = 0.116154 (* 1 = 0.116154 loss)
I0801 19:06:38.232456 45998 solver.cpp:244]     Train net output #1: loss_cls = 0.151291 (* 1 = 0.151291 loss)
I0801 19:06:38.232471 45998 solver.cpp:244]     Train net output #2: rpn_cls_loss = 0.169351 (* 1 = 0.169351 loss)
I0801 19:06:38.232484 45998 solver.cpp:244]     Train net output #3: rpn_loss_bbox = 0.303964 (* 1 = 0.303964 loss)

I0801 19:08:26.177532 45998 solver.cpp:228] Iteration 2120, loss = 0.513034
I0801 19:08:26.177601 45998 solver.cpp:244]     Train net output #0: loss_bbox = 0.267161 (* 1 = 0.267161 loss)
I0801 19:08:26.177618 45998 solver.cpp:244]     Train net output #1: loss_cls = 0.225441 (* 1 = 0.225441 loss)
I0801 19:08:26.177630 45998 solver.cpp:244]     Train net output #2: rpn_cls_loss = 0.201166 (* 1 = 0.201166 loss)
I0801 19:08:26.177644 45998 solver.cpp:244]     Train net output #3: rpn_loss_bbox = 0.169628 (* 1 = 0.169628 loss)
"""


def test_caffe_train_net_outputs_are_the_loss_terms_at_their_iteration(tmp_path: Path):
    a = _run(tmp_path, CAFFE_TRAIN_OUTPUTS)
    assert _series(a, "loss") == [0.596326, 0.513034]
    assert _series(a, "loss_cls") == [0.151291, 0.225441] and _series(a, "rpn_loss_bbox") == [0.303964, 0.169628]
    assert a.run.arrays("loss_cls").steps.tolist() == [2080, 2120]
    assert _verdict(a)[0] == "healthy"


# https://github.com/jaehyunnn/ViTPose_pytorch/issues/9 (as pasted): "|"-separated "Name value" cells after an epoch counter,
# a tqdm bar after them; the layer decay was multiplied into the LR at every step, so the LR prints 0 after each epoch
VITPOSE_9 = """🏋️> Epoch [000/210] | Loss 0.0029 | LR 0.00000000 | Step: 100%|██████████| 1827/1827 [03:38<00:00,  8.38it/s]
2023-04-24 21:32:07,523 - utils - INFO - [Summary-train] Epoch [000/210] | Average Loss (train) 0.0047 --- 218.09494 sec. elapsed
2023-04-24 21:32:40,968 - utils - INFO - [Summary-valid] Epoch [000/210] | Average Loss (valid) 0.0032 --- 32.84739 sec. elapsed
🏋️> Epoch [001/210] | Loss 0.0037 | LR 0.00000000 | Step: 100%|██████████| 1827/1827 [03:08<00:00,  9.69it/s]
2023-04-24 21:35:49,590 - utils - INFO - [Summary-train] Epoch [001/210] | Average Loss (train) 0.0034 --- 188.62070 sec. elapsed
2023-04-24 21:36:15,265 - utils - INFO - [Summary-valid] Epoch [001/210] | Average Loss (valid) 0.0032 --- 25.22072 sec. elapsed
"""


def test_pipe_separated_name_value_cells_are_read_at_the_counter(tmp_path: Path):
    a = _run(tmp_path, VITPOSE_9)
    loss = a.run.arrays("loss")
    assert loss.steps.tolist() == [0, 1] and loss.values.tolist() == [0.0029, 0.0037]  # was "nothing to judge"
    assert _series(a, "learning_rate") == [0.0, 0.0]  # "Step: 100%" of the tqdm bar is no counter


def test_pipe_cells_need_a_counter_and_two_values_one_a_loss(tmp_path: Path):
    a = _run(tmp_path, "Epoch [000/210] | Loss 0.0029 | Step: 100%|####| 1827/1827\n"  # one value cell
                       "| Loss 0.5 | LR 0.001 | Acc 0.9 |\n"  # no counter cell
                       "Epoch [001/210] | Acc 0.91 | LR 0.001 | Step: 100%\n")  # no loss
    assert a.run.arrays("loss") is None and a.run.arrays("learning_rate") is None


def test_lr_exactly_zero_at_a_few_logs_with_a_flat_loss_is_not_healthy(tmp_path: Path):
    a = _run(tmp_path, VITPOSE_9)
    assert _verdict(a) == ("inconclusive", "unknown")
    (f,) = [f for f in a.diagnosis.findings if f.code == "LRZ001"]
    assert f.root_cause == "lr_schedule_stalled" and f.confidence < 0.5 and "0 at all 2 logs" in f.title


def test_lr_zero_at_a_few_logs_is_left_alone_when_the_loss_falls_or_the_lr_rises(tmp_path: Path):
    falling = VITPOSE_9.replace("Loss 0.0037", "Loss 0.0017")
    rising = VITPOSE_9.replace("Epoch [001/210] | Loss 0.0037 | LR 0.00000000", "Epoch [001/210] | Loss 0.0037 | LR 0.00010000")
    for log in (falling, rising):
        a = _run(tmp_path, log)
        assert not [f for f in a.diagnosis.findings if f.code == "LRZ001"]


# https://github.com/GitYCC/crnn-pytorch/issues/7 (as pasted, the last nan lines cut): a loss indexed by its batch counter, noisy per-batch values, then NaN for
# good
CRNN_7 = """valid_evaluation: loss=1.832921710359357, acc=0.7594752661693344
train_batch_loss[ 6510 ]:  1.5743603706359863
train_batch_loss[ 6520 ]:  2.0356717109680176
train_batch_loss[ 6530 ]:  2.1139347553253174
train_batch_loss[ 6540 ]:  1.479076623916626
train_batch_loss[ 6550 ]:  1.7650470733642578
train_batch_loss[ 6560 ]:  1.500727891921997
train_batch_loss[ 6570 ]:  1.6885172128677368
train_batch_loss[ 6580 ]:  1.9712326526641846
train_batch_loss[ 6590 ]:  nan
train_batch_loss[ 6600 ]:  nan
train_batch_loss[ 6610 ]:  nan
train_batch_loss[ 6620 ]:  nan
"""


def test_a_loss_indexed_by_its_counter_is_read_at_that_step(tmp_path: Path):
    a = _run(tmp_path, CRNN_7)
    loss = a.run.arrays("loss")
    assert loss.steps.tolist()[:2] == [6510, 6520] and loss.values.tolist()[0] == 1.5743603706359863  # was unread
    assert _verdict(a)[0] == "inconclusive"
    (num,) = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert num.first_step == 6590


def test_a_noisy_per_batch_loss_is_not_a_climb_and_the_suspects_agree_with_the_diagnosis(tmp_path: Path):
    # 1.971 is 1.33x the window's best (1.479) but below its median x 1.5, and the window is not rising
    a = _run(tmp_path, CRNN_7)
    (num,) = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert "loss climbed" not in " ".join(num.remedies)
    assert num.remedies[0].startswith("Suspect 1 of 3") and "a bad batch" in num.remedies[0]
    assert a.diagnosis.verdict.headline.endswith("(best candidate: nan_in_data, 0.45).")


def test_a_steady_climb_before_the_nan_is_a_climb(tmp_path: Path):
    lines = "".join(f"train_batch_loss[ {6500 + 10 * i} ]:  {1.0 + 0.1 * i:.4f}\n" for i in range(8))
    a = _run(tmp_path, lines + "train_batch_loss[ 6580 ]:  nan\n")
    (num,) = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert "the loss climbed from 1 (step 6500) to 1.7 (step 6570)" in num.remedies[0]
    assert not [f for f in a.diagnosis.findings if f.code == "DATA001"]


# https://github.com/huggingface/trl/issues/1371 (the Gemma entry of the reporter's log_history, as pasted): DPO on a V100
# with the model loaded in fp16; a loss of 9.08e6 beside NaN log-probs is an overflow, not empty completions
TRL_1371 = """"log_history": [
    {
      "epoch": 0.0,
      "grad_norm": NaN,
      "learning_rate": 0.0,
      "logits/chosen": NaN,
      "logits/rejected": NaN,
      "logps/chosen": NaN,
      "logps/rejected": NaN,
      "loss": 9078019.2,
      "rewards/accuracies": 0.0,
      "rewards/chosen": NaN,
      "rewards/margins": NaN,
      "rewards/rejected": NaN,
      "step": 5
    },
"""


def test_nan_logps_beside_a_loss_past_fp16_range_are_not_empty_responses(tmp_path: Path):
    a = _run(tmp_path, TRL_1371)
    assert _verdict(a) == ("inconclusive", "unknown")  # was a failed empty_response at 60%
    assert not [f for f in a.diagnosis.findings if f.root_cause == "empty_response"]


def test_nan_logps_beside_an_ordinary_loss_still_read_as_empty_responses(tmp_path: Path):
    a = _run(tmp_path, TRL_1371.replace('"loss": 9078019.2', '"loss": 0.6931'))
    assert [f for f in a.diagnosis.findings if f.root_cause == "empty_response"]


# https://github.com/dreamquark-ai/tabnet/issues/537 (the tail of the reporter's log, as pasted): drop_last with fewer rows
# than one batch, so no batch is ever trained: every epoch prints a loss of 0.0 in 0 seconds
TABNET_537 = """epoch 85 | loss: 0.0     |  0:00:00s
epoch 86 | loss: 0.0     |  0:00:00s
epoch 87 | loss: 0.0     |  0:00:00s
epoch 88 | loss: 0.0     |  0:00:00s
epoch 89 | loss: 0.0     |  0:00:00s
epoch 90 | loss: 0.0     |  0:00:00s
epoch 91 | loss: 0.0     |  0:00:00s
epoch 92 | loss: 0.0     |  0:00:00s
epoch 93 | loss: 0.0     |  0:00:00s
epoch 94 | loss: 0.0     |  0:00:00s
epoch 95 | loss: 0.0     |  0:00:00s
epoch 96 | loss: 0.0     |  0:00:00s
epoch 97 | loss: 0.0     |  0:00:00s
epoch 98 | loss: 0.0     |  0:00:00s
epoch 99 | loss: 0.0     |  0:00:00s
"""


def test_a_loss_exactly_zero_at_every_log_of_a_tail_is_not_healthy(tmp_path: Path):
    a = _run(tmp_path, TABNET_537)
    assert _verdict(a) == ("inconclusive", "unknown")  # was healthy at 90%
    (f,) = [f for f in a.diagnosis.findings if f.code == "LBL001" and "exactly 0 at all 15 logs" in f.title]
    assert f.first_step == 85 and f.root_cause is None


def test_zero_losses_need_five_logs_and_no_other_value(tmp_path: Path):
    four = "\n".join(TABNET_537.splitlines()[:4]) + "\n"
    mixed = TABNET_537.replace("epoch 85 | loss: 0.0 ", "epoch 85 | loss: 0.31")
    for log in (four, mixed):
        a = _run(tmp_path, log)
        assert not [f for f in a.diagnosis.findings if "exactly 0 at all" in f.title]


# https://github.com/SalesforceAIResearch/uni2ts/issues/125 (as pasted): Lightning bars of an iterable without a length
# (no percentage, a "?" total); a negative NLL of a continuous distribution is normal (the maintainers)
UNI2TS_125 = """Epoch 2: |          | 40/? [01:06<00:00,  0.60it/s, v_num=2, train/PackedNLLLoss=0.790]
Epoch 48: |          | 1/? [01:06<00:00,  0.60it/s, v_num=2, train/PackedNLLLoss=-1.640]
"""


def test_a_lightning_bar_without_a_total_is_read(tmp_path: Path):
    a = _run(tmp_path, UNI2TS_125)
    assert _verdict(a)[0] == "healthy"  # was "nothing to judge"
    assert a.run.arrays("loss").values.tolist() == [0.79, -1.64]
    steps = a.run.arrays("loss").steps.tolist()
    assert steps[0] < steps[1]  # epoch 2 before epoch 48, each epoch counted as more batches than any bar printed


# https://github.com/v1xerunt/COMPOSE/issues/1 (as pasted): an iteration counter that restarts at 0 every epoch, with no
# total; the loss is NaN from the second epoch on
COMPOSE_1 = """ehr = np.array(train_ehr_dataset)[batch_id]
Epoch 0, Iter 0: Loss:1.0637 S-loss:0.9642
Epoch 1, Iter 0: Loss:nan S-loss:nan
Epoch 2, Iter 0: Loss:nan S-loss:nan
Epoch 3, Iter 0: Loss:nan S-loss:nan
"""


def test_a_counter_back_at_its_last_value_in_a_new_epoch_restarted(tmp_path: Path):
    a = _run(tmp_path, COMPOSE_1)
    loss = a.run.arrays("loss")
    assert loss.steps.tolist() == [0, 1, 2, 3]  # was 0, 0, 0, 0: every epoch's "Iter 0" on one step
    (num,) = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert num.first_step == 1


# https://github.com/deepfakes/faceswap/issues/188 (as pasted, the first six of twelve lines): one line per save, each
# autoencoder's loss named by its letter, no counter; a loss falling this fast is normal (the maintainers)
FACESWAP_188 = """saved model weights loss_A: 0.19750, loss_B: 0.15107
saved model weights loss_A: 0.15105, loss_B: 0.10045
saved model weights loss_A: 0.10557, loss_B: 0.07693
saved model weights loss_A: 0.08569, loss_B: 0.06992
saved model weights loss_A: 0.07518, loss_B: 0.06174
saved model weights loss_A: 0.06855, loss_B: 0.05906
"""


def test_losses_named_by_a_capital_suffix_are_read(tmp_path: Path):
    a = _run(tmp_path, FACESWAP_188)
    assert _verdict(a)[0] == "healthy"  # was "nothing to judge"
    assert _series(a, "loss_a")[:2] == [0.1975, 0.15105] and _series(a, "loss_b")[-1] == 0.05906


def test_a_lowercase_suffix_is_still_a_term_not_a_model(tmp_path: Path):
    a = _run(tmp_path, FACESWAP_188.replace("loss_A", "loss_cls").replace("loss_B", "loss_bbox"))
    assert a.run.arrays("loss_cls") is None  # terms without a counter or a total loss stay unread, as before


# https://github.com/zhuchen03/FreeLB/issues/12 (the reporter's log, from their fork's logs/ folder the thread links; the
# lines around the start and the first and last evaluations): --restore-file pointed to a pretrained RoBERTa that was
# not there, so the fine-tune started from random weights and ended at chance on RTE
FREELB_12 = """| model roberta_large, criterion SentencePredictionCriterion
| num. model params: 356462683 (num. trained: 356462683)
| training on 1 GPUs
| max tokens per GPU = 4400 and max sentences per GPU = 2
| no existing checkpoint found pretrained/roberta.large/model.pt
| epoch 001 | loss 1.118 | nll_loss 0.016 | ppl 1.01 | wps 567 | ups 0 | wpb 1136.673 | bsz 15.962 | num_updates 156 | lr 9.82236e-06 | gnorm 5.722 | clip 0.000 | oom 0.000 | wall 313 | train_wall 309 | smooth_reg 0 | accuracy 0.382329
| epoch 001 | valid on 'valid' subset | loss 1.006 | nll_loss 0.014 | ppl 1.01 | num_updates 156 | pearson nan | spearman nan | mcc 0 | f1 0 | smooth_reg 0 | accuracy 0.52518 | acc&f1 0.26259
| epoch 009 | valid on 'valid' subset | loss 0.998 | nll_loss 0.014 | ppl 1.01 | num_updates 1404 | pearson nan | spearman nan | mcc 0 | f1 0 | best_accuracy 0.52518 | smooth_reg 0 | accuracy 0.52518 | acc&f1 0.26259
| epoch 010 | valid on 'valid' subset | loss 1.008 | nll_loss 0.015 | ppl 1.01 | num_updates 1560 | pearson nan | spearman nan | mcc 0 | f1 0.642157 | best_accuracy 0.52518 | smooth_reg 0 | accuracy 0.47482 | acc&f1 0.558489
"""


def test_a_pretrained_checkpoint_not_found_is_the_cause(tmp_path: Path):
    a = _run(tmp_path, FREELB_12)
    assert _verdict(a) == ("failed", "pretrained_weights_not_loaded")  # was healthy
    (f,) = [f for f in a.diagnosis.findings if f.code == "PRE001"]
    assert "model.pt" in f.title and "0.5252" in " ".join(e.detail for e in f.evidence)
    assert "--restore-file" in f.remedies[0]


def test_fairseqs_own_resume_file_not_found_is_a_fresh_start(tmp_path: Path):
    # every fresh fairseq run prints this for checkpoint_last.pt under --save-dir: nothing to resume, no failure
    a = _run(tmp_path, FREELB_12.replace("pretrained/roberta.large/model.pt", "checkpoints/checkpoint_last.pt"))
    assert not [f for f in a.diagnosis.findings if f.code == "PRE001"]


# https://github.com/NVIDIA/DeepLearningExamples/issues/549 (as pasted): TF Estimator's
# NanTensorHook logs "Model diverged with loss = NaN." before raising NanLossDuringTrainingError
DLE_549 = """Skipping time record for  1  due to checkpoint-saving/warmup overhead
INFO:tensorflow:loss = 11.222988, step = 1
I0606 09:26:10.654364 46912496659904 basic_session_run_hooks.py:262] loss = 11.222988, step = 1
INFO:tensorflow:loss = 11.166957, step = 1
I0606 09:26:13.364254 46912496659904 basic_session_run_hooks.py:262] loss = 11.166957, step = 1
INFO:tensorflow:loss = 11.153452, step = 1
I0606 09:26:13.499738 46912496659904 basic_session_run_hooks.py:262] loss = 11.153452, step = 1
INFO:tensorflow:loss = 11.164111, step = 1
I0606 09:26:13.518184 46912496659904 basic_session_run_hooks.py:262] loss = 11.164111, step = 1
ERROR:tensorflow:Model diverged with loss = NaN.
E0606 09:34:26.659411 46912496659904 basic_session_run_hooks.py:760] Model diverged with loss = NaN.
Skipping time record for  2  due to checkpoint-saving/warmup overhead
ERROR:tensorflow:Model diverged with loss = NaN.
E0606 09:34:26.717127 46912496659904 basic_session_run_hooks.py:760] Model diverged with loss = NaN.
"""


def test_tf_estimators_model_diverged_message_is_a_nan_stop(tmp_path: Path):
    a = _run(tmp_path, DLE_549)
    assert _verdict(a)[0] == "inconclusive"  # was healthy: the loss lines before it are finite
    assert a.run.events_of("nan_stop")


# https://github.com/NVIDIA/DeepLearningExamples/issues/543 (two training lines and the last six
# loss-scale lines of the paste): NVIDIA's BERT logs the apex scaler's new scale through DLLogger at every skipped step
DLE_543 = _blank_ended("""DLL 2020-05-29 11:31:45.763470 - Training Epoch: 0 Training Iteration: 1787  average_loss : 2.354230079650879  step_loss : 3.146484375  learning_rate : 0.005360045911827694
DLL 2020-05-29 13:00:26.908374 - Training Epoch: 0 Training Iteration: 1887  average_loss : 2.2108074378967286  step_loss : 1.75  learning_rate : 0.005659992521331203
DLL 2020-05-30 07:44:45.300081 - PARAMETER loss_scale : 1.8189894035458565e-12
DLL 2020-05-30 07:45:39.157383 - PARAMETER loss_scale : 9.094947017729282e-13
DLL 2020-05-30 07:46:33.188567 - PARAMETER loss_scale : 4.547473508864641e-13
DLL 2020-05-30 07:47:27.456208 - PARAMETER loss_scale : 2.2737367544323206e-13
DLL 2020-05-30 07:48:21.566904 - PARAMETER loss_scale : 1.1368683772161603e-13
DLL 2020-05-30 07:49:15.964050 - PARAMETER loss_scale : 5.684341886080802e-14""")


def test_dlloggers_loss_scale_parameter_lines_are_overflows(tmp_path: Path):
    a = _run(tmp_path, DLE_543)
    assert _verdict(a) == ("failed", "loss_scale_collapse")  # was healthy
    assert len(a.run.events_of("overflow")) == 6
    (f,) = [f for f in a.diagnosis.findings if f.code == "PREC001"]
    assert "5.68e-14" in f.title


# https://github.com/iperov/DeepFaceLab/issues/263 and https://github.com/ultralytics/ultralytics/issues/1451 (the last
# line of each paste, cut mid-word where the thread's copy ends): the phrase is enough
def test_an_oom_line_cut_mid_word_is_still_an_oom(tmp_path: Path):
    for line in ("Error: OOM when allocating tenso", "torch.cuda.OutOfMemoryErro"):
        a = _run(tmp_path, "Starting. Press \"Enter\" to stop training and save model.\n" + line + "\n")
        assert _verdict(a) == ("failed", "out_of_memory"), line


# https://github.com/Lightning-AI/litgpt/issues/221 (the loss line and the first frames of the
# traceback, as retyped by the reporter): the run died after its loss went NaN
LITGPT_221 = """iter 9599 step 600: loss nan, iter time: 65.33ms (optimizer.step)
Validating
Recommend a movie for me to watch during the weekend and explain the reason.
Traceback (most recent call last):
File "/home/c zaharia/lit-gpt/finetune/adapter.py", line 299, in <module>
CLI (setup) \n"""


def test_a_crash_after_the_loss_went_nan_is_not_the_verdict(tmp_path: Path):
    a = _run(tmp_path, LITGPT_221)
    assert _verdict(a) == ("inconclusive", "unknown")  # was a failed "crash"
    (c,) = [f for f in a.diagnosis.findings if f.code == "CRASH001"]
    assert c.basis == "inferred" and "non-finite before it" in c.message


# https://github.com/PaddlePaddle/PaddleDetection/issues/6048 (as pasted): PP-YOLOE on fewer GPUs; the loss climbs 4.7 -> 8.4 -> 21.5 as the warmup raises the LR
PADDLEDET_6048 = """[05/24 16:55:42] ppdet.engine INFO: Epoch: [0] [  0/166] learning_rate: 0.000000 loss: 4.831001 loss_cls: 1.623000 loss_iou: 0.746897 loss_dfl: 2.681520 loss_l1: 2.082105 eta: 16:21:30 batch_cost: 1.1825 data_cost: 0.1905 ips: 2.5369 images/s
[05/24 17:00:25] ppdet.engine INFO: Epoch: [0] [100/166] learning_rate: 0.004217 loss: 4.718459 loss_cls: 2.129966 loss_iou: 0.665714 loss_dfl: 2.090601 loss_l1: 2.087489 eta: 1 day, 12:32:16 batch_cost: 2.6612 data_cost: 1.5758 ips: 1.1273 images/s
[05/24 17:03:29] ppdet.engine INFO: Epoch: [1] [  0/166] learning_rate: 0.007000 loss: 8.422877 loss_cls: 5.889220 loss_iou: 0.651913 loss_dfl: 2.083613 loss_l1: 2.060118 eta: 1 day, 12:22:24 batch_cost: 2.5678 data_cost: 1.3366 ips: 1.1683 images/s
[05/24 17:07:54] ppdet.engine INFO: Epoch: [1] [100/166] learning_rate: 0.011217 loss: 21.496906 loss_cls: 19.170841 loss_iou: 0.541128 loss_dfl: 1.721369 loss_l1: 1.121590 eta: 1 day, 11:31:50 batch_cost: 2.4889 data_cost: 1.3846 ips: 1.2054 images/s
"""


def test_a_short_paste_whose_loss_runs_away_during_warmup_is_lr_too_high(tmp_path: Path):
    a = _run(tmp_path, PADDLEDET_6048)
    assert _verdict(a) == ("failed", "lr_too_high")  # was healthy
    (f,) = [f for f in a.diagnosis.findings if f.code == "DIV001"]
    assert "4.56x its lowest" in f.title and "learning rate rose from 0.004217 to 0.01122" in f.message


# https://github.com/dandelin/ViLT/issues/7 (as pasted): a noisy pretraining loss during a 25k-step warmup, normal (the
# maintainer); it ends at its highest, but 1.3x its lowest is noise, not a runaway
VILT_7 = """Epoch 0:  34%|███▍      | 12412/36673 [4:26:06<8:40:09,  1.29s/it, loss=2.58, v_num=0]

Epoch 0:  35%|███▍      | 12665/36673 [4:36:41<8:44:29,  1.31s/it, loss=3.12, v_num=0]

Epoch 0:  39%|███▉      | 14368/36673 [5:43:41<8:53:33,  1.44s/it, loss=2.57, v_num=0]

Epoch 0:  40%|███▉      | 14583/36673 [5:56:04<8:59:23,  1.47s/it, loss=3.36, v_num=0]
"""


def test_a_noisy_short_paste_ending_high_is_not_a_runaway(tmp_path: Path):
    a = _run(tmp_path, VILT_7)
    assert _verdict(a)[0] == "healthy"
    assert not [f for f in a.diagnosis.findings if f.code == "DIV001"]


# https://github.com/matterport/Mask_RCNN/issues/1162 (as pasted): Keras' progress bar with the total NaN and every one of
# the five loss terms finite (the reporter's fix was another Keras version)
MASKRCNN_1162 = """9/500 [..............................] - ETA: 43:03 - loss: nan - rpn_class_loss: 0.4798 - rpn_bbox_loss: 0.5489 - mrcnn_class_loss: 1.1758 - mrcnn_bbox_loss: 0.4309 - mrcnn_mask_loss: 0.2511
"""


def test_a_nan_total_beside_finite_terms_points_outside_the_terms(tmp_path: Path):
    a = _run(tmp_path, MASKRCNN_1162)
    (num,) = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert num.remedies[0].startswith("The total is non-finite while every logged term of it is finite")


def test_a_nan_total_with_a_nan_term_is_not_outside_the_terms(tmp_path: Path):
    a = _run(tmp_path, MASKRCNN_1162.replace("mrcnn_mask_loss: 0.2511", "mrcnn_mask_loss: nan"))
    (num,) = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert not any(r.startswith("The total is non-finite") for r in num.remedies)
