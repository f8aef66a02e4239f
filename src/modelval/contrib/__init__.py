"""Conventions of particular projects, kept out of the wings' public API: downloading one project's W&B
prediction artifacts (:mod:`modelval.contrib.wandb_artifacts`), whose ECE :mod:`modelval.metrics.artifacts` computes."""
