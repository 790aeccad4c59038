"""A Hugging Face Trainer script without a line of platform code (liveness comes from the launcher)."""

import os

import common
import tiny_hf
from transformers import Trainer

hp = common.hparams()
args = tiny_hf.training_args(os.path.join(os.environ["TRAIN_CHECKPOINT_DIR"], "hf"), hp, save_strategy="no")
Trainer(model=tiny_hf.gpt2(), args=args, train_dataset=tiny_hf.Tokens(100000),
        callbacks=[tiny_hf.TestLoss(hp["step_delay_s"])]).train()
