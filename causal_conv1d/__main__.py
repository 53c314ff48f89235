"""python -m causal_conv1d: print what this build is and which GPUs it can run on."""

from causal_conv1d import show_config

show_config()
