"""Launcher for multi-node PyTorch training jobs (see trainer/README.md).

Submodules usable from any trainer:
  launcher.progress    per-step heartbeat + JSON log lines
  launcher.checkpoint  atomic checkpoints, discovery, verified loading
  launcher.schedule    Young's checkpoint interval and a scheduler
  launcher.contract    the TRAIN_* environment contract
"""
