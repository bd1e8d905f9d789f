"""Round 38 (2026-11-29): failures the round-38 held-out threads and the issues' noticed-but-left list showed
unexplained, each fixed for its family; every log is quoted from its source (named above it), with guards for the
cousins."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _verdict
from tests.test_unseen_logs_33 import _run_in


def _finding(a, code: str):
    return next((f for f in a.diagnosis.findings if f.code == code), None)


# -- Megatron's iteration line with no loss: training_log prints a loss only ``if avg > 0.0`` --------------------------

# https://github.com/deepspeedai/Megatron-DeepSpeed/pull/434 (as quoted): under the DeepSpeed engine the NaN check never
# ran, so the NaN loss went into the average and the line lost its 'lm loss' while 'number of nan iterations' stayed 0
MEGA_DS_434 = (
    " iteration        9/      10 | consumed samples:          108 | consumed tokens:       442368 | elapsed time per "
    "iteration (ms): 1979.2 | learning rate: 4.219E-07 | global batch size:    12 | loss scale: 1.0 | actual seqlen:  "
    "4096 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 6.063 | tokens per "
    "gpu per second (tgs): 2069.506 | TFLOPs: 127.00 |\n")

# guard: fp16's first iterations, each skipped while the loss scale falls from 2^32, print no loss either (nothing
# advanced); lines as printed by Megatron-LM's training_log, quoted from a public NeMo/Megatron walkthrough
MEGA_FP16_START = "".join(
    f" [2024-08-01 09:44:5{i + 5}] iteration        {i + 1}/       5 | consumed samples:           {32 * (i + 1)} | "
    f"elapsed time per iteration (ms): {t} | throughput per GPU (TFLOP/s/GPU): 1.0 | learning rate: 6.000000E-05 | "
    f"global batch size:    32 | loss scale: {s:.1f} | number of skipped iterations:   1 | number of nan iterations:   0 |\n"
    for i, (t, s) in enumerate([(3902.7, 4294967296.0), (689.4, 2147483648.0), (645.4, 1073741824.0)]))


def test_a_megatron_line_without_a_loss_and_nothing_skipped_is_a_hidden_nan(tmp_path: Path):
    a = _run_in(tmp_path, 0, MEGA_DS_434)
    status, cause = _verdict(a)[:2]
    assert status != "healthy"
    assert cause == "framework_bug"  # KI-MEGATRON-001: the NaN check that never counts a NaN under bf16/DeepSpeed
    f = next(f for f in a.diagnosis.findings if f.root_cause == "framework_bug")
    assert any("prints no loss" in e.detail and "step 9" in e.detail for e in f.evidence)


def test_megatron_fp16_calibration_lines_without_a_loss_stay_healthy(tmp_path: Path):
    a = _run_in(tmp_path, 0, MEGA_FP16_START)
    assert not any(f.root_cause == "framework_bug" for f in a.diagnosis.findings)
    assert _verdict(a)[0] != "failed"


def test_a_megatron_line_with_its_loss_is_not_a_hidden_nan(tmp_path: Path):
    log = MEGA_DS_434.replace("global batch size:    12 |", "global batch size:    12 | lm loss: 2.134567E+00 |")
    a = _run_in(tmp_path, 0, log)
    assert not any(f.root_cause == "framework_bug" for f in a.diagnosis.findings)


# -- a step-less held-out line after another format's record belongs to that record ------------------------------------

# https://github.com/shekkizh/FCN.tensorflow/issues/14 (as pasted): the validation line follows the step it evaluated
FCN_14 = """Setting up Saver...
Step: 0, Train_loss:nan
2017-03-17 13:55:04.919050 ---> Validation_loss: nan
Step: 10, Train_loss:nan
Step: 20, Train_loss:nan
Step: 30, Train_loss:nan
Step: 40, Train_loss:nan
"""


def test_a_stepless_validation_line_takes_the_step_of_the_record_above_it(tmp_path: Path):
    a = _run_in(tmp_path, 0, FCN_14)
    df = a.run.scalars
    ev = df[df["metric"] == "eval_loss"]
    assert ev["step"].tolist() == [0]  # was 41: numbered after the chunk's last record
    assert df[df["metric"] == "loss"]["step"].tolist() == [0, 10, 20, 30, 40]


# guards: https://github.com/deepgram/kur/issues/27 (two evaluations, prose between: each its own point) and Lasagne's
# MNIST example as quoted on a Cross Validated mirror (https://52sbl.cn/discussion/126789.html): train and validation
# lines under an epoch header keep their running count
KUR_27 = """[INFO 2017-03-02 18:11:38,332 kur.model.executor:175] Validation loss: 155.686
Prediction: "i know wat mammock ind a forto guervev en iwile set she give tat"
Truth: "i know what mamma can afford to give and i will see she gives it"
[INFO 2017-03-02 20:43:30,224 kur.model.executor:175] Validation loss: 159.761
"""
LASAGNE = """Epoch 1 of 500 took 1.858s
  training loss:                1.233348
  validation loss:              0.405868
  validation accuracy:          88.78 %
Epoch 2 of 500 took 1.845s
  training loss:                0.571644
  validation loss:              0.310221
  validation accuracy:          91.24 %
Epoch 3 of 500 took 1.845s
  training loss:                0.471582
  validation loss:              0.265931
  validation accuracy:          92.35 %
"""


def test_stepless_validation_lines_of_their_own_keep_their_count(tmp_path: Path):
    a = _run_in(tmp_path, 0, KUR_27)
    df = a.run.scalars
    assert df[df["metric"] == "eval_loss"]["step"].nunique() == 2
    b = _run_in(tmp_path, 1, LASAGNE)
    df = b.run.scalars
    tr, ev = df[df["metric"] == "loss"], df[df["metric"] == "eval_loss"]
    assert tr["step"].nunique() == 3 and ev["step"].nunique() == 3
    assert max(tr["step"]) < 100 and max(ev["step"]) < 100  # one count for both, not the epoch beside a line count


# -- Megatron's skipped-iterations counter: the scaler's first search is not an overflow, a scale that never moves is ---

# https://github.com/NVIDIA/Megatron-LM/issues/602 (as pasted): every iteration skipped at a loss scale that stays at 16384
MEGA_602 = "".join(
    f" iteration        {i}/ 2753818 | consumed samples:            {8 * i} | elapsed time per iteration (ms): {t} | "
    f"learning rate: 1.000E-07 | global batch size:     8 | loss scale: 16384.0 | number of skipped iterations:   1 | "
    f"number of nan iterations:   0 |\n"
    for i, t in ((1, 5801.1), (2, 1152.3), (3, 1118.1), (4, 1119.8)))


def test_every_iteration_skipped_at_a_scale_that_never_falls_is_still_an_overflow(tmp_path: Path):
    a = _run_in(tmp_path, 0, MEGA_602)
    assert _verdict(a) == ("failed", "fp16_overflow")


def test_the_scalers_first_search_down_from_2_32_is_not_an_overflow(tmp_path: Path):
    a = _run_in(tmp_path, 0, MEGA_FP16_START)
    assert not any(f.root_cause == "fp16_overflow" and f.severity == "error" for f in a.diagnosis.findings)


# -- pair records: three-word keys and a ``steps`` counter; a logger's time-and-level prefix ---------------------------

# https://github.com/JohannesAck/tf2multiagentrl/issues/5 (the maintainer's run, as pasted): openai/maddpg's train.py
# ``print("steps: {}, episodes: {}, mean episode reward: {}, time: {}".format(...))``
MADDPG_5 = """Using good policy matd3 and adv policy matd3
Starting iterations...
steps: 24999, episodes: 1000, mean episode reward: -664.9971547698431, time: 54.804
steps: 49999, episodes: 2000, mean episode reward: -736.7931487428144, time: 83.288
steps: 74999, episodes: 3000, mean episode reward: -606.1058624842383, time: 73.766
steps: 99999, episodes: 4000, mean episode reward: -578.8372244835183, time: 94.275
"""

# https://github.com/PlayVoice/vits_chinese/issues/103 (as pasted, the reporter's "LOG: " kept): VITS's utils.get_logger
# format, ``"%(asctime)s\\t%(name)s\\t%(levelname)s\\t%(message)s"``, one record over two lines
VITS_103 = ("LOG: 2023-06-29 15:09:18,527\tbert_vits\tINFO\tloss_disc=2.641, loss_gen=1.992, loss_fm=3.197\n"
            "2023-06-29 15:09:18,527\tbert_vits\tINFO\tloss_mel=15.999, loss_dur=0.107, loss_kl=1.762\n"
            "2023-06-29 15:09:18,527\tbert_vits\tINFO\tloss_kl_r=0.000\n")


def test_maddpg_reward_lines_are_read_at_their_steps(tmp_path: Path):
    a = _run_in(tmp_path, 0, MADDPG_5)
    df = a.run.scalars
    rew = df[df["metric"] == "mean episode reward"].sort_values("step")
    assert rew["step"].tolist() == [24999, 49999, 74999, 99999]
    assert rew["value"].iloc[0] == -664.9971547698431
    assert not set(df["metric"]) & {"episodes", "time", "steps"}  # counters, not metrics
    status = _verdict(a)[0]
    assert status == "healthy" and "mean episode reward -665" in a.diagnosis.verdict.headline


def test_a_record_after_a_loggers_time_and_level_is_read(tmp_path: Path):
    a = _run_in(tmp_path, 0, VITS_103)
    df = a.run.scalars
    assert {"loss_disc", "loss_gen", "loss_fm", "loss_mel", "loss_dur", "loss_kl"} <= set(df["metric"])
    assert df[df["metric"] == "loss_mel"]["value"].tolist() == [15.999]
    assert _verdict(a)[0] == "healthy"


def test_a_loggers_settings_line_is_not_a_record(tmp_path: Path):
    # guard: after the prefix, pairs that name no training signal (a settings print) are no record
    a = _run_in(tmp_path, 0, "2023-06-29 15:09:10,527\ttrainer\tINFO\tbatch_size=8, segment_size=8192, warmup_epochs=0\n")
    assert not len(a.run.scalars)


# -- CleanRL's episode lines -------------------------------------------------------------------------------------------

# CleanRL's ppo.py/dqn.py ``print(f"global_step={global_step}, episodic_return={info['episode']['r']}")``, the return a
# one-element array; lines as quoted in a public CleanRL walkthrough (``cleanrl/ppo.py --env-id CartPole-v1``) and a
# DQN-Atari run's output beside moviepy's video lines
CLEANRL_PPO = """global_step=476, episodic_return=[13.]
global_step=61440, episodic_return=[236.]
global_step=120832, episodic_return=[500.]
SPS: 2533
"""
CLEANRL_DQN = """Moviepy - Done !
global_step=150, episodic_return=[360.]
Moviepy - Building video videos/rl-video-episode-1.mp4.
global_step=912, episodic_return=210.0
"""


def test_cleanrl_episode_returns_are_read_at_their_global_step(tmp_path: Path):
    a = _run_in(tmp_path, 0, CLEANRL_PPO)
    df = a.run.scalars
    ret = df[df["metric"] == "episodic_return"].sort_values("step")
    assert ret["step"].tolist() == [476, 61440, 120832] and ret["value"].tolist() == [13.0, 236.0, 500.0]
    assert _verdict(a)[0] == "healthy" and "episodic_return 13 -> 500" in a.diagnosis.verdict.headline
    b = _run_in(tmp_path, 1, CLEANRL_DQN)
    df = b.run.scalars
    assert df[df["metric"] == "episodic_return"]["value"].tolist() == [360.0, 210.0]


# -- transformers' notebook table (NotebookProgressCallback) is the HF Trainer's log ----------------------------------

# a Kaggle notebook's NER fine-tune (public repository content, copied out of the notebook as tab-separated text): the
# columns transformers/utils/notebook.py names, ``[self.first_column] + ["Training Loss"]`` (+ "Validation Loss", metrics)
HF_NOTEBOOK_HEALTHY = (
    "Epoch\tTraining Loss\tValidation Loss\tPrecision\tRecall\tF1\tAccuracy\n"
    "1\t5.004256\t2.115627\t0.190751\t0.334459\t0.242945\t0.848920\n"
    "2\t3.116416\t1.428805\t0.460870\t0.716216\t0.560847\t0.921675\n"
    "3\t2.643459\t1.354823\t0.465553\t0.753378\t0.575484\t0.924207\n"
    "4\t2.457795\t1.323661\t0.669643\t0.760135\t0.712025\t0.958474\n")
# the same layout holding the values of https://github.com/hiyouga/LlamaFactory/issues/506's trainer_log (fp16 LoRA SFT:
# 2.7044 at step 4440, then 0.0): the Trainer's logging_nan_inf_filter logs a window of NaN losses as 0.0
HF_NOTEBOOK_CLIFF = "Step\tTraining Loss\n4440\t2.704400\n4450\t0.000000\n4460\t0.000000\n4470\t0.000000\n"


def test_the_hf_notebook_table_is_read_as_the_trainers_log(tmp_path: Path):
    a = _run_in(tmp_path, 0, HF_NOTEBOOK_HEALTHY)
    assert "hf_trainer" in a.run.frameworks
    assert _verdict(a)[0] == "healthy"


def test_a_notebook_tables_fall_to_exactly_zero_is_the_nan_filters_window(tmp_path: Path):
    a = _run_in(tmp_path, 0, HF_NOTEBOOK_CLIFF)
    assert _verdict(a)[0] != "healthy"  # was healthy: "loss 2.704 -> 0 over 4 logged points"
    ev = [e.detail for f in a.diagnosis.findings for e in f.evidence]
    assert any("exactly 0.0 at step 4450, right after 2.704 at step 4440" in d for d in ev)


# -- a scalar tensor's repr where the value goes -----------------------------------------------------------------------

# https://github.com/nlesc-dirac/pytorch/issues/4 (as pasted): ``print("Loss: ", loss)`` on a one-element tensor, between
# prints of the parameters and their gradients (multi-element tensors, not values)
DIRAC_4 = """Parametri:  tensor([2.4903e-01, 2.4903e-01, 5.4571e+02, 8.3759e+02, 9.9617e-02],
       device='cuda:0', requires_grad=True)
Gradiente:  tensor([-969.7510,    0.0000,       nan,       nan,    0.0000],
       device='cuda:0')
Loss:  tensor([2478.5229], device='cuda:0', grad_fn=<NegBackward0>)
Parametri:  tensor([2.5001e-01, 2.5001e-01, 5.4500e+02, 8.3650e+02, 1.0001e-01],
       device='cuda:0', requires_grad=True)
Gradiente:  tensor([-951.9085,    0.0000,       nan,       nan,    0.0000],
       device='cuda:0')
Loss:  tensor([2477.5913], device='cuda:0', grad_fn=<NegBackward0>)
Parametri:  tensor([2.4952e-01, 2.4952e-01, 5.4536e+02, 8.3705e+02, 9.9812e-02],
       device='cuda:0', requires_grad=True)
Gradiente:  tensor([-960.8049,    0.0000,       nan,       nan,    0.0000],
       device='cuda:0')
Loss:  tensor([2478.0564], device='cuda:0', grad_fn=<NegBackward0>)
"""


def test_a_printed_scalar_tensor_is_read_as_its_value(tmp_path: Path):
    from autopsy.ingest.text_stream import untensor

    a = _run_in(tmp_path, 0, DIRAC_4)
    df = a.run.scalars
    assert df[df["metric"] == "loss"]["value"].tolist() == [2478.5229, 2477.5913, 2478.0564]
    # the same length, so every offset and line number holds; TF's eager repr and print(name, tensor) too
    for raw, want in ((b"loss: tf.Tensor(nan, shape=(), dtype=float32)", b"loss: nan"),
                      (b"loss tensor(0.6931, grad_fn=<NllLossBackward0>)", b"loss 0.6931")):
        out = untensor(raw)
        assert len(out) == len(raw) and out.rstrip() == want


def test_tensor_dicts_lists_and_code_keep_their_form(tmp_path: Path):
    from autopsy.ingest.text_stream import untensor

    for raw in (b"{'loss_classifier': tensor(0.6958, device='cuda:0', grad_fn=<NllLossBackward0>)}",  # parse_tensor_dicts
                b"Gradiente:  tensor([-969.7510,    0.0000,       nan],", b"x = torch.tensor(0.5)"):
        assert untensor(raw) == raw


# -- InsightFace arcface_torch's progress line --------------------------------------------------------------------------

# https://github.com/deepinsight/insightface/issues/2262 (as pasted): utils_logging.CallBackLogging under fp16, the
# GradScaler's scale printed "%2.f" (0: below 0.5, collapsed)
INSIGHT_2262 = """Training: 2023-03-14 09:08:43,293-Speed 2178.40 samples/sec   Loss nan   LearningRate 0.001000   Epoch: 0   Global Step: 20   Fp16 Grad Scale:  0   Required: 194 hours
Training: 2023-03-14 09:08:47,984-Speed 2183.37 samples/sec   Loss nan   LearningRate 0.001000   Epoch: 0   Global Step: 30   Fp16 Grad Scale:  0   Required: 144 hours
Training: 2023-03-14 09:08:52,689-Speed 2177.01 samples/sec   Loss nan   LearningRate 0.001000   Epoch: 0   Global Step: 40   Fp16 Grad Scale:  0   Required: 120 hours
"""


def test_insightface_lines_give_loss_lr_and_the_fp16_scale(tmp_path: Path):
    a = _run_in(tmp_path, 0, INSIGHT_2262)
    df = a.run.scalars
    assert df[df["metric"] == "loss_scale"]["step"].tolist() == [20, 30, 40]
    assert df[df["metric"] == "learning_rate"]["value"].tolist() == [0.001] * 3
    assert _verdict(a) == ("failed", "fp16_overflow")  # was inconclusive: the scale named fp16


# -- TensorFlow's CheckNumerics failing: a NaN check, not an unknown crash -------------------------------------------------

# https://github.com/google-research/bert/issues/92 (as pasted): tf.clip_by_global_norm's own check on the gradients
BERT_92 = """    run_metadata)
tensorflow.python.framework.errors_impl.InvalidArgumentError: Found Inf or NaN global norm. : Tensor had NaN values
\t [[{{node VerifyFinite/CheckNumerics}} = CheckNumerics[T=DT_FLOAT, message="Found Inf or NaN global norm.", _device="/job:localhost/replica:0/task:0/device:GPU:0"](global_norm/global_norm)]]
"""
# https://github.com/tensorflow/tpu/issues/759 (as pasted): the op's message on the line after the exception's
TPU_759 = """tensorflow.python.framework.errors_impl.InvalidArgumentError: From /job:worker/replica:0/task:0:
Gradient for resnet101/batch_normalization_10/gamma:0 is NaN : Tensor had NaN values
         [[node CheckNumerics_31 (defined at /usr/local/lib/python3.7/dist-packages/tensorflow_estimator/python/estimator/tpu/tpu_estimator.py:240) ]]
"""


def test_a_check_numerics_failure_is_a_nan_stop_not_a_crash(tmp_path: Path):
    for i, (log, tensor) in enumerate(((BERT_92, "Found Inf or NaN global norm"),
                                       (TPU_759, "Gradient for resnet101/batch_normalization_10/gamma:0 is NaN"))):
        a = _run_in(tmp_path, i, log)
        stops = [e for e in a.run.events if e.kind == "nan_stop"]
        assert stops and stops[0].data["tensor"] == tensor
        assert _verdict(a)[1] != "crash"  # was "Crashed with InvalidArgumentError"
        crash = _finding(a, "CRASH001")
        assert crash is None or crash.severity == "info"


# -- cuBLAS failures explained --------------------------------------------------------------------------------------------

# messages as in the titles of NVIDIA/TensorRT-LLM#5390 and EleutherAI/lm-evaluation-harness#1689
CUBLAS_EXEC = ("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, "
               "n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, compute_\n")
CUBLAS_INIT = "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`\n"


def test_cublas_failures_are_explained_with_their_usual_causes(tmp_path: Path):
    a = _run_in(tmp_path, 0, CUBLAS_EXEC)
    f = _finding(a, "CRASH001")
    assert "cuBLAS matrix multiply" in f.title
    assert any("CUDA_LAUNCH_BLOCKING=1" in r and "resize_token_embeddings" in r for r in f.remedies)
    b = _run_in(tmp_path, 1, CUBLAS_INIT)
    g = _finding(b, "CRASH001")
    assert "cuBLAS could not initialise" in g.title and "memory" in g.message


# -- GRPO's zero-advantage groups: a zero gradient with every group's rewards equal is no frozen weight -----------------

# https://github.com/huggingface/trl/issues/3857 (the record as pasted; the thread shows the next one opening the same
# way, "{'loss': 0.0, 'grad_norm': 0.0, 'learning_rate'"), here at five consecutive steps: the shape ms-swift#4547's
# maintainer explains ("Because the reward_std is 0, the gradient is equal to 0 according to the formula"; the reporter
# changed the reward function and it trained)
TRL_3857_RECORD = ("{'loss': 0.0, 'grad_norm': 0.0, 'learning_rate': 1.7050844078611056e-06, 'num_tokens': 1751675.0, "
                   "'completions/mean_length': 701.8125, 'completions/clipped_ratio': 0.0, "
                   "'rewards/json_format_reward/mean': 2.0, 'rewards/json_format_reward/std': 0.0, 'reward': 3.0, "
                   "'reward_std': 0.0, 'frac_reward_zero_std': 1.0, 'clip_ratio/region_mean': 0.0, 'epoch': 0.33}\n")
# https://github.com/modelscope/ms-swift/issues/5571 (the record as pasted, repeated likewise): grad_norm 0 while the
# groups' rewards differ (reward_std 0.44, frac_reward_zero_std 0.0): not zero advantages
SWIFT_5571_RECORD = ("{'loss': -0.0, 'grad_norm': 0.0, 'learning_rate': 2.6e-07, 'reward': 0.34375, 'reward_std': "
                     "0.4397946, 'frac_reward_zero_std': 0.0, 'completions/clipped_ratio': 0.0, 'kl': 0.0, 'epoch': 0.0}\n")


def test_zero_gradients_with_equal_rewards_in_every_group_are_zero_advantages(tmp_path: Path):
    a = _run_in(tmp_path, 0, TRL_3857_RECORD * 5)
    assert _verdict(a) == ("failed", "zero_advantage_groups")  # was gradientless_params
    f = next(f for f in a.diagnosis.findings if f.root_cause == "zero_advantage_groups")
    assert any("reward_std = 0" in e.detail for e in f.evidence)
    assert any("num_generations" in r for r in f.remedies)


def test_zero_gradients_while_rewards_differ_are_not_zero_advantages(tmp_path: Path):
    a = _run_in(tmp_path, 0, SWIFT_5571_RECORD * 5)
    assert not any(f.root_cause == "zero_advantage_groups" for f in a.diagnosis.findings)


# -- sequences longer than the model's maximum: position ids past the position embeddings, not the vocabulary -------------

# https://github.com/huggingface/transformers/issues/14384 (its title, the tokenizer's warning, then the CUDA asserts of
# the embedding lookup as pasted)
HF_14384 = """Token indices sequence length is longer than the specified maximum sequence length for this model (1034 > 1024). Running this sequence through the model will result in indexing errors
/tmp/pip-req-build-pma2oi4d/aten/src/ATen/native/cuda/Indexing.cu:702: indexSelectLargeIndex: block: [176,0,0], thread: [21,0,0] Assertion `srcIndex < srcSelectDimSize` failed.
/tmp/pip-req-build-pma2oi4d/aten/src/ATen/native/cuda/Indexing.cu:702: indexSelectLargeIndex: block: [176,0,0], thread: [22,0,0] Assertion `srcIndex < srcSelectDimSize` failed.
"""
# https://github.com/haotian-liu/LLaVA/issues/999 (as pasted): the warning alone, training went on (the inputs were
# truncated afterwards): nothing failed
LLAVA_999 = ("Token indices sequence length is longer than the specified maximum sequence length for this model (3278 > "
             "2048). Running this sequence through the model will result in indexing errors\n")


def test_a_too_long_sequence_then_an_index_error_is_the_position_embedding(tmp_path: Path):
    a = _run_in(tmp_path, 0, HF_14384)
    f = _finding(a, "VOCAB001")
    assert f is not None and "position embeddings" in f.title and "1034 > 1024" in f.title
    assert any("truncation=True, max_length=1024" in r for r in f.remedies)
    assert _verdict(a) == ("failed", "vocab_mismatch")


def test_the_too_long_warning_alone_is_no_failure(tmp_path: Path):
    a = _run_in(tmp_path, 0, LLAVA_999)
    assert _finding(a, "VOCAB001") is None
    assert _verdict(a)[0] != "failed"


# https://github.com/pyg-team/pytorch_geometric/issues/1902 (as pasted, the traceback's end): an extension built for
# another CUDA than the environment's
PYG_1902 = """  File "/root/anaconda3/lib/python3.7/site-packages/torch/_ops.py", line 105, in load_library
    ctypes.CDLL(path)
  File "/root/anaconda3/lib/python3.7/ctypes/__init__.py", line 364, in __init__
    self._handle = _dlopen(self._name, mode)
OSError: libcudart.so.11.0: cannot open shared object file: No such file or directory
"""


def test_a_missing_cuda_runtime_library_is_explained(tmp_path: Path):
    a = _run_in(tmp_path, 0, "Traceback (most recent call last):\n" + PYG_1902)
    f = _finding(a, "CRASH001")
    assert "CUDA library" in f.title and any("torch.version.cuda" in r for r in f.remedies)


# -- DDP's unused parameters ----------------------------------------------------------------------------------------------

# https://github.com/va1shn9v/PromptIR/issues/30 (as pasted); the cause and fix as mmdetection's FAQ states them
# (open-mmlab/mmdetection PR#4742: "parameters that were not used in producing loss ... set find_unused_parameters")
PROMPTIR_30 = ("RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This "
               "error indicates that your module has parameters that were not used in producing loss. You can enable "
               "unused parameter detection by (1) passing the keyword argument `find_unused_parameters=True` to "
               "`torch.nn.parallel.DistributedDataParallel`; (2) making sure all `forward` function outputs participate "
               "in calculating loss.\n")


def test_ddp_unused_parameters_are_explained(tmp_path: Path):
    a = _run_in(tmp_path, 0, "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    train()\n"
                + PROMPTIR_30)
    f = _finding(a, "CRASH001")
    assert "unused in the loss under DDP" in f.title
    assert any("ddp_find_unused_parameters=True" in r for r in f.remedies)


# https://github.com/AKASHKADEL/dcgan-mnist/pull/2 (as quoted: the DCGAN's BCELoss given integer labels; "Make the real_label
# and fake_label float solves the problem")
DCGAN_PR2 = """Traceback (most recent call last):
  File "main.py", line 72, in <module>
    lossD_real = criterion(output, label)
  File "/usr/local/lib/python3.6/dist-packages/torch/nn/functional.py", line 2526, in binary_cross_entropy
    input, target, weight, reduction_enum)
RuntimeError: Found dtype Long but expected Float
"""


def test_integer_targets_for_a_float_loss_are_explained(tmp_path: Path):
    f = _finding(_run_in(tmp_path, 0, DCGAN_PR2), "CRASH001")
    assert "float-target loss" in f.title and any("labels.float()" in r for r in f.remedies)
