"""The integrations take the frameworks' own call forms (issue 44, item 2): `fit(trainer, model,
train_dl, val_dl)` as Lightning's `Trainer.fit` takes them, `train(trainer, ...)` as HF's
`Trainer.train`; unknown arguments go through unchanged, and a trainer's own resume argument wins
or is refused with a message, never dropped without a word. In one process, with stand-ins whose
`fit`/`train` have the frameworks' signatures (checked against the installed frameworks)."""

from __future__ import annotations

import importlib.util
import inspect

import pytest
from launcher import worker
from launcher.integrations import _resume

needs_lightning = pytest.mark.skipif(importlib.util.find_spec("lightning") is None, reason="lightning is not installed")
needs_transformers = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                        reason="transformers is not installed")


@pytest.fixture
def solo_worker(tmp_path, monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TRAIN_RESUME_FROM", "TRAIN_CONFIG_ERROR_FILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TRAIN_CHECKPOINT_DIR", str(tmp_path / "checkpoints"))
    monkeypatch.setenv("TRAIN_CONFIG_ERROR_FILE", str(tmp_path / "config-error"))
    (tmp_path / "checkpoints").mkdir()
    monkeypatch.setattr(worker, "_CURRENT", None)
    return tmp_path


class LightningTrainer:
    """Records what `fit` got; its signature is Lightning's (checked below)."""

    def __init__(self) -> None:
        self.called: dict = {}

    def fit(self, model, train_dataloaders=None, val_dataloaders=None, datamodule=None, ckpt_path=None,
            weights_only=None):
        self.called = {"model": model, "train_dataloaders": train_dataloaders, "val_dataloaders": val_dataloaders,
                       "datamodule": datamodule, "ckpt_path": ckpt_path, "weights_only": weights_only}


@needs_lightning
def test_the_stand_in_has_lightning_s_fit_signature():
    import lightning as L  # noqa: N812

    assert list(inspect.signature(L.Trainer.fit).parameters) == list(inspect.signature(LightningTrainer.fit).parameters)


@needs_lightning
def test_lightning_fit_takes_lightning_s_positional_arguments(solo_worker):
    from launcher.integrations.lightning import fit

    trainer = LightningTrainer()
    fit(trainer, "model", "train_dl", "val_dl")
    assert trainer.called == {"model": "model", "train_dataloaders": "train_dl", "val_dataloaders": "val_dl",
                              "datamodule": None, "ckpt_path": None, "weights_only": None}
    fit(trainer, "model", datamodule="dm", weights_only=True)
    assert trainer.called["datamodule"] == "dm" and trainer.called["weights_only"] is True
    with pytest.raises(TypeError):
        fit(trainer, "model", "a", "b", "c", "d", "e", "f")  # more than Lightning's fit takes


@needs_lightning
def test_lightning_refuses_a_checkpoint_it_did_not_verify(solo_worker):
    from launcher.integrations.lightning import fit

    with pytest.raises(SystemExit) as exit_info:
        fit(LightningTrainer(), "model", ckpt_path="/elsewhere/epoch=3.ckpt")
    assert exit_info.value.code == 2
    assert "ckpt_path='/elsewhere/epoch=3.ckpt'" in (solo_worker / "config-error").read_text()


class HFTrainer:
    def __init__(self, resume_arg=None) -> None:
        self.args = type("Args", (), {"output_dir": "", "save_total_limit": 3, "resume_from_checkpoint": resume_arg})()
        self.callback_handler = type("Handler", (), {"callbacks": []})()
        self.called: dict = {}

    def add_callback(self, callback):
        self.callback_handler.callbacks.append(callback)

    def train(self, resume_from_checkpoint=None, trial=None, ignore_keys_for_eval=None):
        self.called = {"resume_from_checkpoint": resume_from_checkpoint, "trial": trial,
                       "ignore_keys_for_eval": ignore_keys_for_eval}


@needs_transformers
def test_hf_train_forwards_its_arguments_and_refuses_the_script_s_own_resume_path(solo_worker, monkeypatch):
    import transformers
    from launcher.integrations import transformers as integration

    assert list(inspect.signature(transformers.Trainer.train).parameters) == \
        list(inspect.signature(HFTrainer.train).parameters)
    monkeypatch.setattr(integration, "argument_problems", lambda args: [])  # the stand-in's args are no dataclass
    trainer = HFTrainer()
    integration.train(trainer, None, "trial", ignore_keys_for_eval=["x"])
    assert trainer.called == {"resume_from_checkpoint": None, "trial": "trial", "ignore_keys_for_eval": ["x"]}
    # the script's --resume_from_checkpoint (TrainingArguments) is not dropped: here refused
    with pytest.raises(SystemExit):
        integration.train(HFTrainer(resume_arg="/models/other-run/checkpoint-500"))
    assert "resume_from_checkpoint='/models/other-run/checkpoint-500'" in (solo_worker / "config-error").read_text()


@pytest.mark.parametrize(("asked", "newest", "kind"), [
    (None, (True,), _resume.Asked.LAUNCHERS),
    (False, (True,), _resume.Asked.LAUNCHERS),      # HF maps False to None itself
    (True, (True,), _resume.Asked.LAUNCHERS),       # HF: the newest checkpoint in output_dir
    ("last", ("last",), _resume.Asked.LAUNCHERS),   # Lightning: the newest last*.ckpt
    ("/ck/checkpoint-8", (True,), _resume.Asked.JOBS_OWN),  # run_clm.py's get_last_checkpoint(output_dir)
    ("/ck", (True,), _resume.Asked.REFUSED),
    ("/ck-other/checkpoint-8", (True,), _resume.Asked.REFUSED),
    ("best", ("last",), _resume.Asked.REFUSED),
    (1, (True,), _resume.Asked.REFUSED),
])
def test_which_resume_arguments_the_launcher_takes(asked, newest, kind):
    assert _resume.classify(asked, "/ck", newest) is kind


def test_a_path_in_the_job_s_own_directory_gives_way_to_the_verified_choice_aloud(solo_worker, capsys):
    w = worker.current()
    asked = str(solo_worker / "checkpoints" / "checkpoint-12")
    assert _resume.resume_argument(w, asked, None, name="resume_from_checkpoint", newest=(True,)) is None
    assert '"event":"resume_argument_replaced"' in capsys.readouterr().out
