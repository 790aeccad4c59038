"""Framework integrations: one call or one callback in the user's code (docs/bring-your-own-trainer.md).

  launcher.integrations.transformers  Hugging Face `Trainer`: `train(trainer)` for `trainer.train()`
  launcher.integrations.lightning     PyTorch Lightning: `Trainer(**trainer_kwargs())`, `fit(trainer, model)`
  launcher.integrations.accelerate    Hugging Face Accelerate: `for step in Run(accelerator).steps(total)`
  launcher.integrations.plain         a plain torchrun loop: `for step in Run(model=..., optimizer=...).steps(total)`

Each imports its framework only when used; torch and the framework are the user's.
"""
