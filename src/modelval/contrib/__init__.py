"""Conventions of particular projects, kept out of the wings' public API: the ECE of one project's W&B
prediction-artifact folders (:mod:`modelval.contrib.wandb_artifacts`, ``modelval ece``)."""
