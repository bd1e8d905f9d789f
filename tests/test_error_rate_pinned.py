"""OUT001: an error rate exactly 100% (1.0) at every evaluation is an empty output (CTC blank only); a rate that
falls from 100%, or two evaluations, is a run still starting."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _verdict

# https://github.com/speechbrain/speechbrain/issues/2067 (wav2vec2 + CTC recipe, SpeechBrain's train_log lines as
# pasted): greedy decoding gave only blanks; the developers' advice was that convergence depends on the seed
SPEECHBRAIN_2067 = 'epoch: 1, lr_model: 9.00e-01, lr_wav2vec: 1.00e-04 - train loss: 3.11 - valid loss: 2.99, valid CER: 1.00e+02, valid WER: 1.00e+02\nepoch: 2, lr_model: 9.00e-01, lr_wav2vec: 1.00e-04 - train loss: 2.95 - valid loss: 2.94, valid CER: 1.00e+02, valid WER: 1.00e+02\nepoch: 3, lr_model: 9.00e-01, lr_wav2vec: 1.00e-04 - train loss: 2.92 - valid loss: 2.94, valid CER: 1.00e+02, valid WER: 1.00e+02\nepoch: 4, lr_model: 7.20e-01, lr_wav2vec: 9.00e-05 - train loss: 2.89 - valid loss: 2.93, valid CER: 1.00e+02, valid WER: 1.00e+02\n'


def _hf(wers: list[float]) -> str:
    """HF Trainer evaluation records of a wav2vec2 CTC fine-tune (``eval_wer`` is jiwer's fraction)."""
    return "".join(f"{{'eval_loss': {3.1 - 0.1 * i:.4f}, 'eval_wer': {w}, 'eval_runtime': 12.5, 'epoch': {i + 1}.0}}\n"
                   for i, w in enumerate(wers))


def test_wer_and_cer_exactly_100_at_every_evaluation_are_empty_outputs(tmp_path: Path):
    a = _run(tmp_path, SPEECHBRAIN_2067)
    assert _verdict(a) == ("inconclusive", "unknown")
    f = next(x for x in a.diagnosis.findings if x.code == "OUT001")
    assert f.title == "valid WER is exactly 100% at every one of 4 evaluations: the outputs are empty"
    assert "so is valid CER, while loss 3.11 -> 2.89" in f.message
    assert f.evidence[0].where == "line 1" and f.evidence[1].where == "line 4"


def test_hf_fraction_exactly_one_is_pinned(tmp_path: Path):
    a = _run(tmp_path, _hf([1.0, 1.0, 1.0]))
    f = next(x for x in a.diagnosis.findings if x.code == "OUT001")
    assert "exactly 1.0 (100%)" in f.title


def test_a_rate_that_leaves_100_is_a_run_that_learns(tmp_path: Path):
    a = _run(tmp_path, _hf([1.0, 1.0, 1.0, 0.83, 0.41]))
    assert not [x for x in a.diagnosis.findings if x.code == "OUT001"]


def test_two_evaluations_are_the_start_of_a_run(tmp_path: Path):
    a = _run(tmp_path, _hf([1.0, 1.0]))
    assert not [x for x in a.diagnosis.findings if x.code == "OUT001"]


def test_a_low_percent_rate_that_reads_one_is_not_pinned(tmp_path: Path):
    """A percent WER of about 1 (a very good model) is not the fraction 1.0: not every evaluation gives exactly 1."""
    a = _run(tmp_path, _hf([1.02, 0.98, 1.0]))
    assert not [x for x in a.diagnosis.findings if x.code == "OUT001"]
